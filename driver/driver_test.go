package driver_test

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/poll"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/driver/internal/enginetest"
	"github.com/qualbox/qualbox/sandboxapi"
)

func TestNewRejectsInvalidConfig(t *testing.T) {
	good := driver.Config{
		Profile: "linux-x64-cgroupv1", Endpoint: "unix:///var/run/docker.sock", Namespace: "ns",
		SpillDirectory: "/tmp", ImageID: "sha256:" + strings.Repeat("a", 64), User: driver.User{UID: 1000, GID: 1000},
	}
	_, err := driver.New(good)
	assert.NilError(t, err)
	for _, tc := range []struct {
		field  string
		mutate func(*driver.Config)
	}{
		{"Profile", func(c *driver.Config) { c.Profile = "linux-arm" }},
		{"Endpoint", func(c *driver.Config) { c.Endpoint = "tcp://127.0.0.1:2375" }},
		{"Endpoint", func(c *driver.Config) { c.Endpoint = "unix://relative.sock" }},
		{"Endpoint", func(c *driver.Config) { c.Endpoint = "/var/run/../run/docker.sock" }},
		{"Namespace", func(c *driver.Config) { c.Namespace = "a/b" }},
		{"Namespace", func(c *driver.Config) { c.Namespace = "" }},
		{"SpillDirectory", func(c *driver.Config) { c.SpillDirectory = "spill" }},
		{"SpillDirectory", func(c *driver.Config) { c.SpillDirectory = "/tmp/" }},
		{"ImageID", func(c *driver.Config) { c.ImageID = "busybox:latest" }},
		{"ImageID", func(c *driver.Config) { c.ImageID = "sha256:" + strings.Repeat("A", 64) }},
		{"User.UID", func(c *driver.Config) { c.User.UID = 0 }},
		{"User.GID", func(c *driver.Config) { c.User.GID = 262144 }},
		{"Datasets[1].Name", func(c *driver.Config) {
			d := driver.Dataset{Name: "ref", ImageID: good.ImageID}
			c.Datasets = []driver.Dataset{d, d}
		}},
		{"Datasets[0].Subpath", func(c *driver.Config) {
			etc := "../etc"
			c.Datasets = []driver.Dataset{{Name: "ref", ImageID: good.ImageID, Subpath: &etc}}
		}},
	} {
		t.Run(tc.field, func(t *testing.T) {
			cfg := good
			tc.mutate(&cfg)
			_, err := driver.New(cfg)
			var ve *sandboxapi.ValidationError
			assert.Assert(t, errors.As(err, &ve), "got %v", err)
			assert.Assert(t, is.Len(ve.Issues, 1), "%v", err)
			assert.Equal(t, ve.Issues[0].PathString(), tc.field)
		})
	}
}

// Every configuration problem is reported at once, each under its field
// path, as policy parsing does (docs/contract.md#errors).
func TestNewReportsEveryConfigProblem(t *testing.T) {
	abs := "/abs"
	_, err := driver.New(driver.Config{
		Profile: "linux-x64-cgroupv1", Endpoint: "tcp://127.0.0.1:2375", Namespace: "ns", SpillDirectory: "spill",
		ImageID: "busybox", User: driver.User{UID: 0, GID: 1},
		Datasets: []driver.Dataset{{Name: "A", ImageID: "x", Subpath: &abs}},
	})
	var ve *sandboxapi.ValidationError
	assert.Assert(t, errors.As(err, &ve), "got %v", err)
	var paths []string
	for _, i := range ve.Issues {
		paths = append(paths, i.PathString())
	}
	assert.DeepEqual(t, paths, []string{"Endpoint", "SpillDirectory", "ImageID", "User.UID",
		"Datasets[0].Name", "Datasets[0].ImageID", "Datasets[0].Subpath"})
}

func TestUnknownProfileListsKnownOnes(t *testing.T) {
	_, err := driver.New(driver.Config{Profile: "nope"})
	assert.ErrorContains(t, err, "linux-x64-cgroupv1")
}

