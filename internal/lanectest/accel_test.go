package lanectest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// lanec is scripts/lanec.sh of this checkout.
func lanec(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("../../scripts/lanec.sh")
	assert.NilError(t, err)
	_, err = os.Stat(p)
	assert.NilError(t, err)
	return p
}

// result is one finished lanec.sh invocation.
type result struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

// runLanec runs lanec.sh with args, the environment plus env, and PATH
// prefixed by pathDir when it is not empty; bounded by 150 s, beyond the
// 120 s probe bound TestProbeMarkIsWhatTheRealKernelPrints gives a TCG
// boot on a loaded host, and its 5 s kill grace.
func runLanec(t *testing.T, pathDir string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{lanec(t)}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	if pathDir != "" {
		cmd.Env = append(cmd.Env, "PATH="+pathDir+":"+os.Getenv("PATH"))
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := result{stdout.String(), stderr.String(), 0, time.Since(start)}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("lanec.sh %v: %v\nstderr:\n%s", args, err, r.stderr)
	}
	assert.NilError(t, ctx.Err(), "lanec.sh %v did not end within the test's bound", args)
	t.Logf("lanec.sh %v: exit %d after %s\nstdout: %sstderr:\n%s", args, r.code, r.took.Round(time.Millisecond), r.stdout, r.stderr)
	return r
}

// processesWith returns the PIDs of live processes whose command line
// contains s.
func processesWith(t *testing.T, s string) []int {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	assert.NilError(t, err)
	var pids []int
	for _, f := range dirs {
		data, err := os.ReadFile(f)
		if err != nil || !bytes.Contains(data, []byte(s)) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		assert.NilError(t, err)
		if pid != os.Getpid() {
			pids = append(pids, pid)
		}
	}
	return pids
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

// --- the real qemu and a real kernel ---------------------------------------

// realKernel returns a copy, under a path unique to this test, of a real
// Debian amd64 kernel: QUALBOX_LANEC_KERNEL, else lane C's cached guest
// kernel, else the host's /boot/vmlinuz-*; the first that is an x86
// bzImage. It skips the test when there is none or no qemu-system-x86_64.
func realKernel(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("no qemu-system-x86_64 (scripts/lanec.sh deps installs it)")
	}
	var candidates []string
	if k := os.Getenv("QUALBOX_LANEC_KERNEL"); k != "" {
		candidates = append(candidates, k)
	}
	cached, _ := filepath.Glob("/var/cache/qualbox/lanec/*/vmlinuz")
	boot, _ := filepath.Glob("/boot/vmlinuz-*")
	candidates = append(append(candidates, cached...), boot...)
	for _, k := range candidates {
		data, err := os.ReadFile(k)
		// An x86 bzImage only ("HdrS" at 0x202, the boot protocol's
		// header): the cache also holds lane D's arm64 kernels, which
		// qemu-system-x86_64 boots to no output at all.
		if err != nil || len(data) < 0x206 || string(data[0x202:0x206]) != "HdrS" {
			continue
		}
		dst := filepath.Join(t.TempDir(), "probe-vmlinuz")
		assert.NilError(t, os.WriteFile(dst, data, 0o644))
		t.Logf("probe kernel: %s", k)
		return dst
	}
	t.Skip("no kernel: set QUALBOX_LANEC_KERNEL, or build lane C's guest (scripts/lanec.sh image)")
	return ""
}

// The probe's mark is what a real Debian kernel prints: booted under TCG
// (which works on every host) with the probe's own command line, it reaches
// the root-mount panic, and its qemu is gone afterwards.
func TestProbeMarkIsWhatTheRealKernelPrints(t *testing.T) {
	kernel := realKernel(t)
	r := runLanec(t, "", []string{"LANEC_KVM_PROBE_TIMEOUT=120"}, "probe", "--kernel", kernel, "--accel", "tcg")
	assert.Check(t, is.Equal(r.code, 0))
	assert.Check(t, is.Contains(r.stderr, "probe under tcg: the kernel printed 'VFS: Unable to mount root fs' after"))
	assert.Check(t, is.Len(processesWith(t, kernel), 0), "a probe qemu is left")
}

