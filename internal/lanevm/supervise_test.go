package lanevm_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/internal/lanevm"
	"github.com/qualbox/qualbox/internal/lanevm/fakeqemu"
)

// This test binary is also the FAKE qemu (internal/lanevm/fakeqemu) the
// supervisor runs in these tests.
func TestMain(m *testing.M) {
	if fakeqemu.Enabled() {
		os.Exit(fakeqemu.Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// fixture is one supervised run of the fake qemu in mode: a dummy guest
// image, a work directory with its share/, and a report directory to
// come.
type fixture struct {
	cfg  lanevm.Config
	fake string // the fake's own state directory
	log  *bytes.Buffer
}

// testBudget bounds each phase to about a second (the fake's normal job
// takes about 0.3 s): the engine phase's bound is set here, without the
// EngineSlack a real guest gets.
func testBudget() lanevm.Budget {
	b := lanevm.NewBudget(2*time.Second, time.Second, 2*time.Second, time.Second)
	b.Phases[1].Bound = time.Second
	b.KillGrace = 300 * time.Millisecond
	return b
}

func newFixture(t *testing.T, mode string, env ...string) fixture {
	t.Helper()
	root := t.TempDir()
	image := filepath.Join(root, "image")
	work := filepath.Join(root, "work")
	fake := filepath.Join(root, "fake")
	for _, d := range []string{image, filepath.Join(work, "share"), fake} {
		assert.NilError(t, os.MkdirAll(d, 0o755))
	}
	for _, f := range []string{"vmlinuz", "initrd.img", "rootfs.img"} {
		assert.NilError(t, os.WriteFile(filepath.Join(image, f), []byte("not a guest image\n"), 0o644))
	}
	assert.NilError(t, os.WriteFile(filepath.Join(image, "BUILD"), []byte("key 0123 base 4567\n"), 0o644))
	// The host's inputs for both steps, so a passed run needs the report's
	// envelope and both exit statuses; host/ as scripts/lanec.sh leaves it.
	assert.NilError(t, os.MkdirAll(filepath.Join(work, "share", "params"), 0o755))
	assert.NilError(t, os.WriteFile(filepath.Join(work, "share", "manifest.yaml"), []byte("profile: linux-x64\n"), 0o644))
	assert.NilError(t, os.WriteFile(filepath.Join(work, "share", "params", "conformance-profile"), []byte("linux-x64\n"), 0o644))
	assert.NilError(t, os.MkdirAll(filepath.Join(work, "host"), 0o755))
	assert.NilError(t, os.WriteFile(filepath.Join(work, "host", "accel.txt"), []byte("accel tcg\nwhy LANEC_ACCEL=tcg\n"), 0o644))
	log := &bytes.Buffer{}
	f := fixture{
		cfg: lanevm.Config{
			QEMU:       os.Args[0],
			QEMUArgs:   []string{"-accel", "tcg,thread=multi", "-cpu", "qemu64"},
			ImageDir:   image,
			KernelArgs: "root=/dev/vda console=ttyS0",
			Work:       work,
			Out:        filepath.Join(root, "reports", "run"),
			Timings:    []lanevm.Timing{{Name: "image_s", Seconds: 1, Says: "lanec.sh image"}},
			Env:        append(fakeqemu.Env(mode, fake), env...),
			Budget:     testBudget(),
			Poll:       10 * time.Millisecond,
			Log:        log,
		},
		fake: fake,
		log:  log,
	}
	// A test that failed with the fake still running does not leave it.
	t.Cleanup(func() {
		if pid := f.pid(t); pid > 0 && alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return f
}

func (f fixture) pid(t *testing.T) int {
	data, err := os.ReadFile(filepath.Join(f.fake, "pid"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	assert.NilError(t, err)
	return pid
}

// supervise runs the fixture and checks what holds after every run: the
// fake qemu is gone, and an exit status matches the kind.
func (f fixture) supervise(t *testing.T, ctx context.Context) (lanevm.Result, time.Duration) {
	t.Helper()
	start := time.Now()
	res, err := lanevm.Supervise(ctx, f.cfg)
	took := time.Since(start)
	assert.NilError(t, err)
	t.Logf("result %s after %s\n%s", res, took.Round(time.Millisecond), f.log)
	if pid := f.pid(t); pid > 0 {
		assert.Check(t, !alive(pid), "fake qemu pid %d is still running", pid)
	}
	assert.Check(t, res.CollectErr)
	return res, took
}

func (f fixture) read(t *testing.T, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(filepath.Dir(f.cfg.Out), rel))
	assert.NilError(t, err)
	return string(data)
}

func (f fixture) powerdownAsked() bool {
	_, err := os.Stat(filepath.Join(f.fake, "powerdown"))
	return err == nil
}

// alive reports whether pid is a live process (not a zombie).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// A normal run: the guest boots, its Engine answers, the job shows its
// progress, reports passed and powers off; the report and the lane's
// files are copied out, and the exit status is 0.
func TestSuperviseNormalRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fakeqemu.Pass)
	res, _ := f.supervise(t, context.Background())
	assert.Check(t, is.Equal(res.Kind, lanevm.GuestPassed))
	assert.Check(t, is.Equal(res.Status, lanevm.StatusPassed))
	assert.Check(t, is.Equal(res.PowerDown, lanevm.OffByItself))
	assert.Check(t, is.Equal(res.ExitStatus(), 0))
	assert.Check(t, is.Equal(res.QEMUExit, "exit status 0"))

	assert.Check(t, is.Equal(f.read(t, "run/evidence.json"), "{\"verdict\":\"passed\"}\n"))
	assert.Check(t, is.Equal(f.read(t, "run/evidence.dsse.json"), "{\"payloadType\":\"fake (not signed)\"}\n"))
	assert.Check(t, is.Contains(f.read(t, "run.lanec/guest/qualify.log"), "scenario 3 passed\n"))
	assert.Check(t, is.Equal(f.read(t, "run.lanec/guest/timings"), "qualify_s 1\n"))
	assert.Check(t, is.Equal(f.read(t, "run.lanec/accel.txt"), "accel tcg\nwhy LANEC_ACCEL=tcg\n"))
	console := f.read(t, "run.lanec/console.log")
	assert.Check(t, is.Contains(console, "Linux version 6.1.0-fake"))
	assert.Check(t, !strings.Contains(console, "\r"), "the console copy keeps carriage returns")
	assert.Check(t, is.Equal(f.read(t, "run.lanec/image.txt"), "key 0123 base 4567\n"))
	assert.Check(t, is.Equal(f.read(t, "run.lanec/result.txt"), "guest-passed: the guest reported passed; qemu exited by itself\n"))
	timings := f.read(t, "run.lanec/timings")
	for _, want := range []string{"image_s 1 (lanec.sh image)\nboot_s ", "\nready_s ", "\nguest_s "} {
		assert.Check(t, is.Contains(timings, want))
	}
	assert.Check(t, !strings.Contains(timings, "qualify_s"), "the guest's timings are mixed with the host's")
	entries, err := os.ReadDir(filepath.Dir(f.cfg.Out))
	assert.NilError(t, err)
	assert.Check(t, is.Len(entries, 2), "a temporary directory is left beside the report")

	log := f.log.String()
	for _, want := range []string{
		"lanec: guest booted after ",
		"lanec: job started after ",
		"  guest qualify| scenario 1 started\n",
		"  guest qualify| scenario 3 passed\n",
		"lanec: qualify exit status 0\n",
		"lanec: conformance exit status 0\n",
		"lanec: timing (guest) qualify_s 1\n",
		"lanec: accelerator tcg\n",
		"lanec: result: guest-passed",
	} {
		assert.Check(t, is.Contains(log, want))
	}
	assert.Check(t, !strings.Contains(log, "last guest console lines"), "a passed run shows the console")

	args, err := os.ReadFile(filepath.Join(f.fake, "args"))
	assert.NilError(t, err)
	img := f.cfg.ImageDir
	assert.Check(t, is.Equal(string(args), strings.Join(append(append(
		[]string{"-name", "qualbox-lanec", "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot"},
		f.cfg.QEMUArgs...),
		"-smp", "2", "-m", "4G",
		"-kernel", img+"/vmlinuz", "-initrd", img+"/initrd.img", "-append", "root=/dev/vda console=ttyS0",
		"-drive", "file="+img+"/rootfs.img,if=virtio,format=raw,snapshot=on",
		"-virtfs", "local,path="+f.cfg.Work+"/share,mount_tag=qualbox,security_model=none,id=qualbox",
		"-nic", "none", "-serial", "file:"+f.cfg.Work+"/console.log", "-monitor", "stdio"), "\n")+"\n"))
	// qemu runs in a process group of its own, out of reach of a
	// terminal's Ctrl-C, which the supervisor turns into a power-down.
	pgid, err := os.ReadFile(filepath.Join(f.fake, "pgid"))
	assert.NilError(t, err)
	assert.Check(t, is.Equal(strings.TrimSpace(string(pgid)), strconv.Itoa(f.pid(t))))
	// The guest read its Engine wait from the budget.
	wait, err := os.ReadFile(filepath.Join(f.cfg.Work, "share", "params", "engine-timeout"))
	assert.NilError(t, err)
	assert.Check(t, is.Equal(string(wait), "1\n"))
}

// The guest's job reported failure: the run fails (1) and the report is
// still copied out.
func TestSuperviseGuestReportedFailure(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fakeqemu.Fail)
	res, _ := f.supervise(t, context.Background())
	assert.Check(t, is.Equal(res.Kind, lanevm.GuestFailed))
	assert.Check(t, is.Equal(res.Status, lanevm.StatusFailed))
	assert.Check(t, is.Equal(res.ExitStatus(), 1))
	assert.Check(t, is.Equal(f.read(t, "run/evidence.json"), "{\"verdict\":\"passed\"}\n"))
	assert.Check(t, is.Contains(f.log.String(), "lanec: last guest console lines:\n"))
	assert.Check(t, is.Contains(f.log.String(), "  guest| reboot: Power down\n"))
}

// A guest whose Engine never answers: its job reports failure in the
// engine phase, which the result names; no ready_s timing is recorded.
func TestSuperviseEngineNeverAnswers(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fakeqemu.EngineFails)
	res, _ := f.supervise(t, context.Background())
	assert.Check(t, is.Equal(res.Kind, lanevm.GuestFailed))
	assert.Check(t, is.Equal(res.Phase, "engine"))
	assert.Check(t, is.Equal(res.ExitStatus(), 1))
	timings := f.read(t, "run.lanec/timings")
	assert.Check(t, is.Contains(timings, "boot_s "))
	assert.Check(t, !strings.Contains(timings, "ready_s"), timings)
	assert.Check(t, is.Contains(f.log.String(), "lanec: the job reported in the engine phase after "))
	assert.Check(t, is.Contains(f.log.String(), "  guest| lanec-job: the Engine never answered"))
}

// A job that says it was stopped when nobody asked: a failure.
func TestSuperviseStoppedUnasked(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fakeqemu.StoppedUnasked)
	res, _ := f.supervise(t, context.Background())
	assert.Check(t, is.Equal(res.Kind, lanevm.GuestFailed))
	assert.Check(t, is.Equal(res.Status, lanevm.StatusStopped))
	assert.Check(t, is.Equal(res.ExitStatus(), 1))
}

// A status that is none of the job's words is data, not an exit status:
// the run fails (1) naming what the file held, whatever it says.
func TestSuperviseGarbageStatus(t *testing.T) {
	t.Parallel()
	for _, status := range []string{"0; reboot\n", "0\n", "143\n", "passed", "PASSED\n", "passed\npassed\n", strings.Repeat("x", 100000)} {
		t.Run(strconv.Quote(status[:min(len(status), 12)]), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, fakeqemu.Garbage, "FAKE_QEMU_STATUS="+status)
			res, _ := f.supervise(t, context.Background())
			assert.Check(t, is.Equal(res.Kind, lanevm.BadStatus))
			assert.Check(t, is.Equal(res.ExitStatus(), 1))
			var se *lanevm.StatusError
			assert.Assert(t, errors.As(res.StatusErr, &se))
			want := status[:min(len(status), lanevm.MaxStatusBytes)]
			assert.Check(t, is.Equal(string(se.Content), want))
			assert.Check(t, is.Contains(f.log.String(), "lanec: result: bad-status: the guest's job.status holds "+strconv.Quote(want)))
		})
	}
}