// Reserve is synchronous and inert: it succeeds against a socket that does
// not exist, and rejects what the backend cannot enforce before any effect.
func TestReserveIsInertAndRejectsUnsupported(t *testing.T) {
	b, err := driver.New(driver.Config{
		Profile: "linux-x64-cgroupv1", Endpoint: "unix:///nonexistent/qualbox.sock", Namespace: "ns",
		SpillDirectory: t.TempDir(), ImageID: "sha256:" + strings.Repeat("a", 64), User: driver.User{UID: 1000, GID: 1000},
	})
	assert.NilError(t, err)
	res, err := b.Reserve(sandboxapi.Request{Policy: enginetest.Policy()}, sandboxapi.InProcess())
	assert.NilError(t, err)
	assert.Equal(t, res.RecoveryRecord().Phase, sandboxapi.PhaseReserved)
	assert.NilError(t, res.Destroy(context.Background()), "destroying an unstarted reservation is a no-op")

	quota := enginetest.Policy()
	quota.WorkspaceDiskQuota = sandboxapi.WorkspaceDiskQuota{Kind: sandboxapi.QuotaRequired, Bytes: 1 << 30, Accounting: sandboxapi.AccountingAllocatedBlocks}
	small := enginetest.Policy()
	small.Resources.MemoryBytes = 4 << 20
	cpus := enginetest.Policy()
	cpus.Resources.CPUs = 0.1234567891
	for name, p := range map[string]sandboxapi.Policy{"quota": quota, "memory": small, "cpus": cpus} {
		_, err := b.Reserve(sandboxapi.Request{Policy: p}, sandboxapi.InProcess())
		var unsupported *sandboxapi.UnsupportedError
		assert.Check(t, errors.As(err, &unsupported), "%s: got %v", name, err)
	}
	bad := enginetest.Policy()
	bad.Resources.PIDs = 0
	_, err = b.Reserve(sandboxapi.Request{Policy: bad}, sandboxapi.InProcess())
	var invalid *sandboxapi.ValidationError
	assert.Check(t, errors.As(err, &invalid), "got %v", err)

	// A destroyed reservation never starts: nothing is acquired after cleanup.
	_, err = res.Start(context.Background())
	var state *sandboxapi.StateError
	assert.Check(t, errors.As(err, &state), "start after destroy: %v", err)

	// Start fails at the missing socket and leaves nothing.
	fresh, err := b.Reserve(sandboxapi.Request{Policy: enginetest.Policy()}, sandboxapi.InProcess())
	assert.NilError(t, err)
	_, err = fresh.Start(context.Background())
	assert.Check(t, err != nil && !errors.As(err, &state), "got %v", err)
	assert.Equal(t, fresh.RecoveryRecord().Phase, sandboxapi.PhaseReserved)
}

func TestAdmission(t *testing.T) {
	b := newBackend(t)
	adm, err := b.Admit(context.Background())
	assert.NilError(t, err)
	assert.Check(t, len(adm.Checks) > 15, "every check is recorded")
	assert.Check(t, is.Len(adm.Failed(), 0))
	// How the Engine was built is evidence: its Go release, read from
	// /version's Engine component.
	assert.Check(t, strings.HasPrefix(adm.Engine.GoVersion, "go1."), "GoVersion %q", adm.Engine.GoVersion)

	cgroupv2 := newBackend(t, func(c *driver.Config) { c.Profile = "linux-x64" })
	adm, err = cgroupv2.Admit(context.Background())
	var ae *driver.AdmissionError
	assert.Assert(t, errors.As(err, &ae), "linux-x64 (cgroup v2) must be rejected here, got %v", err)
	var unsupported *sandboxapi.UnsupportedError
	assert.Check(t, errors.As(err, &unsupported))
	failed := map[string]bool{}
	for _, c := range ae.Failed {
		failed[c.Name] = true
	}
	assert.Check(t, failed["/info CgroupVersion"] && failed["/info CgroupDriver"], "failed: %v", ae.Failed)
	assert.Check(t, len(adm.Failed()) == len(ae.Failed))
}

