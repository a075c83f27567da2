package qualify_test

import (
	"context"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"gotest.tools/v3/assert"
	"gotest.tools/v3/skip"

	"github.com/qualbox/qualbox/internal/testengine"
	"github.com/qualbox/qualbox/qualify"
	"github.com/qualbox/qualbox/qualify/evidence"
	"github.com/qualbox/qualbox/qualify/guest"
	"github.com/qualbox/qualbox/qualify/manifest"
	"github.com/qualbox/qualbox/qualify/scenario"
)

// sharedImages are the guest images the package's catalogue tests build,
// one per Engine (lane A's, and lane B's for the engine-restart tests),
// each built once; TestMain removes them.
var (
	imagesMu sync.Mutex
	images   = map[string]*sharedBuild{}
)

type sharedBuild struct {
	once sync.Once
	id   string
	err  error
	cli  *client.Client
}

// sharedImage builds the guest image once per Engine for the package's
// catalogue tests.
func sharedImage(t *testing.T, cli *client.Client) string {
	imagesMu.Lock()
	b, ok := images[cli.DaemonHost()]
	if !ok {
		b = &sharedBuild{}
		images[cli.DaemonHost()] = b
	}
	imagesMu.Unlock()
	b.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		img, err := guest.Build(ctx, cli, guest.BuildOptions{})
		b.id, b.err, b.cli = img.ID, err, cli
	})
	assert.NilError(t, b.err)
	return b.id
}

func TestMain(m *testing.M) {
	code := m.Run()
	for host, b := range images {
		if b.id == "" {
			continue
		}
		if err := guest.Remove(context.Background(), b.cli, b.id); err != nil {
			os.Stderr.WriteString("remove test image " + b.id + " at " + host + ": " + err.Error() + "\n")
			code = 1
		}
		b.cli.Close()
	}
	os.Exit(code)
}

// runScenarios runs the shipped manifest restricted to names (with the
// manifest's params) through the runner on the real Engine.
func runScenarios(t *testing.T, names ...string) (*evidence.Run, string) {
	t.Helper()
	return runSignedScenarios(t, nil, names...)
}

// runSignedScenarios is runScenarios signing the report with key (nil
// signs nothing).
func runSignedScenarios(t *testing.T, key ed25519.PrivateKey, names ...string) (*evidence.Run, string) {
	t.Helper()
	return runManifestScenarios(t, shippedManifest, key, names...)
}

// runManifestScenarios is runSignedScenarios for the manifest at path,
// whose Engine must be the one under test.
func runManifestScenarios(t *testing.T, path string, key ed25519.PrivateKey, names ...string) (*evidence.Run, string) {
	t.Helper()
	reg := scenario.Default()
	m, err := manifest.Load(path, reg)
	assert.NilError(t, err)
	socket := testengine.Require(t)
	skip.If(t, m.Endpoint != "unix://"+socket, "the shipped manifest names %s, the test Engine is at %s", m.Endpoint, socket)
	cli, err := client.New(client.WithHost(m.Endpoint))
	assert.NilError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		cli.Close()
		t.Fatalf("the Engine at %s stopped answering: %v", m.Endpoint, err)
	}
	_, err = os.Stat(guest.DefaultBusybox)
	skip.If(t, err != nil, "Debian's static busybox is not installed at %s", guest.DefaultBusybox)
	img := sharedImage(t, cli)
	var entries []manifest.Entry
	for _, n := range names {
		found := false
		for _, e := range m.Scenarios {
			if e.Name == n {
				entries, found = append(entries, e), true
			}
		}
		if !found {
			entries = append(entries, manifest.Entry{Name: n})
		}
	}
	m.Scenarios = entries
	out := filepath.Join(t.TempDir(), "run")
	run, err := qualify.Run(ctx, qualify.Config{
		Manifest: m, Output: out, Registry: reg, Engine: cli, ImageID: img, ImageSource: "manifest", Stderr: testWriter{t},
		SigningKey: key,
	})
	assert.NilError(t, err)
	for _, sum := range run.Scenarios {
		ev := readJSON[evidence.Scenario](t, filepath.Join(out, sum.Dir, qualify.EvidenceFile))
		for _, c := range ev.Checks {
			if !c.OK {
				t.Errorf("%s: check %s: want %s, got %s", sum.Name, c.Name, c.Want, c.Got)
			}
		}
		if ev.Failure != "" || len(ev.CleanupErrors) > 0 {
			t.Errorf("%s: failure %q cleanup %v", sum.Name, ev.Failure, ev.CleanupErrors)
		}
		for _, r := range ev.Resources {
			assert.Check(t, r.Absent != nil && *r.Absent, "%s: %s %s present after cleanup", sum.Name, r.Role, r.ID)
		}
	}
	return run.Run, out
}

// scenarioEvidence reads one scenario's evidence from a run directory.
func scenarioEvidence(t *testing.T, out string, run *evidence.Run, name string) *evidence.Scenario {
	t.Helper()
	for _, s := range run.Scenarios {
		if s.Name == name {
			ev := readJSON[evidence.Scenario](t, filepath.Join(out, s.Dir, qualify.EvidenceFile))
			return &ev
		}
	}
	t.Fatalf("scenario %s not in run", name)
	return nil
}

func assertPassed(t *testing.T, run *evidence.Run, names ...string) {
	t.Helper()
	for _, s := range run.Scenarios {
		for _, n := range names {
			if s.Name == n {
				assert.Check(t, s.Verdict.Kind == evidence.Passed, "%s: %s: %s", n, s.Verdict, s.Detail)
			}
		}
	}
}

func checkNames(ev *evidence.Scenario) string {
	var b strings.Builder
	for _, c := range ev.Checks {
		b.WriteString(c.Name + "\n")
	}
	return b.String()
}

func TestMemoryExhaustion(t *testing.T) {
	run, out := runScenarios(t, "memory-exhaustion")
	assertPassed(t, run, "memory-exhaustion")
	ev := scenarioEvidence(t, out, run, "memory-exhaustion")
	assert.Assert(t, strings.Contains(checkNames(ev), "control: controller kill of sleep is not classified OOM"))
}

func TestDebugDump(t *testing.T) {
	skip.If(t, os.Getenv("QUALBOX_DEBUG_SCENARIO") == "", "debug only")
	run, out := runScenarios(t, os.Getenv("QUALBOX_DEBUG_SCENARIO"))
	ev := scenarioEvidence(t, out, run, os.Getenv("QUALBOX_DEBUG_SCENARIO"))
	data, _ := evidence.MarshalJSON(ev)
	t.Log(string(data))
}

func TestLimitScenarios(t *testing.T) {
	run, _ := runScenarios(t, "pid-exhaustion", "tmpfs-bounds", "stream-limits", "cancellation")
	assertPassed(t, run, "pid-exhaustion", "tmpfs-bounds", "stream-limits", "cancellation")
}

func TestContainmentScenarios(t *testing.T) {
	run, _ := runScenarios(t, "descendant-containment", "network-isolation", "exact-cleanup", "unsupported-quota")
	assertPassed(t, run, "descendant-containment", "network-isolation", "exact-cleanup", "unsupported-quota")
}

func TestLostEngineReplies(t *testing.T) {
	run, _ := runScenarios(t, "lost-engine-replies")
	assertPassed(t, run, "lost-engine-replies")
}