// A guest that never sees its Engine: the engine phase outlasts its bound,
// the host asks for the power-down, the guest powers off, and the run
// fails (1) as hung in the engine phase, about one bound after boot.
func TestSuperviseHangInEnginePhase(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fakeqemu.HangBoot)
	res, took := f.supervise(t, context.Background())
	assert.Check(t, is.Equal(res.Kind, lanevm.GuestHung))
	assert.Check(t, is.Equal(res.Phase, "engine"))
	assert.Check(t, is.Equal(res.PowerDown, lanevm.OffOnRequest))
	assert.Check(t, is.Equal(res.ExitStatus(), 1))
	assert.Check(t, f.powerdownAsked(), "no ACPI power-down request reached the guest")
	assert.Check(t, took >= time.Second && took < 5*time.Second, "took %s", took)
	assert.Check(t, is.Contains(f.log.String(), "lanec: the guest did not end its engine phase within 1 s (LANEC_ENGINE_TIMEOUT + 60 s)\n"))
	assert.Check(t, is.Contains(f.log.String(), "lanec: powering the guest down (qemu pid "))
	assert.Check(t, is.Contains(f.read(t, "run.lanec/result.txt"), "guest-hung: the engine phase outlasted its bound; qemu exited on the host's power-down request"))
}

// A job that shows no progress: the job phase's bound ends it; the job,
// stopped, leaves its partial report, which is copied out.
func TestSuperviseHangInJobPhase(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fakeqemu.HangJob)
	res, _ := f.supervise(t, context.Background())
	assert.Check(t, is.Equal(res.Kind, lanevm.GuestHung))
	assert.Check(t, is.Equal(res.Phase, "job"))
	assert.Check(t, is.Equal(res.Status, lanevm.StatusStopped))
	assert.Check(t, is.Equal(res.ExitStatus(), 1))
	assert.Check(t, is.Equal(f.read(t, "run/evidence.json"), "{\"verdict\":\"interrupted\"}\n"))
	assert.Check(t, is.Contains(f.log.String(), "  guest qualify| qualify: interrupted; partial report written\n"))
}