func TestLifecycle(t *testing.T) {
	b := newBackend(t)
	res, err := b.Reserve(sandboxapi.Request{Policy: enginetest.Policy()}, sandboxapi.InProcess())
	assert.NilError(t, err)
	t.Cleanup(func() { destroyAndCheck(t, res) })
	sb, err := res.Start(context.Background())
	assert.NilError(t, err)
	_, err = res.Start(context.Background())
	var state *sandboxapi.StateError
	assert.Check(t, errors.As(err, &state), "start is once-only: %v", err)

	eff := sb.Effective()
	assert.Check(t, eff.NonRoot && eff.ReadOnlyRoot)
	assert.Check(t, is.Equal(eff.Resources, enginetest.Policy().Resources))
	assert.NilError(t, eff.Validate())

	rec := sb.RecoveryRecord()
	assert.Equal(t, rec.Phase, sandboxapi.PhaseRunning)
	assert.Equal(t, rec.Authority.Kind, sandboxapi.AuthorityVerified)
	for _, r := range rec.Resources {
		assert.Check(t, is.Equal(r.Identity.Kind, sandboxapi.IdentityIdentified), "%s", r.Role)
	}

	r := run(t, sb, nil, "/bin/sh", "-c", "echo out; echo err >&2; id -u; pwd; exit 7")
	assert.Check(t, is.Equal(string(r.stdout), "out\n65534\n/workspace/work\n"))
	assert.Check(t, is.Equal(string(r.stderr), "err\n"))
	assert.Check(t, is.Equal(r.exit, sandboxapi.Exited(7)))

	_, err = sb.ReserveProcess(sandboxapi.ProcessSpec{Executable: "/bin/true", Cwd: "/"})
	assert.Check(t, errors.As(err, &state), "one process per sandbox: %v", err)

	computeID := rec.Resources[0].Identity.ID
	assert.NilError(t, sb.Stop(context.Background()))
	cli := enginetest.Client(t)
	_, err = cli.ContainerInspect(context.Background(), computeID, client.ContainerInspectOptions{})
	assert.Check(t, err != nil, "compute is removed by stop")
	assert.NilError(t, sb.Stop(context.Background()), "stop is retryable")
	assert.Equal(t, sb.RecoveryRecord().Phase, sandboxapi.PhaseStopped)
	// Stop keeps the volume and the export accessor.
	for _, r := range sb.RecoveryRecord().Resources {
		switch r.Role {
		case sandboxapi.RoleStorage:
			_, err := cli.VolumeInspect(context.Background(), r.Identity.ID, client.VolumeInspectOptions{})
			assert.Check(t, err)
		case sandboxapi.RoleExport:
			_, err := cli.ContainerInspect(context.Background(), r.Identity.ID, client.ContainerInspectOptions{})
			assert.Check(t, err)
		}
	}
	assert.NilError(t, sb.Destroy(context.Background()))
	assert.NilError(t, sb.Destroy(context.Background()), "destroy is retryable")
	assert.Equal(t, sb.RecoveryRecord().Phase, sandboxapi.PhaseDestroyed)
	assertGone(t, sb.RecoveryRecord())
}

func TestProcessEnvironmentConflictsAreUnsupported(t *testing.T) {
	b := newBackend(t)
	sb := started(t, b, enginetest.Policy())
	for _, name := range []string{"HOME", "TMPDIR", "PATH"} {
		_, err := sb.ReserveProcess(sandboxapi.ProcessSpec{Executable: "/bin/true", Cwd: "/", Env: map[string]string{name: "/elsewhere"}})
		var unsupported *sandboxapi.UnsupportedError
		assert.Check(t, errors.As(err, &unsupported), "%s: %v", name, err)
	}
	// Equal values and other variables pass through literally.
	pr, err := sb.ReserveProcess(sandboxapi.ProcessSpec{Executable: "/bin/sh", Args: []string{"-c", `printf "%s|%s|%s" "$HOME" "$GREETING" "$TMPDIR"`}, Cwd: "/", Env: map[string]string{"HOME": "/home/sandbox", "GREETING": "héllo world"}})
	assert.NilError(t, err)
	p, err := pr.Start(context.Background())
	assert.NilError(t, err)
	r := collect(t, p, nil)
	assert.Check(t, is.Equal(string(r.stdout), "/home/sandbox|héllo world|/tmp"))
}

