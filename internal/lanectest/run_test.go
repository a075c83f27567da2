package lanectest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/skip"

	"github.com/qualbox/qualbox/internal/lanevm/fakeqemu"
)

// This test binary is also the FAKE qemu of internal/lanevm/fakeqemu,
// started through a qemu-system-x86_64 shim on PATH (runHandoff).
func TestMain(m *testing.M) {
	if fakeqemu.Enabled() {
		os.Exit(fakeqemu.Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// workDirs lists lanec.sh's work directories (/tmp/qualbox-lanec.*).
func workDirs(t *testing.T) map[string]bool {
	t.Helper()
	dirs, err := filepath.Glob("/tmp/qualbox-lanec.*")
	assert.NilError(t, err)
	m := map[string]bool{}
	for _, d := range dirs {
		m[d] = true
	}
	return m
}

// An unusable bound is refused by the supervisor's budget (exit status 2)
// before any image is assembled, and the work directory lanec.sh made for
// it is removed.
func TestRunRefusesABadBoundBeforeTheImage(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go on PATH: lanec.sh run builds the supervisor with it")
	}
	before := workDirs(t)
	key := filepath.Join(t.TempDir(), "key")
	assert.NilError(t, os.WriteFile(key, []byte("not a key\n"), 0o600))
	for _, tc := range []struct{ env, want string }{
		{"LANEC_RUN_TIMEOUT=40m", "lanec: LANEC_RUN_TIMEOUT must be whole seconds from 1 to 86400, got '40m'"},
		{"LANEC_DEADLINE=soon", "lanec: LANEC_DEADLINE must be an absolute time in seconds since the epoch (date +%s), got 'soon'"},
	} {
		r := runLanec(t, "", []string{tc.env, "LANEC_ARCH=amd64", "LANEC_ACCEL=tcg"}, "run", "--signing-key", key, "--out", filepath.Join(t.TempDir(), "report"))
		assert.Check(t, is.Equal(r.code, 2), tc.env)
		assert.Check(t, is.Contains(r.stderr, tc.want))
		assert.Check(t, !strings.Contains(r.stderr, "cached guest") && !strings.Contains(r.stderr, "debootstrap"), r.stderr)
	}
	r := runLanec(t, "", []string{"LANEC_DEADLINE=1700000000", "LANEC_ARCH=amd64"}, "run", "--signing-key", key, "--out", filepath.Join(t.TempDir(), "report"))
	assert.Check(t, is.Equal(r.code, 1))
	assert.Check(t, is.Contains(r.stderr, "lanec: LANEC_DEADLINE (2023-11-14T22:13:20Z) has passed"))
	for d := range workDirs(t) {
		assert.Check(t, before[d], "work directory %s is left", d)
	}
}

// lanec.sh run hands a run to the supervisor as docs/lanes.md says: with
// a cached image (here a dummy, under the key lanec.sh computes), TCG and
// a FAKE qemu on PATH (this test binary), it builds the supervisor and
// the static binaries, fills the shared folder (job.sh, its parameters,
// the manifest and key) and execs the supervisor, whose result is the
// exit status: the fake guest passing gives 0 and a report in --out. It
// needs root, lane B's build (the default tuple, whose VERSIONS the key
// digests) and go; it boots nothing.
func TestRunHandsTheRunToTheSupervisor(t *testing.T) {
	skip.If(t, os.Geteuid() != 0, "lanec.sh run needs root")
	// VERSIONS is written once the build is complete: without it, the
	// run would build lane B (minutes) or race a build under way.
	versions := "/opt/qualbox-moby/VERSIONS"
	if _, err := os.Stat(versions); err != nil {
		t.Skipf("no complete lane B build in /opt/qualbox-moby (scripts/engine.sh install-b): %v", err)
	}
	cache := t.TempDir()
	env := []string{"LANEC_CACHE=" + cache, "LANEC_ARCH=amd64", "LANEC_TUPLE=lane-b", "LANEC_SUITE=bookworm",
		"LANEC_CGROUP_DRIVER=systemd", "LANEC_EMULATE=", "LANEC_ACCEL=tcg", "LANEC_KEEP_WORK="}
	// The image lanec.sh will look for: a dummy under the key it computes,
	// beside an empty debootstrap base, so nothing is assembled.
	k := runLanec(t, "", env, "key", "--versions", versions)
	assert.Assert(t, is.Equal(k.code, 0))
	var image, base string
	for _, line := range strings.Split(strings.TrimSpace(k.stdout), "\n") {
		if v, ok := strings.CutPrefix(line, "image "); ok {
			image = v
		}
		if v, ok := strings.CutPrefix(line, "base "); ok {
			base = v
		}
	}
	assert.NilError(t, os.WriteFile(filepath.Join(cache, "base-"+base+".tar"), nil, 0o644))
	assert.NilError(t, os.Mkdir(filepath.Join(cache, image), 0o755))
	for _, f := range []string{"vmlinuz", "initrd.img", "rootfs.img"} {
		assert.NilError(t, os.WriteFile(filepath.Join(cache, image, f), []byte("not a guest\n"), 0o644))
	}
	assert.NilError(t, os.WriteFile(filepath.Join(cache, image, "BUILD"), []byte("key "+image+" (dummy)\n"), 0o644))

	// PATH: the fake qemu, and never-called stand-ins for the tools
	// image checks for.
	bin := t.TempDir()
	self, err := os.Executable()
	assert.NilError(t, err)
	assert.NilError(t, os.WriteFile(filepath.Join(bin, "qemu-system-x86_64"), []byte("#!/bin/sh\n# FAKE qemu: internal/lanevm/fakeqemu in the lanectest binary\nexec '"+self+"' \"$@\"\n"), 0o755))
	for _, tool := range []string{"debootstrap", "mkfs.ext4"} {
		assert.NilError(t, os.WriteFile(filepath.Join(bin, tool), []byte("#!/bin/sh\necho \"$0 must not run\" >&2\nexit 1\n"), 0o755))
	}
	key := filepath.Join(t.TempDir(), "key")
	assert.NilError(t, os.WriteFile(key, []byte("not a key\n"), 0o600))

	before := workDirs(t)
	// One mode: each run builds the static qualify and probe (minutes when
	// cold); the other results are internal/lanevm's tests.
	for mode, want := range map[string]int{fakeqemu.Pass: 0} {
		out := filepath.Join(t.TempDir(), "report")
		state := t.TempDir()
		r := runHandoff(t, bin, append(env, fakeqemu.Env(mode, state)...), "run", "--no-conformance", "--signing-key", key, "--out", out)
		assert.Check(t, is.Equal(r.code, want), mode)
		assert.Check(t, is.Contains(r.stderr, "lanec: cached guest "+filepath.Join(cache, image)))
		assert.Check(t, is.Contains(r.stderr, "lanec: accelerator tcg (LANEC_ACCEL=tcg)"))
		evidence, err := os.ReadFile(filepath.Join(out, "evidence.json"))
		assert.Check(t, err)
		assert.Check(t, is.Equal(string(evidence), "{\"verdict\":\"passed\"}\n"))
		timings, err := os.ReadFile(out + ".lanec/timings")
		assert.Check(t, err)
		assert.Check(t, is.Contains(string(timings), "image_s "))
		assert.Check(t, is.Contains(string(timings), " (choosing the accelerator: tcg)\nboot_s "))
		accel, err := os.ReadFile(out + ".lanec/accel.txt")
		assert.Check(t, err)
		assert.Check(t, is.Contains(string(accel), "qemu -accel tcg,thread=multi -cpu qemu64"))
		args, err := os.ReadFile(filepath.Join(state, "args"))
		assert.Check(t, err)
		assert.Check(t, is.Contains(string(args), "\n-accel\ntcg,thread=multi\n-cpu\nqemu64\n-smp\n2\n"))
		assert.Check(t, is.Contains(string(args), "\n-append\nroot=/dev/vda rw console=ttyS0 systemd.unified_cgroup_hierarchy=1 apparmor=1 security=apparmor tsc=reliable\n"))
	}
	for d := range workDirs(t) {
		assert.Check(t, before[d], "work directory %s is left", d)
	}
}

// runHandoff is runLanec with a bound that allows for building the
// static qualify and probe binaries.
func runHandoff(t *testing.T, pathDir string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{lanec(t)}, args...)...)
	cmd.Env = append(append(os.Environ(), env...), "PATH="+pathDir+":"+os.Getenv("PATH"))
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := result{stdout.String(), stderr.String(), 0, time.Since(start)}
	if exit, ok := err.(*exec.ExitError); ok {
		r.code = exit.ExitCode()
	} else {
		assert.NilError(t, err, "lanec.sh %v: %s", args, r.stderr)
	}
	assert.NilError(t, ctx.Err(), "lanec.sh %v did not end within the test's bound", args)
	t.Logf("lanec.sh %v: exit %d after %s\nstderr:\n%s", args, r.code, r.took.Round(time.Millisecond), r.stderr)
	return r
}
