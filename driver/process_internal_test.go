package driver

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/sandboxapi"
)

// hijackFake is a fake Engine whose POST /exec/{id}/start answers with head
// and then stream, written raw on the hijacked connection. A real Engine
// never sends an oversize head; that is what the fake is for.
func hijackFake(t *testing.T, head string, stream []byte) *engine {
	t.Helper()
	sock := fakeEngine(t, func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/start") {
			http.NotFound(w, r)
			return
		}
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		io.WriteString(conn, head)
		conn.Write(stream)
	})
	eng, err := newEngine(sock, "1.41")
	assert.NilError(t, err)
	t.Cleanup(func() { eng.close() })
	return eng
}

// The exec start reply head is bounded: a head over MaxUpgradeHeadBytes is
// a stream_failure, and the stream bytes that came with a normal head are
// kept.
func TestExecStartHeadIsBounded(t *testing.T) {
	ctx := context.Background()
	long := "HTTP/1.1 101 UPGRADED\r\nX-Pad: " + strings.Repeat("a", 1<<20) + "\r\n\r\n"
	_, _, err := hijackFake(t, long, nil).startExec(ctx, "e1")
	var op *sandboxapi.OperationError
	assert.Assert(t, errors.As(err, &op), "got %v", err)
	assert.Check(t, is.Equal(op.Code, sandboxapi.CodeStreamFailure))
	assert.Check(t, is.ErrorContains(err, "exceeds 65536 bytes"))

	ok := "HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.multiplexed-stream\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n"
	conn, stream, err := hijackFake(t, ok, frame(1, "early")).startExec(ctx, "e1")
	assert.NilError(t, err)
	defer conn.Close()
	got, err := io.ReadAll(stream)
	assert.NilError(t, err)
	assert.Check(t, is.DeepEqual(got, frame(1, "early")))

	_, _, err = hijackFake(t, "HTTP/1.1 409 Conflict\r\nContent-Length: 2\r\n\r\n{}", nil).startExec(ctx, "e1")
	assert.Check(t, errors.As(err, &op) && op.Code == sandboxapi.CodeDriverFailure, "got %v", err)
}

// fakeProcess is a process of an inert sandbox (every resource planned, so
// its Stop touches no Engine) whose exec inspect comes from a fake Engine
// reporting exit code 0, and whose attach stream is the returned engine
// side of a net.Pipe.
func fakeProcess(t *testing.T, cleanupMs int64) (*process, *sandboxapi.OwnedStreams, net.Conn) {
	t.Helper()
	sock := fakeEngine(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"ID":"e1","ContainerID":"c1","Running":false,"ExitCode":0}`)
	})
	eng, err := newEngine(sock, "1.41")
	assert.NilError(t, err)
	t.Cleanup(func() { eng.close() })
	b := testBackend(t)
	policy := testPolicy()
	policy.Deadlines = sandboxapi.Deadlines{StartupMs: 5000, CleanupMs: cleanupMs}
	policy.Streams = sandboxapi.StreamLimits{MaxBufferedInputBytes: 1 << 20, MaxBufferedOutputBytes: 1 << 20, HighWaterMarkBytes: 64 << 10}
	s := newSandbox(b, policy, nil, newRecoveryRecord(&b.cfg, b.ns, b.profile.BackendRevision, policy))
	s.started = true
	s.record.Phase = sandboxapi.PhaseRunning
	pr, err := s.ReserveProcess(sandboxapi.ProcessSpec{Executable: "/bin/true", Cwd: "/"})
	assert.NilError(t, err)
	p := pr.(*process)
	ours, theirs := net.Pipe()
	t.Cleanup(func() { ours.Close(); theirs.Close() })
	owned := p.own(eng, "e1", "c1", ours, bufio.NewReader(ours))
	return p, owned, theirs
}

// An oversize frame declaration is output_limit, not stream_failure.
func TestOversizeFrameIsOutputLimit(t *testing.T) {
	_, owned, engineSide := fakeProcess(t, 5000)
	var hdr [8]byte
	hdr[0] = 1
	binary.BigEndian.PutUint32(hdr[4:], FrameLimit+1)
	go engineSide.Write(hdr[:])
	go io.Copy(io.Discard, owned.Stderr())
	_, err := io.ReadAll(owned.Stdout())
	var op *sandboxapi.OperationError
	assert.Assert(t, errors.As(err, &op), "got %v", err)
	assert.Check(t, is.Equal(op.Code, sandboxapi.CodeOutputLimit), "got %v", err)
}

// After the exit receipt the driver does not wait for the Engine to close
// the attach stream: past the drain bound (cleanupMs) readers get
// stream_failure, and the receipt stays exit 0.
func TestStreamDrainAfterExitIsBounded(t *testing.T) {
	_, owned, engineSide := fakeProcess(t, 300)
	go engineSide.Write(frame(1, "hi\n")) // and never close
	go io.Copy(io.Discard, owned.Stderr())
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = io.ReadAll(owned.Stdout()); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("stdout did not end after the exit receipt")
	}
	assert.Check(t, is.Equal(string(out), "hi\n"))
	var op *sandboxapi.OperationError
	assert.Check(t, errors.As(err, &op) && op.Code == sandboxapi.CodeStreamFailure, "got %v", err)
	assert.Check(t, is.ErrorContains(err, "after the exit receipt"))
	exit, werr := owned.Wait(context.Background())
	assert.NilError(t, werr)
	assert.Check(t, is.Equal(exit, sandboxapi.Exited(0)))
}