func TestStdinHalfClose(t *testing.T) {
	b := newBackend(t)
	input := []byte(strings.Repeat("qualbox stdin\n", 10000))
	t.Run("cat", func(t *testing.T) {
		r := run(t, started(t, b, enginetest.Policy()), input, "/bin/cat")
		assert.Check(t, is.Equal(string(r.stdout), string(input)))
		assert.Check(t, is.Equal(r.exit, sandboxapi.Exited(0)))
	})
	t.Run("writes after EOF", func(t *testing.T) {
		r := run(t, started(t, b, enginetest.Policy()), input, "/bin/sh", "-c", "wc -c; sleep 0.2; echo after-eof")
		assert.Check(t, is.Equal(strings.TrimSpace(string(r.stdout)), "140000\nafter-eof"))
		assert.Check(t, is.Equal(r.exit, sandboxapi.Exited(0)))
	})
}

// A process that closes its output streams and exits later: stream EOF is
// not an exit, the receipt is the later exit code.
func TestStreamEndBeforeExitIsNotSuccess(t *testing.T) {
	b := newBackend(t)
	r := run(t, started(t, b, enginetest.Policy()), nil, "/bin/sh", "-c", "echo early; exec >&- 2>&-; sleep 1; exit 5")
	assert.Check(t, is.Equal(string(r.stdout), "early\n"))
	assert.Check(t, is.Equal(r.exit, sandboxapi.Exited(5)))
}

func TestStopMidExecIsUnavailable(t *testing.T) {
	b := newBackend(t)
	sb := started(t, b, enginetest.Policy())
	pr, err := sb.ReserveProcess(sandboxapi.ProcessSpec{Executable: "/bin/sleep", Args: []string{"1000"}, Cwd: "/"})
	assert.NilError(t, err)
	p, err := pr.Start(context.Background())
	assert.NilError(t, err)
	time.Sleep(300 * time.Millisecond)
	assert.NilError(t, pr.Stop(context.Background()))
	exit, err := p.Wait(context.Background())
	assert.NilError(t, err)
	assert.Check(t, is.Equal(exit, sandboxapi.Unavailable()), "not a program exit of 137")
	exit2, _ := p.Wait(context.Background())
	assert.Check(t, is.Equal(exit2, exit), "an observed receipt never changes")
}

func TestAbandonedOutputStopsSandbox(t *testing.T) {
	b := newBackend(t)
	sb := started(t, b, enginetest.Policy())
	pr, err := sb.ReserveProcess(sandboxapi.ProcessSpec{Executable: "/bin/sh", Args: []string{"-c", "while :; do echo data; done"}, Cwd: "/"})
	assert.NilError(t, err)
	p, err := pr.Start(context.Background())
	assert.NilError(t, err)
	buf := make([]byte, 10)
	_, err = io.ReadFull(p.Stdout(), buf)
	assert.NilError(t, err)
	assert.NilError(t, p.Stdout().Close())
	exit, err := p.Wait(context.Background())
	assert.NilError(t, err)
	assert.Check(t, is.Equal(exit, sandboxapi.Unavailable()))
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if sb.RecoveryRecord().Phase == sandboxapi.PhaseStopped {
			return poll.Success()
		}
		return poll.Continue("phase %s", sb.RecoveryRecord().Phase)
	}, poll.WithTimeout(30*time.Second))
}

