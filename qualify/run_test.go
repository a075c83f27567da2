package qualify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/qualify"
	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/evidence"
	"github.com/qualbox/qualbox/qualify/manifest"
	"github.com/qualbox/qualbox/qualify/scenario"
)

// fake is a scenario whose outcome its params choose.
type fake struct {
	// started is closed when a "block" run starts waiting.
	started chan struct{}
	// calls counts "flaky" runs: every second one fails a check.
	calls *atomic.Int64
	// running and most track concurrent "slow" runs.
	running, most *atomic.Int64
	// release ends a "hang" run, which ignores its context.
	release chan struct{}
}

type fakeParams struct {
	Outcome string `json:"outcome"`
}

func (fake) Name() string { return "fake" }

func (fake) Validate(params map[string]any) error {
	var p fakeParams
	if err := scenario.DecodeParams(params, &p); err != nil {
		return err
	}
	switch p.Outcome {
	case "pass", "fail-check", "error", "cleanup", "skip", "na", "panic", "block", "slow-cleanup", "hang", "nochecks", "flaky", "slow", "spill", "artefact", "log":
		return nil
	}
	return fmt.Errorf("params.outcome: %q is not one of pass, fail-check, error, cleanup, skip, na, panic, block, slow-cleanup, hang, nochecks, flaky, slow, spill, artefact, log", p.Outcome)
}

func (f fake) Run(ctx context.Context, env *scenario.Env, params map[string]any, rec *scenario.Record) error {
	var p fakeParams
	_ = scenario.DecodeParams(params, &p)
	rec.Request("outcome", p.Outcome)
	rec.Observe("namespace", env.Namespace)
	if p.Outcome == "nochecks" {
		return nil
	}
	rec.Equal("always", "ok", "ok")
	switch p.Outcome {
	case "flaky":
		rec.Equal("even call", int64(0), f.calls.Add(1)%2)
	case "slow":
		n := f.running.Add(1)
		for {
			m := f.most.Load()
			if n <= m || f.most.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(200 * time.Millisecond)
		f.running.Add(-1)
	case "spill":
		// What scenario.Env.Backend leaves when a sandbox spilled nothing.
		if err := os.MkdirAll(filepath.Join(env.Dir, "spill", "sorter"), 0o700); err != nil {
			return err
		}
	case "artefact":
		// A file of the scenario's own in its directory, as a scenario's
		// records and markers are.
		if err := os.WriteFile(filepath.Join(env.Dir, "record.json"), []byte("{}\n"), 0o644); err != nil {
			return err
		}
	case "log":
		env.Log("detail %d of %s", 1, "log")
	case "fail-check":
		rec.Equal("answer", 42, 41)
	case "error":
		return errors.New("boom")
	case "cleanup":
		rec.CleanupError("destroy", errors.New("volume in use"))
	case "skip":
		rec.Skip("needs cgroup v2")
	case "na":
		rec.NotApplicable("no outbound network on this profile")
	case "panic":
		panic("fake panic")
	case "block":
		close(f.started)
		<-ctx.Done()
		// Cleanup runs on a context detached from the cancelled one.
		cctx := context.WithoutCancel(ctx)
		rec.Observe("cleanupRan", cctx.Err() == nil)
		return ctx.Err()
	case "slow-cleanup":
		close(f.started)
		<-ctx.Done()
		time.Sleep(400 * time.Millisecond)
		return ctx.Err()
	case "hang":
		close(f.started)
		<-f.release
	}
	return nil
}

const fakeManifest = `profile: linux-x64-cgroupv1
engine: {endpoint: unix:///var/run/docker.sock}
image: sha256:%s
namespace: test
policy:
  resources: {cpus: 0.5, memoryBytes: 268435456, pids: 128}
  temporaryStorage: {homeBytes: 16777216, tempBytes: 8388608}
  network: {kind: isolated}
  deadlines: {startupMs: 60000, cleanupMs: 5000}
  transfers: {chunkBytes: 65536, metadataBatchBytes: 1048576, metadataMergeFanIn: 16}
  streams: {maxBufferedInputBytes: 65536, maxBufferedOutputBytes: 1048576, highWaterMarkBytes: 16384}
scenarios:
`

func fakeRun(t *testing.T, f fake, outcomes ...string) (qualify.Config, string) {
	t.Helper()
	doc := fmt.Sprintf(fakeManifest, strings.Repeat("a", 64))
	for _, o := range outcomes {
		doc += fmt.Sprintf("  - {name: fake, params: {outcome: %s}}\n", o)
	}
	reg := scenario.NewRegistry(f)
	m, err := manifest.Parse("fake.yaml", []byte(doc), reg)
	assert.NilError(t, err)
	out := filepath.Join(t.TempDir(), "run")
	return qualify.Config{Manifest: m, Output: out, Registry: reg, ImageID: "sha256:" + strings.Repeat("a", 64), ImageSource: "manifest"}, out
}

func readJSON[T any](t *testing.T, path string) T {
	t.Helper()
	data, err := os.ReadFile(path)
	assert.NilError(t, err)
	var v T
	assert.NilError(t, json.Unmarshal(data, &v))
	return v
}

func listFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			rel += "/"
		}
		files = append(files, rel)
		return nil
	})
	assert.NilError(t, err)
	sort.Strings(files)
	return files
}

