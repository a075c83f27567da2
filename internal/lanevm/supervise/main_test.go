package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/internal/lanevm/fakeqemu"
)

// This test binary is also the FAKE qemu (internal/lanevm/fakeqemu), and
// the command itself when asked to be (asCommand).
func TestMain(m *testing.M) {
	if fakeqemu.Enabled() {
		os.Exit(fakeqemu.Main(os.Args[1:]))
	}
	if mode := os.Getenv(asCommand); mode != "" {
		// The qemu this command starts is this binary again, as the fake.
		_ = os.Unsetenv(asCommand)
		_ = os.Setenv("FAKE_QEMU_MODE", mode)
		main()
	}
	os.Exit(m.Run())
}

// asCommand=MODE makes this test binary run main, with its own signal
// handling, and the fake qemu it starts play MODE.
const asCommand = "QUALBOX_TEST_SUPERVISE_MAIN"

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// workspace is a dummy guest image and a work directory with its share/.
func workspace(t *testing.T) (image, work string) {
	t.Helper()
	root := t.TempDir()
	image, work = filepath.Join(root, "image"), filepath.Join(root, "work")
	assert.NilError(t, os.MkdirAll(filepath.Join(work, "share"), 0o755))
	assert.NilError(t, os.MkdirAll(image, 0o755))
	for _, f := range []string{"vmlinuz", "initrd.img", "rootfs.img", "BUILD"} {
		assert.NilError(t, os.WriteFile(filepath.Join(image, f), []byte("not a guest image\n"), 0o644))
	}
	return image, work
}

// The command lanec.sh runs: the fake guest passes, the report and the
// host's timing lines land in place, the work directory is removed, and
// the exit status is 0; one that fails exits 1.
func TestRun(t *testing.T) {
	for mode, want := range map[string]int{fakeqemu.Pass: 0, fakeqemu.Fail: 1} {
		t.Run(mode, func(t *testing.T) {
			image, work := workspace(t)
			out := filepath.Join(t.TempDir(), "run")
			for _, kv := range fakeqemu.Env(mode, t.TempDir()) {
				k, v, _ := bytes.Cut([]byte(kv), []byte("="))
				t.Setenv(string(k), string(v))
			}
			var stderr bytes.Buffer
			code := run(context.Background(), []string{"run", "--qemu", os.Args[0], "--image", image,
				"--append", "console=ttyS0", "--work", work, "--out", out, "--remove-work",
				"--timing", "image_s 3 (lanec.sh image, cache key 0123)", "--", "-accel", "tcg"},
				envOf(nil), &bytes.Buffer{}, &stderr)
			t.Log(stderr.String())
			assert.Check(t, is.Equal(code, want))
			_, err := os.Stat(work)
			assert.Check(t, os.IsNotExist(err), "the work directory is left")
			timings, err := os.ReadFile(out + ".lanec/timings")
			assert.NilError(t, err)
			assert.Check(t, is.Contains(string(timings), "image_s 3 (lanec.sh image, cache key 0123)\nboot_s "))
		})
	}
}

// A bad command line or setting exits 2 with what was wrong, and starts
// nothing.
func TestRunRefusesBadInput(t *testing.T) {
	image, work := workspace(t)
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, nil, "lanec: no subcommand"},
		{[]string{"boot"}, nil, `lanec: unknown subcommand "boot"`},
		{[]string{"run", "--qemu", "q", "--image", image, "--append", "x"}, nil, "lanec: run: --work is required"},
		{[]string{"run", "--bogus"}, nil, "lanec: run: flag provided but not defined: -bogus"},
		{[]string{"run", "--qemu", "q", "--image", image, "--append", "x", "--work", work, "--timing", "image_s twelve"}, nil, `want 'NAME SECONDS (SAYS)', got "image_s twelve"`},
		{[]string{"run", "--qemu", "q", "--image", t.TempDir(), "--append", "x", "--work", work}, nil, "lanec: run: guest image "},
		{[]string{"budget"}, map[string]string{"LANEC_RUN_TIMEOUT": "40m"}, "lanec: LANEC_RUN_TIMEOUT must be whole seconds from 1 to 86400, got '40m'"},
	} {
		var stderr bytes.Buffer
		code := run(context.Background(), tc.args, envOf(tc.env), &bytes.Buffer{}, &stderr)
		assert.Check(t, is.Equal(code, 2), "%v", tc.args)
		assert.Check(t, is.Contains(stderr.String(), tc.want))
	}
}

// With several required flags missing, the first of --qemu, --image,
// --append and --work is named, every time.
func TestRunNamesTheFirstMissingFlag(t *testing.T) {
	for range 20 {
		var stderr bytes.Buffer
		code := run(context.Background(), []string{"run", "--append", "x"}, envOf(nil), &bytes.Buffer{}, &stderr)
		assert.Assert(t, is.Equal(code, 2))
		assert.Assert(t, is.Contains(stderr.String(), "lanec: run: --qemu is required\n"))
	}
}

// budget prints the bounds, and fails (1) once LANEC_DEADLINE has passed.
func TestBudget(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"budget"}, envOf(map[string]string{"LANEC_STOP_GRACE": "30"}), &stdout, &stderr)
	assert.Check(t, is.Equal(code, 0))
	assert.Check(t, is.Contains(stdout.String(), "power-down 30 s (LANEC_STOP_GRACE) + 10 s after SIGTERM; at most 4300 s\n"))
	stdout.Reset()
	code = run(context.Background(), []string{"budget"}, envOf(map[string]string{"LANEC_DEADLINE": "1700000000"}), &stdout, &stderr)
	assert.Check(t, is.Equal(code, 1))
	assert.Check(t, is.Contains(stderr.String(), "lanec: LANEC_DEADLINE (2023-11-14T22:13:20Z) has passed\n"))
}

// SIGHUP (the terminal that ran lanec.sh went away) is handled as SIGINT
// and SIGTERM are: the guest is powered down, the work directory with its
// share/signing.key removed, and the command exits 130.
func TestRunSIGHUPRemovesTheWorkDirectory(t *testing.T) {
	image, work := workspace(t)
	cmd := exec.Command(os.Args[0], "run", "--qemu", os.Args[0], "--image", image,
		"--append", "console=ttyS0", "--work", work, "--remove-work", "--", "-accel", "tcg")
	cmd.Env = append(os.Environ(), asCommand+"="+fakeqemu.Endless, "FAKE_QEMU_STATE="+t.TempDir(), "LANEC_STOP_GRACE=5")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	assert.NilError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	started := filepath.Join(work, "share", "state", "started")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(started); err == nil {
			break
		}
		assert.Assert(t, time.Now().Before(deadline), "the fake guest did not start its job: %s", &stderr)
	}
	assert.NilError(t, cmd.Process.Signal(syscall.SIGHUP))
	err := cmd.Wait()
	t.Log(stderr.String())
	var ee *exec.ExitError
	assert.Assert(t, errors.As(err, &ee), "%v", err)
	assert.Check(t, is.Equal(ee.ExitCode(), 130), "%v", err)
	_, err = os.Stat(work)
	assert.Check(t, os.IsNotExist(err), "the work directory is left")
	assert.Check(t, is.Contains(stderr.String(), "lanec: result: interrupted: in the "))
}
