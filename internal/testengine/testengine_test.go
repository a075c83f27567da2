package testengine

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// probeEnv marks the child process that runs TestRequireProbe.
const probeEnv = "QUALBOX_TESTENGINE_PROBE"

// TestRequireProbe is run by TestRequire in a child process with the
// switches under test; on its own it does nothing.
func TestRequireProbe(t *testing.T) {
	if os.Getenv(probeEnv) != "1" {
		t.Skip("run by TestRequire in a child process")
	}
	t.Logf("engine at %s", Require(t))
}

// probe runs TestRequireProbe in a child with env added to a cleaned
// environment and returns its verbose output.
func probe(t *testing.T, env ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestRequireProbe$", "-test.v", "-test.count=1")
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k != RequireEnv && k != NoEngineEnv && k != SocketEnv && k != "DOCKER_HOST" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, append([]string{probeEnv + "=1"}, env...)...)
	out, _ := cmd.CombinedOutput()
	return string(out)
}

// Without an Engine the test skips, naming the socket and `make engine`;
// with QUALBOX_REQUIRE_ENGINE=1 the same absence fails it; under
// QUALBOX_NO_ENGINE=1 it skips without dialing; both switches fail.
func TestRequire(t *testing.T) {
	absent := filepath.Join(t.TempDir(), "absent.sock")
	// A socket that accepts and closes: something listens, but no Engine.
	notEngine := filepath.Join(t.TempDir(), "not-an-engine.sock")
	l, err := net.Listen("unix", notEngine)
	assert.NilError(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()

	for _, tc := range []struct {
		name string
		env  []string
		want []string
	}{
		{"absent skips", []string{SocketEnv + "=" + absent},
			[]string{"--- SKIP: TestRequireProbe", "none answers at " + absent, "make engine"}},
		{"absent fails when required", []string{SocketEnv + "=" + absent, RequireEnv + "=1"},
			[]string{"--- FAIL: TestRequireProbe", "none answers at " + absent, RequireEnv + "=1: an absent Engine is a failure"}},
		{"not an Engine fails when required", []string{SocketEnv + "=" + notEngine, RequireEnv + "=1"},
			[]string{"--- FAIL: TestRequireProbe", "none answers at " + notEngine}},
		{"DOCKER_HOST is the socket, not lane A", []string{"DOCKER_HOST=unix://" + absent},
			[]string{"--- SKIP: TestRequireProbe", "none answers at " + absent}},
		{"DOCKER_HOST of another scheme fails", []string{"DOCKER_HOST=tcp://127.0.0.1:2375"},
			[]string{"--- FAIL: TestRequireProbe", `DOCKER_HOST="tcp://127.0.0.1:2375" is not a unix:// socket`}},
		{"hermetic skips without dialing", []string{SocketEnv + "=" + absent, NoEngineEnv + "=1"},
			[]string{"--- SKIP: TestRequireProbe", NoEngineEnv + "=1 (make test-hermetic) skips every Engine test"}},
		{"both switches fail", []string{RequireEnv + "=1", NoEngineEnv + "=1"},
			[]string{"--- FAIL: TestRequireProbe", "contradict each other"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := probe(t, tc.env...)
			for _, w := range tc.want {
				assert.Check(t, is.Contains(out, w))
			}
		})
	}
}

// Where an Engine answers, the probe runs against it even when required.
func TestRequireRunsWhereAnEngineAnswers(t *testing.T) {
	socket := Require(t)
	out := probe(t, SocketEnv+"="+socket, RequireEnv+"=1")
	assert.Check(t, is.Contains(out, "--- PASS: TestRequireProbe"))
	assert.Check(t, is.Contains(out, "engine at "+socket))
}

// QUALBOX_ENGINE_SOCKET beats DOCKER_HOST, which beats lane A.
func TestSocket(t *testing.T) {
	t.Setenv(SocketEnv, "")
	t.Setenv("DOCKER_HOST", "")
	s, err := Socket()
	assert.NilError(t, err)
	assert.Equal(t, s, DefaultSocket)
	t.Setenv("DOCKER_HOST", "unix:///run/other.sock")
	s, err = Socket()
	assert.NilError(t, err)
	assert.Equal(t, s, "/run/other.sock")
	t.Setenv(SocketEnv, "/run/lane-b.sock")
	s, err = Socket()
	assert.NilError(t, err)
	assert.Equal(t, s, "/run/lane-b.sock")
	t.Setenv(SocketEnv, "")
	t.Setenv("DOCKER_HOST", "ssh://host")
	_, err = Socket()
	assert.ErrorContains(t, err, `DOCKER_HOST="ssh://host" is not a unix:// socket`)
}