func TestRunLayoutAndVerdicts(t *testing.T) {
	outcomes := []string{"pass", "fail-check", "error", "cleanup", "skip", "na", "panic"}
	cfg, out := fakeRun(t, fake{}, outcomes...)
	var stdout, stderr bytes.Buffer
	cfg.Stderr = &stderr
	run, err := qualify.Run(context.Background(), cfg)
	assert.NilError(t, err)
	assert.NilError(t, evidence.Table(&stdout, run.Run))
	assert.Equal(t, run.Dir, out)
	assert.Equal(t, run.Envelope, "", "not signed")

	want := []string{"./", "01-fake/", "01-fake/evidence.json", "02-fake/", "02-fake/evidence.json",
		"03-fake/", "03-fake/evidence.json", "04-fake/", "04-fake/evidence.json", "05-fake/", "05-fake/evidence.json",
		"06-fake/", "06-fake/evidence.json", "07-fake/", "07-fake/evidence.json", "evidence.json", "junit.xml", "report.html", "summary.md"}
	assert.DeepEqual(t, listFiles(t, out), want)

	wantKinds := []evidence.Verdict{
		{Kind: evidence.Passed}, {Kind: evidence.Failed}, {Kind: evidence.Failed}, {Kind: evidence.Failed},
		{Kind: evidence.Skipped, Reason: "needs cgroup v2"}, {Kind: evidence.NotApplicable, Reason: "no outbound network on this profile"},
		{Kind: evidence.Failed},
	}
	var namespaces []string
	for i, w := range wantKinds {
		ev := readJSON[evidence.Scenario](t, filepath.Join(out, fmt.Sprintf("%02d-fake", i+1), "evidence.json"))
		assert.Equal(t, ev.Schema, evidence.Schema)
		assert.Equal(t, ev.Index, i+1)
		assert.DeepEqual(t, ev.Verdict, w)
		assert.DeepEqual(t, ev.Params, map[string]any{"outcome": outcomes[i]})
		assert.Check(t, is.Equal(run.Scenarios[i].Verdict, w))
		namespaces = append(namespaces, ev.Namespace)
		switch outcomes[i] {
		case "error":
			assert.Equal(t, ev.Failure, "boom")
			assert.Equal(t, len(ev.CleanupErrors), 0)
		case "cleanup":
			assert.Equal(t, ev.Failure, "", "cleanup errors stay apart from the failure")
			assert.DeepEqual(t, ev.CleanupErrors, []string{"destroy: volume in use"})
		case "panic":
			assert.Check(t, is.Contains(ev.Failure, "panic: fake panic"))
		case "fail-check":
			assert.Equal(t, run.Scenarios[i].Detail, "answer: want 42, got 41")
		}
	}
	// Each scenario has its own namespace derived from the prefix.
	seen := map[string]bool{}
	for _, ns := range namespaces {
		assert.Check(t, strings.HasPrefix(ns, "test-fake-"), ns)
		assert.Check(t, !seen[ns], "namespace %s reused", ns)
		seen[ns] = true
	}

	r := readJSON[evidence.Run](t, filepath.Join(out, "evidence.json"))
	assert.Equal(t, r.Schema, evidence.Schema)
	assert.Equal(t, r.Verdict.Kind, evidence.Failed)
	assert.Equal(t, r.Manifest.Path, "fake.yaml")
	assert.Equal(t, len(r.Manifest.SHA256), 64)
	assert.Equal(t, qualify.ExitCode(run.Run, nil), 1)

	assert.Check(t, is.Contains(stderr.String(), "[1/7] fake ... passed ("))
	assert.Check(t, is.Contains(stderr.String(), "[5/7] fake ... skipped (needs cgroup v2) ("))
	assert.Check(t, is.Contains(stdout.String(), "│ 2 │ fake     │ failed"))

	var junit struct {
		Suite struct {
			Tests    int `xml:"tests,attr"`
			Failures int `xml:"failures,attr"`
			Skipped  int `xml:"skipped,attr"`
			Errors   int `xml:"errors,attr"`
		} `xml:"testsuite"`
	}
	data, err := os.ReadFile(filepath.Join(out, "junit.xml"))
	assert.NilError(t, err)
	assert.NilError(t, xml.Unmarshal(data, &junit))
	assert.Equal(t, junit.Suite.Tests, 7)
	assert.Equal(t, junit.Suite.Failures, 4)
	assert.Equal(t, junit.Suite.Skipped, 2)
	assert.Equal(t, junit.Suite.Errors, 0)
	assert.Check(t, is.Contains(string(data), "failure: boom"))
	assert.Check(t, is.Contains(string(data), "cleanup: destroy: volume in use"))
}