// qemu exits non-zero while the job runs: qemu crashed, in the job
// phase; the last unfinished line of the job's log is shown as such.
func TestSuperviseQEMUCrash(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fakeqemu.Crash)
	res, took := f.supervise(t, context.Background())
	assert.Check(t, is.Equal(res.Kind, lanevm.QEMUCrashed))
	assert.Check(t, is.Equal(res.Phase, "job"))
	assert.Check(t, is.Equal(res.QEMUExit, "exit status 1"))
	assert.Check(t, is.Equal(res.Status, lanevm.NoStatus))
	assert.Check(t, is.Equal(res.ExitStatus(), 1))
	assert.Check(t, took < 3*time.Second, "took %s", took)
	log := f.log.String()
	assert.Check(t, is.Contains(log, "  guest qualify.log| scenario 2 half a li (unfinished when the guest stopped)\n"))
	assert.Check(t, is.Contains(log, "qemu-crashed: qemu ended with exit status 1 in the job phase, before the guest reported"))
	qlog, err := os.ReadFile(filepath.Join(f.cfg.Work, "qemu.log"))
	assert.NilError(t, err)
	assert.Check(t, is.Contains(string(qlog), "fake fatal error"))
}

// The job reported passed, but the guest neither powers off nor heeds the
// ACPI request or SIGTERM: after the stop grace qemu gets SIGTERM, after
// the kill grace SIGKILL, by its PID; the run fails as slow to power down.
func TestSuperviseSlowPowerDown(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fakeqemu.SlowPowerDown)
	res, took := f.supervise(t, context.Background())
	assert.Check(t, is.Equal(res.Kind, lanevm.PowerDownSlow))
	assert.Check(t, is.Equal(res.Status, lanevm.StatusPassed))
	assert.Check(t, is.Equal(res.PowerDown, lanevm.Killed))
	assert.Check(t, is.Equal(res.QEMUExit, "signal: killed"))
	assert.Check(t, is.Equal(res.ExitStatus(), 1))
	b := f.cfg.Budget
	assert.Check(t, took >= b.StopGrace+b.KillGrace && took < b.StopGrace+b.KillGrace+4*time.Second, "took %s", took)
	assert.Check(t, is.Contains(f.log.String(), "lanec: the guest did not power off within 1 s (LANEC_STOP_GRACE); killing qemu pid "))
	assert.Check(t, is.Equal(f.read(t, "run/evidence.json"), "{\"verdict\":\"passed\"}\n"))
}