func TestOutputLimitStopsSandbox(t *testing.T) {
	b := newBackend(t)
	policy := enginetest.Policy()
	limit := int64(100000)
	policy.Streams.MaxOutputBytes = &limit
	sb := started(t, b, policy)
	pr, err := sb.ReserveProcess(sandboxapi.ProcessSpec{Executable: "/bin/sh", Args: []string{"-c", "while :; do echo data; done"}, Cwd: "/"})
	assert.NilError(t, err)
	p, err := pr.Start(context.Background())
	assert.NilError(t, err)
	n, err := io.Copy(io.Discard, p.Stdout())
	assert.Check(t, isOp(err, sandboxapi.CodeOutputLimit), "got %v after %d bytes", err, n)
	assert.Check(t, n <= limit)
	exit, err := p.Wait(context.Background())
	assert.NilError(t, err)
	assert.Check(t, is.Equal(exit, sandboxapi.Unavailable()))
}

func TestExecutionDeadlineStopsSandbox(t *testing.T) {
	b := newBackend(t)
	policy := enginetest.Policy()
	// The deadline runs from launch entry, so it must leave room for the
	// launch itself on a loaded host.
	policy.Execution = sandboxapi.Execution{Kind: sandboxapi.ExecutionDeadline, TimeoutMs: 5000}
	sb := started(t, b, policy)
	pr, err := sb.ReserveProcess(sandboxapi.ProcessSpec{Executable: "/bin/sleep", Args: []string{"1000"}, Cwd: "/"})
	assert.NilError(t, err)
	t0 := time.Now()
	p, err := pr.Start(context.Background())
	assert.NilError(t, err)
	exit, err := p.Wait(context.Background())
	assert.NilError(t, err)
	assert.Check(t, is.Equal(exit, sandboxapi.Unavailable()))
	assert.Check(t, time.Since(t0) < 40*time.Second)
	_, err = io.Copy(io.Discard, p.Stdout())
	assert.Check(t, isOp(err, sandboxapi.CodeDeadlineExceeded), "got %v", err)
}

func TestStartupCancellationLeavesNothing(t *testing.T) {
	b := newBackend(t)
	for _, after := range []time.Duration{0, 20 * time.Millisecond, 60 * time.Millisecond, 150 * time.Millisecond, 300 * time.Millisecond} {
		res, err := b.Reserve(sandboxapi.Request{Policy: enginetest.Policy()}, sandboxapi.InProcess())
		assert.NilError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(after, cancel)
		_, err = res.Start(ctx)
		cancel()
		if err != nil {
			assert.Check(t, errors.Is(err, sandboxapi.ErrCancelled), "cancel after %v: %v", after, err)
		}
		destroyAndCheck(t, res)
	}
}

func TestStartRejectsASharedSpillDirectory(t *testing.T) {
	shared := t.TempDir()
	assert.NilError(t, os.Chmod(shared, 0o777))
	b := newBackend(t, func(c *driver.Config) { c.SpillDirectory = shared })
	res, err := b.Reserve(sandboxapi.Request{Policy: enginetest.Policy()}, sandboxapi.InProcess())
	assert.NilError(t, err)
	_, err = res.Start(context.Background())
	var unsupported *sandboxapi.UnsupportedError
	assert.Assert(t, errors.As(err, &unsupported), "got %v", err)
	assert.Check(t, is.Contains(err.Error(), "writable by group or others"))
	assert.Equal(t, res.RecoveryRecord().Phase, sandboxapi.PhaseReserved, "rejected before any Engine effect")
}

// Execution deadlines up to the contract's maximum (2^53-1 ms) clamp
// instead of wrapping: 18446744073709 ms is about 2^64 ns, which wraps to a
// negative time.Duration that would expire the deadline at once.
func TestHugeDeadlinesClampInsteadOfWrapping(t *testing.T) {
	b := newBackend(t)
	for _, ms := range []int64{18446744073709, sandboxapi.MaxSafeInteger} {
		policy := enginetest.Policy()
		policy.Execution = sandboxapi.Execution{Kind: sandboxapi.ExecutionDeadline, TimeoutMs: ms}
		sb := started(t, b, policy)
		r := run(t, sb, nil, "/bin/echo", "still here")
		assert.Check(t, is.Equal(string(r.stdout), "still here\n"), "deadline %d ms", ms)
		assert.Check(t, is.Equal(r.exit, sandboxapi.Exited(0)), "deadline %d ms", ms)
	}
}
