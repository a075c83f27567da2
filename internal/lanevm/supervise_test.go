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
	assert.Check(t, is.Contains(f.read(t, "run.lanec/qualify.log"), "scenario 3 passed\n"))
	console := f.read(t, "run.lanec/console.log")
	assert.Check(t, is.Contains(console, "Linux version 6.1.0-fake"))
	assert.Check(t, !strings.Contains(console, "\r"), "the console copy keeps carriage returns")
	assert.Check(t, is.Equal(f.read(t, "run.lanec/image.txt"), "key 0123 base 4567\n"))
	assert.Check(t, is.Equal(f.read(t, "run.lanec/result.txt"), "guest-passed: the guest reported passed; qemu exited by itself\n"))
	timings := f.read(t, "run.lanec/timings")
	for _, want := range []string{"qualify_s 1\nimage_s 1 (lanec.sh image)\nboot_s ", "\nready_s ", "\nguest_s "} {
		assert.Check(t, is.Contains(timings, want))
	}
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