func TestRunPassedExitsZero(t *testing.T) {
	cfg, _ := fakeRun(t, fake{}, "pass", "skip", "na")
	run, err := qualify.Run(context.Background(), cfg)
	assert.NilError(t, err)
	assert.Equal(t, qualify.ExitCode(run.Run, nil), 0)
	written := readJSON[evidence.Run](t, filepath.Join(run.Dir, qualify.EvidenceFile))
	assert.Equal(t, written.Verdict.Kind, evidence.Passed)
}

// A scenario's empty spill directory is removed before the report is
// signed: a signed report holds no directory without a subject, and the
// report of a real run verifies.
func TestRunRemovesEmptyDirectoriesBeforeSigning(t *testing.T) {
	cfg, out := fakeRun(t, fake{}, "spill", "pass")
	keys := t.TempDir()
	_, pubPath, err := attest.GenerateKey(keys)
	assert.NilError(t, err)
	cfg.SigningKey, err = attest.LoadPrivateKey(filepath.Join(keys, attest.PrivateKeyFile))
	assert.NilError(t, err)
	_, err = qualify.Run(context.Background(), cfg)
	assert.NilError(t, err)
	_, err = os.Stat(filepath.Join(out, "01-fake", "spill"))
	assert.Assert(t, errors.Is(err, fs.ErrNotExist), "spill directory left: %v", err)
	pub, err := attest.LoadPublicKey(pubPath)
	assert.NilError(t, err)
	_, err = evidence.VerifyRun(context.Background(), out, pub)
	assert.NilError(t, err)
}

func TestRunRefusesNonEmptyOutput(t *testing.T) {
	cfg, out := fakeRun(t, fake{}, "pass")
	assert.NilError(t, os.MkdirAll(out, 0o755))
	assert.NilError(t, os.WriteFile(filepath.Join(out, "keep"), nil, 0o644))
	_, err := qualify.Run(context.Background(), cfg)
	assert.ErrorContains(t, err, "is not empty")
	entries, _ := os.ReadDir(out)
	assert.Equal(t, len(entries), 1, "nothing written into the refused directory")
}

func TestRunInterrupted(t *testing.T) {
	f := fake{started: make(chan struct{})}
	cfg, out := fakeRun(t, f, "pass", "block", "pass")
	run := runInterruptedOnStart(t, f, cfg)
	assert.Assert(t, run.Interrupted)
	got := []evidence.Verdict{run.Scenarios[0].Verdict, run.Scenarios[1].Verdict, run.Scenarios[2].Verdict}
	want := []evidence.Verdict{{Kind: evidence.Passed}, {Kind: evidence.Failed, Reason: "interrupted"}, {Kind: evidence.Skipped, Reason: "not run: interrupted"}}
	assert.Assert(t, cmp.Equal(got, want), cmp.Diff(want, got))
	ev := readJSON[evidence.Scenario](t, filepath.Join(out, "02-fake", "evidence.json"))
	assert.Equal(t, ev.Failure, "interrupted: context canceled")
	assert.Equal(t, ev.Observed["cleanupRan"], true)
	_, err := os.Stat(filepath.Join(out, "03-fake"))
	assert.Assert(t, os.IsNotExist(err), "a scenario that did not run has no directory")
	r := readJSON[evidence.Run](t, filepath.Join(out, "evidence.json"))
	assert.Assert(t, r.Interrupted)
}

