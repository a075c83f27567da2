package driver_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/driver/internal/enginetest"
	"github.com/qualbox/qualbox/qualify/faultproxy"
	"github.com/qualbox/qualbox/sandboxapi"
)

// otherDaemonInfo is the real Engine's /info with another daemon ID: every
// admission check still passes, only the identity differs.
func otherDaemonInfo(t *testing.T) []byte {
	t.Helper()
	res, err := enginetest.Client(t).Info(context.Background(), client.InfoOptions{})
	assert.NilError(t, err)
	info := res.Info
	info.ID = "QUAL:BOXO:THER:DAEM:ON00:0000:0000:0000:0000:0000:0000:0000"
	b, err := json.Marshal(info)
	assert.NilError(t, err)
	return b
}

func computeID(t *testing.T, sb sandboxapi.Sandbox) string {
	t.Helper()
	for _, r := range sb.RecoveryRecord().Resources {
		if r.Role == sandboxapi.RoleCompute {
			return r.Identity.ID
		}
	}
	t.Fatal("no compute resource")
	return ""
}

func isState(err error) bool {
	var st *sandboxapi.StateError
	return errors.As(err, &st)
}

// The daemon is re-admitted before exec, import and export, not only before
// cleanup: behind a proxy that reports another daemon ID after start, each
// is refused with a *sandboxapi.StateError and no exec is created.
func TestOperationsReadmitTheDaemon(t *testing.T) {
	proxy := newProxy(t)
	b := newBackend(t, viaProxy(proxy))
	sb := started(t, b, enginetest.Policy())
	fresh := started(t, b, enginetest.Policy()) // for import: sb's process will be reserved
	other := faultproxy.ReplaceBody(faultproxy.Request("GET", "/info"), "application/json", otherDaemonInfo(t))
	proxy.SetRules(other)
	t.Cleanup(func() { proxy.SetRules() }) // before the destroys registered above
	ctx := context.Background()

	pr, err := sb.ReserveProcess(sandboxapi.ProcessSpec{Executable: "/bin/true", Cwd: "/"})
	assert.NilError(t, err)
	_, err = pr.Start(ctx)
	assert.Check(t, isState(err) && strings.Contains(err.Error(), "QUAL:BOXO"), "exec: got %v", err)
	for _, x := range proxy.Seen() {
		assert.Check(t, x.Path != "/containers/"+computeID(t, sb)+"/exec", "exec created: %+v", x)
	}

	err = transferer(t, fresh).ImportTree(ctx, &memSource{ents: []sandboxapi.Entry{dirE("d", 0o755)}}, sandboxapi.TransferOptions{})
	assert.Check(t, isState(err), "import: got %v", err)

	proxy.SetRules()
	assert.NilError(t, fresh.Stop(ctx))
	proxy.SetRules(other)
	sink := &recordingSink{}
	err = transferer(t, fresh).ExportTree(ctx, sandboxapi.Selection{Kind: sandboxapi.SelectWhole}, sink, sandboxapi.TransferOptions{})
	assert.Check(t, isState(err), "export: got %v", err)
	assert.Check(t, !sink.committed)
	proxy.SetRules()
}

// The workload is checked active before exec create: a paused compute
// container is refused with a *sandboxapi.StateError, not sent an exec.
func TestExecRequiresRunningCompute(t *testing.T) {
	b := newBackend(t)
	sb := started(t, b, enginetest.Policy())
	cli := enginetest.Client(t)
	id := computeID(t, sb)
	_, err := cli.ContainerPause(context.Background(), id, client.ContainerPauseOptions{})
	assert.NilError(t, err)
	t.Cleanup(func() { cli.ContainerUnpause(context.Background(), id, client.ContainerUnpauseOptions{}) })
	pr, err := sb.ReserveProcess(sandboxapi.ProcessSpec{Executable: "/bin/true", Cwd: "/"})
	assert.NilError(t, err)
	_, err = pr.Start(context.Background())
	assert.Check(t, isState(err) && strings.Contains(err.Error(), "not running"), "got %v", err)
}

// The export accessor is re-inspected before each export: one that was
// started behind the driver's back no longer qualifies.
func TestExportReinspectsTheAccessor(t *testing.T) {
	b := newBackend(t)
	sb := started(t, b, enginetest.Policy())
	ctx := context.Background()
	assert.NilError(t, sb.Stop(ctx))
	var accessor string
	for _, r := range sb.RecoveryRecord().Resources {
		if r.Role == sandboxapi.RoleExport {
			accessor = r.Identity.ID
		}
	}
	_, err := enginetest.Client(t).ContainerStart(ctx, accessor, client.ContainerStartOptions{})
	assert.NilError(t, err)
	sink := &recordingSink{}
	err = transferer(t, sb).ExportTree(ctx, sandboxapi.Selection{Kind: sandboxapi.SelectWhole}, sink, sandboxapi.TransferOptions{})
	var rb *driver.ReadbackError
	assert.Check(t, errors.As(err, &rb) && strings.Contains(err.Error(), "never started"), "got %v", err)
	assert.Check(t, !sink.committed)
}

