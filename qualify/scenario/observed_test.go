package scenario

import (
	"context"
	"io"
	"os"
	"testing"
	"time"

	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/qualify/observer"
	"github.com/qualbox/qualbox/sandboxapi"
)

// A "before" snapshot with read errors fails the scenario instead of
// letting unreadable limits pass as unlimited.
func TestCheckReadable(t *testing.T) {
	scope := observer.Scope{PID: 1, Version: 2, Dirs: map[string]string{"memory": "x", "pids": "x", "cpu": "x"}}
	rec := NewRecord()
	assert.Assert(t, !checkReadable(rec, "a: before", scope.Read(os.DirFS(t.TempDir()), "before")))
	c := rec.Snapshot().Checks[0]
	assert.Assert(t, !c.OK && c.Name == "a: before read every file", "%+v", c)
}

// The death case's tracked owner reports the latest record set.
func TestTrackedOwner(t *testing.T) {
	var o trackedOwner
	assert.Equal(t, len(o.RecoveryRecord().Resources), 0)
	r1 := sandboxapi.RecoveryRecord{SandboxID: "one"}
	o.set(recordOwner{r: r1})
	assert.Equal(t, o.RecoveryRecord().SandboxID, sandboxapi.SandboxID("one"))
	o.set(recordOwner{r: sandboxapi.RecoveryRecord{SandboxID: "two"}})
	assert.Equal(t, o.RecoveryRecord().SandboxID, sandboxapi.SandboxID("two"))
	assert.ErrorContains(t, o.Destroy(context.Background()), "record only")
}

// unsettledProcess never yields a receipt, like a process whose sandbox's
// stop failed: Wait blocks until ctx ends, and the streams end only when
// closed.
type unsettledProcess struct{ stdout, stderr *io.PipeReader }

func (p unsettledProcess) Stdin() io.WriteCloser { return nopWriteCloser{io.Discard} }
func (p unsettledProcess) Stdout() io.ReadCloser { return p.stdout }
func (p unsettledProcess) Stderr() io.ReadCloser { return p.stderr }
func (unsettledProcess) Wait(ctx context.Context) (sandboxapi.Exit, error) {
	<-ctx.Done()
	return sandboxapi.Exit{}, ctx.Err()
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// proc.wait is bounded by waitBound and ends the stream readers, so an
// unsettled receipt fails the scenario instead of hanging the run.
func TestProcWaitBounded(t *testing.T) {
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	defer outW.Close()
	defer errW.Close()
	r := &proc{p: unsettledProcess{outR, errR}, bound: 50 * time.Millisecond}
	r.wg.Add(2)
	go func() { defer r.wg.Done(); _, r.outErr = io.Copy(&r.stdout, r.p.Stdout()) }()
	go func() { defer r.wg.Done(); _, r.errErr = io.Copy(&r.stderr, r.p.Stderr()) }()
	done := make(chan error, 1)
	go func() { _, err := r.wait(context.Background()); done <- err }()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	case <-time.After(10 * time.Second):
		t.Fatal("proc.wait did not return after its bound")
	}
	pol := sandboxapi.Policy{Deadlines: sandboxapi.Deadlines{StartupMs: 300000, CleanupMs: 120000}}
	assert.Equal(t, waitBound(pol), 540*time.Second)
}