// The absolute deadline comes while the job still makes progress: the
// guest is powered down whatever the phases' bounds, and what the stopped
// job wrote is copied out.
func TestSuperviseDeadlineExceeded(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fakeqemu.Endless)
	b := lanevm.NewBudget(time.Hour, time.Hour, time.Hour, 2*time.Second)
	b.Deadline = time.Now().Add(time.Second)
	f.cfg.Budget = b
	res, took := f.supervise(t, context.Background())
	assert.Check(t, is.Equal(res.Kind, lanevm.DeadlineExceeded))
	assert.Check(t, is.Equal(res.Phase, "job"))
	assert.Check(t, is.Equal(res.Status, lanevm.StatusStopped))
	assert.Check(t, is.Equal(res.PowerDown, lanevm.OffOnRequest))
	assert.Check(t, is.Equal(res.ExitStatus(), 1))
	assert.Check(t, took >= 900*time.Millisecond && took < 5*time.Second, "took %s", took)
	assert.Check(t, is.Contains(f.log.String(), "lanec: LANEC_DEADLINE passed in the job phase ("))
	assert.Check(t, is.Equal(f.read(t, "run/evidence.json"), "{\"verdict\":\"interrupted\"}\n"))
}

// A deadline already past: no qemu starts, the lane's files say why.
func TestSuperviseDeadlineBeforeBoot(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fakeqemu.Pass)
	f.cfg.Budget.Deadline = time.Now().Add(-time.Second)
	res, _ := f.supervise(t, context.Background())
	assert.Check(t, is.Equal(res.Kind, lanevm.DeadlineExceeded))
	assert.Check(t, is.Equal(res.PowerDown, lanevm.NotRun))
	assert.Check(t, is.Equal(res.ExitStatus(), 1))
	assert.Check(t, is.Equal(f.pid(t), 0), "qemu started")
	assert.Check(t, is.Equal(f.read(t, "run.lanec/result.txt"), "deadline-exceeded: LANEC_DEADLINE came in the boot phase\n"))
}