func TestManifestRejectsUnknownFakeOutcome(t *testing.T) {
	doc := fmt.Sprintf(fakeManifest, strings.Repeat("a", 64)) + "  - {name: fake, params: {outcome: maybe}}\n"
	_, err := manifest.Parse("fake.yaml", []byte(doc), scenario.NewRegistry(fake{}))
	assert.ErrorContains(t, err, `fake.yaml:13: scenarios[0]: scenario fake: params.outcome: "maybe" is not one of`)
}

// A scenario past its time limit is cancelled with a *TimeLimitError,
// fails (not as interrupted) once it returns, leaves the goroutine stacks
// in its directory, and the run goes on.
func TestRunScenarioTimeLimit(t *testing.T) {
	f := fake{started: make(chan struct{})}
	cfg, out := fakeRun(t, f, "block", "pass")
	cfg.ScenarioTimeout = 100 * time.Millisecond
	run, err := qualify.Run(context.Background(), cfg)
	assert.NilError(t, err)
	assert.Equal(t, qualify.ExitCode(run.Run, nil), 1)
	assert.Assert(t, !run.Interrupted)
	assert.Equal(t, run.Scenarios[0].Verdict.Kind, evidence.Failed)
	assert.Equal(t, run.Scenarios[1].Verdict.Kind, evidence.Passed)
	ev := readJSON[evidence.Scenario](t, filepath.Join(out, "01-fake", "evidence.json"))
	assert.Equal(t, ev.Failure, "scenario fake exceeded its time limit of 100ms (goroutine stacks in goroutines.txt); then: context canceled")
	assert.Equal(t, ev.Observed["cleanupRan"], true, "the scenario cleaned up on a detached context")
	stacks, err := os.ReadFile(filepath.Join(out, "01-fake", qualify.GoroutinesFile))
	assert.NilError(t, err)
	assert.Check(t, is.Contains(string(stacks), "qualify_test.fake.Run"), "the stacks show where the scenario waited")
}