// The execution deadline starts at launch entry: an exec start the Engine
// answers late counts against it, so a 1.5 s deadline expires during a
// launch held for 5 s and Start reports deadline_exceeded.
func TestExecutionDeadlineStartsAtLaunchEntry(t *testing.T) {
	proxy := newProxy(t)
	b := newBackend(t, viaProxy(proxy))
	policy := enginetest.Policy()
	policy.Execution = sandboxapi.Execution{Kind: sandboxapi.ExecutionDeadline, TimeoutMs: 1500}
	sb := started(t, b, policy)
	proxy.SetRules(faultproxy.Delay(faultproxy.Request("POST", `/exec/[^/]+/start`), 5*time.Second))
	pr, err := sb.ReserveProcess(sandboxapi.ProcessSpec{Executable: "/bin/true", Cwd: "/"})
	assert.NilError(t, err)
	t0 := time.Now()
	_, err = pr.Start(context.Background())
	assert.Check(t, isOp(err, sandboxapi.CodeDeadlineExceeded), "got %v", err)
	assert.Check(t, time.Since(t0) < 5*time.Second, "Start returned after %v", time.Since(t0))
}

// Transfers bound the Engine connection, response head and upload
// acknowledgement by deadlines.startupMs even without a transfer deadline:
// an import whose PUT the Engine never answers, and an export whose GET it
// never answers, end with deadline_exceeded instead of hanging.
func TestTransferObservationsAreBounded(t *testing.T) {
	proxy := newProxy(t)
	b := newBackend(t, viaProxy(proxy))
	policy := enginetest.Policy()
	policy.Deadlines.StartupMs = 20000 // start must fit too, on a loaded host
	sb := started(t, b, policy)
	ctx := context.Background()
	bounded := func(what string, f func() error) {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- f() }()
		select {
		case err := <-done:
			assert.Check(t, isOp(err, sandboxapi.CodeDeadlineExceeded), "%s: got %v", what, err)
		case <-time.After(90 * time.Second):
			t.Fatalf("%s did not end within 90 s without a transfer deadline", what)
		}
	}
	proxy.SetRules(faultproxy.Delay(faultproxy.Request("PUT", `/containers/[^/]+/archive`), time.Hour))
	bounded("import", func() error {
		return transferer(t, sb).ImportTree(ctx, &memSource{ents: []sandboxapi.Entry{dirE("d", 0o755)}}, sandboxapi.TransferOptions{})
	})
	proxy.SetRules()
	assert.NilError(t, sb.Stop(ctx))
	proxy.SetRules(faultproxy.Delay(faultproxy.Request("GET", `/containers/[^/]+/archive`), time.Hour))
	bounded("export", func() error {
		return transferer(t, sb).ExportTree(ctx, sandboxapi.Selection{Kind: sandboxapi.SelectWhole}, &recordingSink{}, sandboxapi.TransferOptions{})
	})
	proxy.SetRules()
}

// A valid tree whose first entry is named like compression magic ("BZh9",
// bzip2's) imports: the archive's first header is the driver's own, so only
// the driver decides the body's first bytes, and the uncompressed-only
// check still runs on them.
func TestImportFirstEntryNamedLikeCompressionMagic(t *testing.T) {
	b := newBackend(t)
	sb := started(t, b, enginetest.Policy())
	src := &memSource{ents: []sandboxapi.Entry{fileE("BZh91AY&SY", 0o644, 5)}, bodies: map[string]string{"BZh91AY&SY": "bzip?"}}
	assert.NilError(t, transferer(t, sb).ImportTree(context.Background(), src, sandboxapi.TransferOptions{}))
	r := run(t, sb, nil, "/bin/sh", "-c", "cat 'BZh91AY&SY'; stat -c ' %a %u' .")
	assert.Check(t, is.Equal(string(r.stdout), "bzip? 755 65534\n"))
}

// An exec ID that is not 64 lowercase hex is refused before the driver
// starts or records it; a proxy rewrites the exec create reply.
func TestExecIDMustBeExact(t *testing.T) {
	proxy := newProxy(t)
	b := newBackend(t, viaProxy(proxy))
	sb := started(t, b, enginetest.Policy())
	proxy.SetRules(faultproxy.ReplaceBody(faultproxy.Request("POST", `/containers/[^/]+/exec`), "application/json", []byte(`{"Id":"e1"}`)))
	pr, err := sb.ReserveProcess(sandboxapi.ProcessSpec{Executable: "/bin/true", Cwd: "/"})
	assert.NilError(t, err)
	_, err = pr.Start(context.Background())
	assert.Check(t, isOp(err, sandboxapi.CodeDriverFailure) && strings.Contains(err.Error(), "64 lowercase hex"), "got %v", err)
	proxy.SetRules()
}