// Cancelling the context (the command's SIGINT or SIGTERM) powers the
// guest down; the stopped job's report is copied out; exit status 130.
func TestSuperviseInterrupted(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fakeqemu.Endless)
	f.cfg.Budget = lanevm.NewBudget(time.Hour, time.Hour, time.Hour, 2*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for {
			if _, err := os.Stat(filepath.Join(f.cfg.Work, "share", "state", "started")); err == nil {
				time.Sleep(100 * time.Millisecond)
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	res, _ := f.supervise(t, ctx)
	assert.Check(t, is.Equal(res.Kind, lanevm.Interrupted))
	assert.Check(t, is.Equal(res.Phase, "job"))
	assert.Check(t, is.Equal(res.ExitStatus(), 130))
	assert.Check(t, is.Equal(f.read(t, "run/evidence.json"), "{\"verdict\":\"interrupted\"}\n"))
}

// A qemu that cannot be started: qemu crashed, nothing to stop.
func TestSuperviseQEMUDoesNotStart(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fakeqemu.Pass)
	f.cfg.QEMU = filepath.Join(t.TempDir(), "no-qemu-here")
	res, _ := f.supervise(t, context.Background())
	assert.Check(t, is.Equal(res.Kind, lanevm.QEMUCrashed))
	assert.Check(t, errors.Is(res.StartErr, os.ErrNotExist), "%v", res.StartErr)
	assert.Check(t, is.Equal(res.ExitStatus(), 1))
}

// --record copies the recorded trees and the recording's log.
func TestSuperviseRecord(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fakeqemu.Pass)
	assert.NilError(t, os.WriteFile(filepath.Join(f.cfg.Work, "share", "record.sh"), []byte("#!/bin/bash\n"), 0o755))
	f.cfg.Record = filepath.Join(t.TempDir(), "trees")
	f.cfg.Out = ""
	res, _ := f.supervise(t, context.Background())
	assert.Check(t, is.Equal(res.Kind, lanevm.GuestPassed))
	label, err := os.ReadFile(filepath.Join(f.cfg.Record, "v2-guest-before", "LABEL"))
	assert.NilError(t, err)
	assert.Check(t, is.Contains(string(label), "fake qemu"))
	log, err := os.ReadFile(filepath.Join(f.cfg.Record, "record.log"))
	assert.NilError(t, err)
	assert.Check(t, is.Equal(string(log), "recorded v2-guest-before\n"))
}

// A Config the supervisor cannot run is refused before anything starts.
func TestSuperviseRefusesBadConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		edit  func(t *testing.T, c *lanevm.Config)
		wants string
	}{
		{"report exists", func(t *testing.T, c *lanevm.Config) {
			assert.NilError(t, os.MkdirAll(c.Out, 0o755))
		}, "already exists"},
		{"lane files exist", func(t *testing.T, c *lanevm.Config) {
			assert.NilError(t, os.MkdirAll(c.Out+".lanec", 0o755))
		}, ".lanec already exists"},
		{"comma in the work directory", func(t *testing.T, c *lanevm.Config) {
			c.Work = filepath.Join(t.TempDir(), "a,b")
		}, "has a comma or newline"},
		{"no disk image", func(t *testing.T, c *lanevm.Config) {
			assert.NilError(t, os.Remove(filepath.Join(c.ImageDir, "rootfs.img")))
		}, "rootfs.img: no such file"},
		{"record directory not empty", func(t *testing.T, c *lanevm.Config) {
			c.Record = t.TempDir()
			assert.NilError(t, os.WriteFile(filepath.Join(c.Record, "x"), nil, 0o644))
		}, "is not empty"},
		{"last phase not ended by the status", func(t *testing.T, c *lanevm.Config) {
			c.Budget.Phases = c.Budget.Phases[:2]
		}, `the last phase "engine" must end at job.status`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, fakeqemu.Pass)
			tc.edit(t, &f.cfg)
			_, err := lanevm.Supervise(context.Background(), f.cfg)
			var ce *lanevm.ConfigError
			assert.Assert(t, errors.As(err, &ce), "%v", err)
			assert.Check(t, is.Contains(err.Error(), tc.wants))
			assert.Check(t, is.Equal(f.pid(t), 0), "qemu started")
		})
	}
}