// A scenario that ignores its cancelled context is abandoned after the
// grace period: it fails, nothing else starts, and Run returns with a
// complete report instead of waiting for it.
func TestRunScenarioAbandoned(t *testing.T) {
	f := fake{started: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(func() { close(f.release) })
	cfg, out := fakeRun(t, f, "pass", "hang", "pass", "pass")
	cfg.ScenarioTimeout, cfg.ScenarioGrace = 100*time.Millisecond, 200*time.Millisecond
	keys := t.TempDir()
	_, pubPath, err := attest.GenerateKey(keys)
	assert.NilError(t, err)
	cfg.SigningKey, err = attest.LoadPrivateKey(filepath.Join(keys, attest.PrivateKeyFile))
	assert.NilError(t, err)
	begin := time.Now()
	run, err := qualify.Run(context.Background(), cfg)
	assert.NilError(t, err)
	assert.Check(t, time.Since(begin) < 10*time.Second, "Run waited %s", time.Since(begin))
	assert.Equal(t, qualify.ExitCode(run.Run, nil), 1)
	assert.Assert(t, !run.Interrupted)
	got := []evidence.Verdict{run.Scenarios[0].Verdict, run.Scenarios[1].Verdict, run.Scenarios[2].Verdict, run.Scenarios[3].Verdict}
	want := []evidence.Verdict{{Kind: evidence.Passed}, {Kind: evidence.Failed}, {Kind: evidence.Skipped, Reason: "not run: scenario 02-fake was abandoned"}, {Kind: evidence.Skipped, Reason: "not run: scenario 02-fake was abandoned"}}
	assert.Assert(t, cmp.Equal(got, want), cmp.Diff(want, got))
	ev := readJSON[evidence.Scenario](t, filepath.Join(out, "02-fake", "evidence.json"))
	assert.Equal(t, ev.Failure, "scenario fake exceeded its time limit of 100ms; did not return within 200ms after its time limit; "+
		"abandoned, so the run stops here (what it created may still exist) (goroutine stacks in goroutines.txt)")
	assert.DeepEqual(t, ev.Checks, []evidence.Check{{Name: "always", Want: "ok", Got: "ok", OK: true}})
	assert.DeepEqual(t, ev.CleanupErrors, []string{"resources not checked: the scenario was abandoned while running"})
	// The abandonment is recorded, not only described: it is what
	// licenses the not-run scenarios after it.
	assert.Check(t, ev.Abandoned)
	assert.Check(t, run.Scenarios[1].Abandoned)
	_, err = os.Stat(filepath.Join(out, "02-fake", qualify.GoroutinesFile))
	assert.NilError(t, err)
	// The report, the stacks included, is signed and verifies.
	pub, err := attest.LoadPublicKey(pubPath)
	assert.NilError(t, err)
	signed, err := evidence.VerifyRun(context.Background(), out, pub)
	assert.NilError(t, err)
	assert.Equal(t, signed.Run.Verdict.Kind, evidence.Failed)
}

// An interruption reaches a running scenario through its context; one that
// ignores it is abandoned after the grace period, so an interrupted run
// still ends with its report.
func TestRunInterruptedScenarioAbandoned(t *testing.T) {
	f := fake{started: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(func() { close(f.release) })
	cfg, out := fakeRun(t, f, "hang", "pass")
	cfg.ScenarioGrace = 200 * time.Millisecond
	run := runInterruptedOnStart(t, f, cfg)
	ev := readJSON[evidence.Scenario](t, filepath.Join(out, "01-fake", "evidence.json"))
	assert.Equal(t, ev.Failure, "interrupted: did not return within 200ms after the run was interrupted; "+
		"abandoned, so the run stops here (what it created may still exist) (goroutine stacks in goroutines.txt)")
	assert.Equal(t, ev.Verdict, evidence.Verdict{Kind: evidence.Failed, Reason: "interrupted"})
	assert.Equal(t, run.Scenarios[1].Verdict, evidence.Verdict{Kind: evidence.Skipped, Reason: "not run: interrupted"},
		"the interruption, not the abandonment, is why the rest did not run")
}

// After an interruption the time limit no longer applies: a scenario
// cleaning up past it fails as interrupted, with no time-limit failure
// and no stacks.
func TestRunInterruptedNoTimeLimit(t *testing.T) {
	f := fake{started: make(chan struct{})}
	cfg, out := fakeRun(t, f, "slow-cleanup")
	cfg.ScenarioTimeout = 200 * time.Millisecond
	runInterruptedOnStart(t, f, cfg)
	ev := readJSON[evidence.Scenario](t, filepath.Join(out, "01-fake", "evidence.json"))
	assert.Equal(t, ev.Failure, "interrupted: context canceled")
	_, err := os.Stat(filepath.Join(out, "01-fake", qualify.GoroutinesFile))
	assert.Assert(t, os.IsNotExist(err), "no stacks for an interrupted scenario that returned")
}

// runInterruptedOnStart runs cfg, cancelling the run once f's scenario has
// started, and checks that it ends as interrupted (exit status 130).
func runInterruptedOnStart(t *testing.T, f fake, cfg qualify.Config) *evidence.Run {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-f.started
		cancel()
	}()
	run, err := qualify.Run(ctx, cfg)
	assert.NilError(t, err)
	assert.Equal(t, qualify.ExitCode(run.Run, nil), 130)
	return run.Run
}

// An interruption after the time limit shortens the grace: the run gives
// the scenario InterruptGrace from the interruption, not what was left of
// ScenarioGrace.
func TestRunInterruptAfterTimeLimit(t *testing.T) {
	f := fake{started: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(func() { close(f.release) })
	cfg, out := fakeRun(t, f, "hang")
	cfg.ScenarioTimeout, cfg.ScenarioGrace, cfg.InterruptGrace = 100*time.Millisecond, time.Minute, 200*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-f.started
		time.Sleep(400 * time.Millisecond)
		cancel()
	}()
	begin := time.Now()
	run, err := qualify.Run(ctx, cfg)
	assert.NilError(t, err)
	assert.Check(t, time.Since(begin) < 30*time.Second, "Run waited %s", time.Since(begin))
	assert.Equal(t, qualify.ExitCode(run.Run, nil), 130)
	ev := readJSON[evidence.Scenario](t, filepath.Join(out, "01-fake", "evidence.json"))
	assert.Equal(t, ev.Failure, "interrupted: scenario fake exceeded its time limit of 100ms; did not return within 200ms after the run was interrupted; "+
		"abandoned, so the run stops here (what it created may still exist) (goroutine stacks in goroutines.txt)")
}