// On a host where KVM cannot run the kernel, auto chooses TCG and says
// why, and LANEC_ACCEL=kvm is an error; where the probe passes, auto
// chooses KVM. Without /dev/kvm (this project's lane hosts) KVM cannot
// work, so there TCG is required. No probe qemu is left either way.
func TestAccelWithTheRealQEMU(t *testing.T) {
	kernel := realKernel(t)
	probe := runLanec(t, "", nil, "probe", "--kernel", kernel, "--accel", "kvm")
	_, statErr := os.Stat("/dev/kvm")
	if errors.Is(statErr, os.ErrNotExist) {
		assert.Assert(t, probe.code != 0, "KVM probe passed without /dev/kvm")
	}
	auto := runLanec(t, "", []string{"LANEC_ACCEL=auto"}, "accel", "--kernel", kernel)
	forced := runLanec(t, "", []string{"LANEC_ACCEL=kvm"}, "accel", "--kernel", kernel)
	if probe.code == 0 {
		assert.Check(t, is.Equal(auto.stdout, "kvm\n"))
		assert.Check(t, is.Equal(forced.stdout, "kvm\n"))
	} else {
		assert.Check(t, is.Equal(auto.code, 0))
		assert.Check(t, is.Equal(auto.stdout, "tcg\n"))
		assert.Check(t, is.Contains(auto.stderr, "lanec: accelerator tcg (LANEC_ACCEL=auto; KVM probe failed: "))
		assert.Check(t, is.Equal(forced.code, 1))
		assert.Check(t, is.Equal(forced.stdout, ""))
		assert.Check(t, is.Contains(forced.stderr, "lanec: LANEC_ACCEL=kvm, but KVM cannot run the guest's kernel: "))
	}
	assert.Check(t, is.Len(processesWith(t, kernel), 0), "a probe qemu is left")
}

// --- a fake qemu ---------------------------------------------------------

// fakeQEMU is a shell script standing in for qemu-system-x86_64 (a fake,
// not QEMU). FAKE_QEMU_MODE selects how it behaves: kvm boots like a
// working KVM (the kernel's lines on the -serial file, then the exit that
// panic=-1 with -no-reboot gives) when given -accel kvm -cpu host; fail
// exits as QEMU does when KVM cannot be initialised; hang prints the
// kernel's first line and then hangs, ignoring SIGTERM, as a kernel stuck
// in early boot under a broken KVM. It appends its arguments to
// $FAKE_QEMU_STATE/args and writes its PID to $FAKE_QEMU_STATE/pid.
const fakeQEMU = `#!/bin/sh
# FAKE qemu-system-x86_64 for internal/lanectest: not QEMU.
echo "$*" >>"$FAKE_QEMU_STATE/args"
echo $$ >"$FAKE_QEMU_STATE/pid"
serial= prev=
for a in "$@"; do
	[ "$prev" = -serial ] && serial=${a#file:}
	prev=$a
done
case $FAKE_QEMU_MODE in
kvm)
	case " $* " in
	*" -accel kvm -cpu host "*) ;;
	*) echo "fake qemu: expected -accel kvm -cpu host" >&2; exit 3 ;;
	esac
	printf 'Linux version 6.1.0-fake (fake qemu)\r\nVFS: Cannot open root device "" or unknown-block(0,0): error -6\r\nKernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)\r\n' >"$serial"
	exit 0 ;;
fail)
	echo "Could not access KVM kernel module: Permission denied" >&2
	echo "qemu-system-x86_64: -accel kvm: failed to initialize kvm: Permission denied" >&2
	exit 1 ;;
hang)
	printf 'Linux version 6.1.0-fake (fake qemu)\r\n' >"$serial"
	trap '' TERM
	exec sleep 3600 ;;
esac
echo "fake qemu: unknown FAKE_QEMU_MODE '$FAKE_QEMU_MODE'" >&2
exit 4
`

// fake is one fake qemu on a PATH directory of its own, and a dummy
// kernel file (the fake never reads it).
type fake struct{ bin, state, kernel string }

func newFake(t *testing.T) fake {
	t.Helper()
	dir := t.TempDir()
	f := fake{filepath.Join(dir, "bin"), filepath.Join(dir, "state"), filepath.Join(dir, "vmlinuz")}
	assert.NilError(t, os.Mkdir(f.bin, 0o755))
	assert.NilError(t, os.Mkdir(f.state, 0o755))
	assert.NilError(t, os.WriteFile(filepath.Join(f.bin, "qemu-system-x86_64"), []byte(fakeQEMU), 0o755))
	assert.NilError(t, os.WriteFile(f.kernel, []byte("not a kernel\n"), 0o644))
	// A test that failed because a fake was left running does not leave
	// it behind: its recorded PID is killed (after assertGone has looked).
	t.Cleanup(func() {
		data, err := os.ReadFile(filepath.Join(f.state, "pid"))
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && perr == nil && alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return f
}

func (f fake) env(mode string, more ...string) []string {
	return append([]string{"FAKE_QEMU_MODE=" + mode, "FAKE_QEMU_STATE=" + f.state}, more...)
}

// args is what the fake was called with, one line per call.
func (f fake) args(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(f.state, "args"))
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	assert.NilError(t, err)
	return string(data)
}

// assertGone checks that the fake's last process is gone and no process
// runs from the fake's directory.
func (f fake) assertGone(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(f.state, "pid"))
	assert.NilError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	assert.NilError(t, err)
	assert.Check(t, !alive(pid), "fake qemu pid %d is still running", pid)
	assert.Check(t, is.Len(processesWith(t, f.bin), 0), "a process from %s is left", f.bin)
}