// superviseWithin runs Supervise on cfg and fails the test if it has not
// returned within d: a supervisor that opens a FIFO the guest left
// blocks on it for good.
func superviseWithin(t *testing.T, cfg lanevm.Config, d time.Duration) lanevm.Result {
	t.Helper()
	type ended struct {
		res lanevm.Result
		err error
	}
	done := make(chan ended, 1)
	go func() {
		res, err := lanevm.Supervise(context.Background(), cfg)
		done <- ended{res, err}
	}()
	select {
	case e := <-done:
		assert.NilError(t, e.err)
		return e.res
	case <-time.After(d):
		t.Fatalf("Supervise did not return within %s (blocked on what the guest left?)", d)
	}
	return lanevm.Result{}
}

// noneLeft checks that none of paths exists and that no temporary
// directory is left beside them.
func noneLeft(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		_, err := os.Lstat(p)
		assert.Check(t, os.IsNotExist(err), "%s is left", p)
		entries, _ := os.ReadDir(filepath.Dir(p))
		for _, e := range entries {
			assert.Check(t, !strings.Contains(e.Name(), ".partial-"), "%s is left in %s", e.Name(), filepath.Dir(p))
		}
	}
}

// The guest shares its folder with security_model=none, so what it
// leaves there is real on the host, where the supervisor runs as root.
// Whatever the guest puts in place of its files (a symlink to a host
// file or directory, a FIFO, a socket, a device, a file past
// MaxGuestFileBytes), the supervisor neither reads, writes, blocks on nor
// shows what it points at, refuses the copy with an *UnsafeFileError or
// *TooLargeError naming the entry (exit status 4), and leaves nothing:
// neither the report nor the lane's files, nor a temporary directory.
func TestSuperviseRefusesGuestSpecialFiles(t *testing.T) {
	t.Parallel()
	const secret = "host-secret 0f1e2d\n"
	big := strconv.Itoa(lanevm.MaxGuestFileBytes + 1)
	for _, tc := range []struct {
		name, kind, path string
		// target: "victim" (a host file holding content), "victim-dir"
		// (a host directory holding victim), or a path as it is.
		target  string
		content string
		mode    string
		record  bool
		// tooLarge: a *TooLargeError, not an *UnsafeFileError.
		tooLarge bool
	}{
		{name: "timings to a host key", kind: "symlink", path: "state/timings", target: "victim"},
		{name: "console.log to a host file", kind: "symlink", path: "state/console.log", target: "victim"},
		{name: "accel.txt to a host file", kind: "symlink", path: "state/accel.txt", target: "victim", content: "accel " + secret},
		{name: "accel.txt to /dev/zero", kind: "symlink", path: "state/accel.txt", target: "/dev/zero"},
		{name: "qualify.log to a host file", kind: "symlink", path: "state/qualify.log", target: "victim"},
		{name: "qualify.rc to a host file", kind: "symlink", path: "state/qualify.rc", target: "victim", content: "0\n"},
		{name: "job.status to a host file", kind: "symlink", path: "state/job.status", target: "victim", content: "passed\n", mode: fakeqemu.Fail},
		{name: "record.log to a host file", kind: "symlink", path: "out/record/record.log", target: "victim", record: true},
		{name: "record to a host directory", kind: "symlink", path: "out/record", target: "victim-dir", record: true},
		{name: "report file to a host file", kind: "symlink", path: "out/report/evidence.json", target: "victim"},
		{name: "envelope to a host file", kind: "symlink", path: "out/report/evidence.dsse.json", target: "victim"},
		{name: "report to a host directory", kind: "symlink", path: "out/report", target: "victim-dir"},
		{name: "out to a host directory", kind: "symlink", path: "out", target: "victim-dir"},
		{name: "state to a host directory", kind: "symlink", path: "state", target: "victim-dir"},
		{name: "report to the state directory", kind: "symlink", path: "out/report", target: "../state"},
		{name: "FIFO as qualify.log", kind: "fifo", path: "state/qualify.log"},
		{name: "FIFO as the envelope", kind: "fifo", path: "out/report/evidence.dsse.json"},
		{name: "FIFO", kind: "fifo", path: "state/extra"},
		{name: "socket", kind: "socket", path: "state/sock"},
		{name: "character device", kind: "chardev", path: "state/zero"},
		{name: "oversized log", kind: "sparse", path: "state/conformance.log", target: big, tooLarge: true},
		{name: "oversized report file", kind: "sparse", path: "out/report/evidence.json", target: big, tooLarge: true},
		{name: "oversized record", kind: "sparse", path: "out/record/v2-guest-before/LABEL", target: big, tooLarge: true, record: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.kind == "chardev" && os.Geteuid() != 0 {
				t.Skip("making a device needs root")
			}
			dir := t.TempDir()
			victim := filepath.Join(dir, "victim")
			content := tc.content
			if content == "" {
				content = secret
			}
			assert.NilError(t, os.WriteFile(victim, []byte(content), 0o600))
			plant := tc.kind + " " + tc.path
			switch tc.target {
			case "victim":
				plant += " " + victim
			case "victim-dir":
				plant += " " + dir
			case "":
			default:
				plant += " " + tc.target
			}
			mode := tc.mode
			if mode == "" {
				mode = fakeqemu.Pass
			}
			f := newFixture(t, mode, fakeqemu.Plant+"="+plant)
			if tc.record {
				assert.NilError(t, os.WriteFile(filepath.Join(f.cfg.Work, "share", "record.sh"), []byte("#!/bin/bash\n"), 0o755))
				f.cfg.Record = filepath.Join(t.TempDir(), "trees")
			}
			res := superviseWithin(t, f.cfg, 30*time.Second)
			t.Logf("result %s\n%s", res, f.log)
			assert.Check(t, is.Equal(res.QEMUExit, "exit status 0"), "the fake's plant failed")

			got, err := os.ReadFile(victim)
			assert.NilError(t, err)
			assert.Check(t, is.Equal(string(got), content), "the host file was written through the guest's %s", tc.path)
			assert.Check(t, !strings.Contains(f.log.String(), "host-secret"), "the host file was shown")
			want := filepath.Join(f.cfg.Work, "share", tc.path)
			if tc.tooLarge {
				var le *lanevm.TooLargeError
				assert.Assert(t, errors.As(res.CollectErr, &le), "%v", res.CollectErr)
				assert.Check(t, is.Equal(le.Path, want))
				assert.Check(t, is.Equal(le.Limit, int64(lanevm.MaxGuestFileBytes)))
			} else {
				var ue *lanevm.UnsafeFileError
				assert.Assert(t, errors.As(res.CollectErr, &ue), "%v", res.CollectErr)
				assert.Check(t, is.Equal(ue.Path, want))
				assert.Check(t, is.Contains(res.CollectErr.Error(), "refusing "+strconv.Quote(want)+": the guest left a "))
			}
			assert.Check(t, is.Equal(res.ExitStatus(), 4))
			switch {
			case tc.path == "state/job.status":
				var ue *lanevm.UnsafeFileError
				assert.Check(t, is.Equal(res.Kind, lanevm.BadStatus))
				assert.Check(t, errors.As(res.StatusErr, &ue), "%v", res.StatusErr)
			case tc.path == "state/qualify.rc" || tc.path == "out/report/evidence.dsse.json" || tc.path == "out/report" || tc.path == "out":
				// Not a regular file where a passed job leaves one.
				assert.Check(t, is.Equal(res.Kind, lanevm.GuestIncomplete))
			}
			if tc.record {
				noneLeft(t, f.cfg.Record)
			} else {
				noneLeft(t, f.cfg.Out, f.cfg.Out+".lanec")
			}
		})
	}
}

// A guest that reports passed without what a passed job leaves (the
// marks, both exit statuses, the report's signed envelope) fails, naming
// what is missing; its files are still copied out.
func TestSuperviseRefusesIncompletePass(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, mode, plant string
		want              string
	}{
		{"right after boot", fakeqemu.EarlyPass, "",
			"state/started (a regular file), state/qualify.rc holding 0, out/report/evidence.dsse.json (a regular file), state/conformance.rc holding 0"},
		{"without the envelope", fakeqemu.Pass, "remove out/report/evidence.dsse.json", "out/report/evidence.dsse.json (a regular file)"},
		{"without a report", fakeqemu.Pass, "remove out/report", "out/report/evidence.dsse.json (a regular file)"},
		{"with the envelope a directory", fakeqemu.Pass, "remove out/report/evidence.dsse.json\nmkdir out/report/evidence.dsse.json", "out/report/evidence.dsse.json (a regular file)"},
		{"without started", fakeqemu.Pass, "remove state/started", "state/started (a regular file)"},
		{"with qualify failed", fakeqemu.Pass, "write state/qualify.rc 1", "state/qualify.rc holding 0"},
		{"without conformance's status", fakeqemu.Pass, "remove state/conformance.rc", "state/conformance.rc holding 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var env []string
			if tc.plant != "" {
				env = append(env, fakeqemu.Plant+"="+tc.plant)
			}
			f := newFixture(t, tc.mode, env...)
			res, _ := f.supervise(t, context.Background())
			assert.Check(t, is.Equal(res.QEMUExit, "exit status 0"), "the fake's plant failed")
			assert.Check(t, is.Equal(res.Kind, lanevm.GuestIncomplete))
			assert.Check(t, is.Equal(res.Status, lanevm.StatusPassed))
			assert.Check(t, is.Equal(strings.Join(res.Missing, ", "), tc.want))
			assert.Check(t, is.Equal(res.ExitStatus(), 1))
			want := "guest-incomplete: the guest reported passed, but its shared folder lacks " + tc.want
			assert.Check(t, is.Contains(f.read(t, "run.lanec/result.txt"), want))
			assert.Check(t, is.Contains(f.log.String(), "lanec: result: "+want))
		})
	}
}