// With a fake qemu that boots like a working KVM, auto and kvm choose KVM
// after one probe with -accel kvm -cpu host; tcg chooses TCG without a
// probe.
func TestAccelFakeWorkingKVM(t *testing.T) {
	for _, mode := range []string{"auto", "kvm"} {
		t.Run(mode, func(t *testing.T) {
			f := newFake(t)
			r := runLanec(t, f.bin, f.env("kvm", "LANEC_ACCEL="+mode), "accel", "--kernel", f.kernel)
			assert.Check(t, is.Equal(r.code, 0))
			assert.Check(t, is.Equal(r.stdout, "kvm\n"))
			assert.Check(t, is.Contains(r.stderr, "lanec: accelerator kvm (LANEC_ACCEL="+mode+"; KVM probe passed: the kernel printed 'VFS: Unable to mount root fs' after "))
			args := f.args(t)
			assert.Check(t, is.Equal(strings.Count(args, "\n"), 1), "probe calls: %q", args)
			assert.Check(t, is.Contains(args, "-accel kvm -cpu host -smp 2 -m 256M -kernel "+f.kernel+" -append console=ttyS0 panic=-1 -nic none -serial file:"))
			f.assertGone(t)
		})
	}
	t.Run("tcg", func(t *testing.T) {
		f := newFake(t)
		r := runLanec(t, f.bin, f.env("kvm", "LANEC_ACCEL=tcg"), "accel", "--kernel", f.kernel)
		assert.Check(t, is.Equal(r.code, 0))
		assert.Check(t, is.Equal(r.stdout, "tcg\n"))
		assert.Check(t, is.Contains(r.stderr, "lanec: accelerator tcg (LANEC_ACCEL=tcg)"))
		assert.Check(t, is.Equal(f.args(t), ""), "LANEC_ACCEL=tcg ran a probe")
	})
}

// A qemu that cannot initialise KVM (as with an inaccessible /dev/kvm):
// auto chooses TCG naming qemu's error; forced kvm fails with it.
func TestAccelFakeKVMFails(t *testing.T) {
	f := newFake(t)
	r := runLanec(t, f.bin, f.env("fail", "LANEC_ACCEL=auto"), "accel", "--kernel", f.kernel)
	assert.Check(t, is.Equal(r.code, 0))
	assert.Check(t, is.Equal(r.stdout, "tcg\n"))
	assert.Check(t, is.Contains(r.stderr, "KVM probe failed: qemu exited with status 1 after "))
	assert.Check(t, is.Contains(r.stderr, ": qemu-system-x86_64: -accel kvm: failed to initialize kvm: Permission denied)"))
	r = runLanec(t, f.bin, f.env("fail", "LANEC_ACCEL=kvm"), "accel", "--kernel", f.kernel)
	assert.Check(t, is.Equal(r.code, 1))
	assert.Check(t, is.Equal(r.stdout, ""))
	assert.Check(t, is.Contains(r.stderr, "lanec: LANEC_ACCEL=kvm, but KVM cannot run the guest's kernel: qemu exited with status 1"))
	assert.Check(t, is.Contains(r.stderr, "  probe| Could not access KVM kernel module: Permission denied"))
	f.assertGone(t)
}