// A record run whose copy fails leaves the record directory as it was
// (here: made empty beforehand) and no temporary directory beside it.
func TestSuperviseRecordFailureLeavesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fakeqemu.Pass, fakeqemu.Plant+"=fifo out/record/v2-guest-before/zz-fifo")
	assert.NilError(t, os.WriteFile(filepath.Join(f.cfg.Work, "share", "record.sh"), []byte("#!/bin/bash\n"), 0o755))
	f.cfg.Record = filepath.Join(t.TempDir(), "trees")
	assert.NilError(t, os.Mkdir(f.cfg.Record, 0o755))
	f.cfg.Out = ""
	res := superviseWithin(t, f.cfg, 30*time.Second)
	assert.Check(t, is.Equal(res.QEMUExit, "exit status 0"), "the fake's plant failed")
	var ue *lanevm.UnsafeFileError
	assert.Check(t, errors.As(res.CollectErr, &ue), "%v", res.CollectErr)
	entries, err := os.ReadDir(f.cfg.Record)
	assert.NilError(t, err)
	assert.Check(t, is.Len(entries, 0), "a partial copy is left in the record directory")
	entries, err = os.ReadDir(filepath.Dir(f.cfg.Record))
	assert.NilError(t, err)
	assert.Check(t, is.Len(entries, 1), "a temporary directory is left beside the record directory")
}

// With --record, a recording that cannot be copied makes the run's exit
// status 4, and the result.txt placed beside the report says so: the
// result is final before anything is placed, so the placed files, the
// exit status and the result agree.
func TestSuperviseRecordFailureIsInResultTxt(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fakeqemu.Pass, fakeqemu.Plant+"=fifo out/record/v2-guest-before/zz-fifo")
	assert.NilError(t, os.WriteFile(filepath.Join(f.cfg.Work, "share", "record.sh"), []byte("#!/bin/bash\n"), 0o755))
	f.cfg.Record = filepath.Join(t.TempDir(), "trees")
	res := superviseWithin(t, f.cfg, 30*time.Second)
	assert.Check(t, is.Equal(res.QEMUExit, "exit status 0"), "the fake's plant failed")
	assert.Check(t, is.Equal(res.ExitStatus(), 4))
	result := f.read(t, "run.lanec/result.txt")
	assert.Check(t, is.Equal(result, res.String()+"\n"))
	assert.Check(t, strings.HasPrefix(result, "collect-failed: guest-passed: "), "result.txt: %q", result)
	assert.Check(t, is.Contains(result, "; collecting the results failed: copying the recorded trees to "))
	assert.Check(t, is.Contains(f.log.String(), "lanec: result: "+res.String()+" (exit status 4)\n"))
	noneLeft(t, f.cfg.Record)
}