// A kernel that hangs under KVM after its first line: the probe ends at
// LANEC_KVM_PROBE_TIMEOUT, kills the fake (which ignores SIGTERM, so
// SIGKILL) by its PID and auto chooses TCG; forced kvm fails.
func TestAccelFakeKVMHangsIsBoundedAndKilled(t *testing.T) {
	for _, mode := range []string{"auto", "kvm"} {
		t.Run(mode, func(t *testing.T) {
			f := newFake(t)
			r := runLanec(t, f.bin, f.env("hang", "LANEC_ACCEL="+mode, "LANEC_KVM_PROBE_TIMEOUT=2"), "accel", "--kernel", f.kernel)
			if mode == "auto" {
				assert.Check(t, is.Equal(r.code, 0))
				assert.Check(t, is.Equal(r.stdout, "tcg\n"))
			} else {
				assert.Check(t, is.Equal(r.code, 1))
				assert.Check(t, is.Contains(r.stderr, "  probe| Linux version 6.1.0-fake (fake qemu)"))
			}
			assert.Check(t, is.Contains(r.stderr, "the kernel did not print 'VFS: Unable to mount root fs' within 2 s (qemu pid "))
			// 2 s of probe, 5 s of SIGTERM grace, then SIGKILL.
			assert.Check(t, r.took >= 2*time.Second && r.took < 15*time.Second, "took %s", r.took)
			f.assertGone(t)
		})
	}
}

// lanec.sh stopped by SIGTERM while its probe runs kills the probe's qemu
// by its PID before it exits, and leaves no probe file in TMPDIR.
func TestAccelProbeKilledWhenInterrupted(t *testing.T) {
	f := newFake(t)
	tmp := t.TempDir()
	cmd := exec.Command("bash", lanec(t), "accel", "--kernel", f.kernel)
	cmd.Env = append(os.Environ(), append(f.env("hang", "LANEC_KVM_PROBE_TIMEOUT=600"), "PATH="+f.bin+":"+os.Getenv("PATH"), "TMPDIR="+tmp)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	assert.NilError(t, cmd.Start())
	pidFile := filepath.Join(f.state, "pid")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(pidFile); err == nil {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("the fake qemu did not start: %s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	assert.NilError(t, cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		assert.Assert(t, errors.As(err, &exit), "lanec.sh exited 0 after SIGTERM: %v", err)
		assert.Check(t, is.Equal(exit.ExitCode(), 130))
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("lanec.sh did not exit within 30 s of SIGTERM: %s", stderr.String())
	}
	f.assertGone(t)
	left, err := os.ReadDir(tmp)
	assert.NilError(t, err)
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	assert.Check(t, is.Len(names, 0), "left in TMPDIR: %v", names)
}

// A LANEC_ACCEL or probe bound lane C cannot use is refused (exit status
// 2) with what was wrong, before any qemu runs.
func TestAccelBadSettings(t *testing.T) {
	f := newFake(t)
	for _, tc := range []struct{ env, want string }{
		{"LANEC_ACCEL=hvf", "lanec: LANEC_ACCEL must be auto, kvm or tcg, got 'hvf'"},
		{"LANEC_KVM_PROBE_TIMEOUT=0", "lanec: LANEC_KVM_PROBE_TIMEOUT must be whole seconds from 1 to 9999, got '0'"},
		{"LANEC_KVM_PROBE_TIMEOUT=5s", "lanec: LANEC_KVM_PROBE_TIMEOUT must be whole seconds from 1 to 9999, got '5s'"},
	} {
		r := runLanec(t, f.bin, f.env("kvm", tc.env), "accel", "--kernel", f.kernel)
		assert.Check(t, is.Equal(r.code, 2), tc.env)
		assert.Check(t, is.Contains(r.stderr, tc.want))
	}
	// run and record refuse it before they assemble or boot anything.
	for _, args := range [][]string{{"run", "--out", filepath.Join(t.TempDir(), "report")}, {"record", t.TempDir()}} {
		r := runLanec(t, f.bin, f.env("kvm", "LANEC_ACCEL=hvf"), args...)
		assert.Check(t, is.Equal(r.code, 2), args[0])
		assert.Check(t, is.Contains(r.stderr, "lanec: LANEC_ACCEL must be auto, kvm or tcg, got 'hvf'"))
		assert.Check(t, !strings.Contains(r.stderr, "cached guest") && !strings.Contains(r.stderr, "debootstrap"), r.stderr)
	}
	r := runLanec(t, f.bin, f.env("kvm"), "probe", "--kernel", f.kernel, "--accel", "hvf")
	assert.Check(t, is.Equal(r.code, 2))
	assert.Check(t, is.Contains(r.stderr, "lanec: probe --accel must be kvm or tcg, got 'hvf'"))
	r = runLanec(t, f.bin, f.env("kvm"), "accel", "--kernel", filepath.Join(t.TempDir(), "absent"))
	assert.Check(t, is.Equal(r.code, 1))
	assert.Check(t, is.Contains(r.stderr, "accel: no kernel at "))
	assert.Check(t, is.Equal(f.args(t), ""), "a qemu ran")
}
