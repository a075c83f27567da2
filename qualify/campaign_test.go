package qualify_test

import (
	"context"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/qualify"
	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/evidence"
	"github.com/qualbox/qualbox/qualify/manifest"
	"github.com/qualbox/qualbox/qualify/scenario"
)

// A scenario that records no check cannot pass: it proved nothing.
func TestRunNoChecksIsFailed(t *testing.T) {
	cfg, out := fakeRun(t, fake{}, "nochecks", "pass")
	run, err := qualify.Run(context.Background(), cfg)
	assert.NilError(t, err)
	assert.DeepEqual(t, run.Scenarios[0].Verdict, evidence.Verdict{Kind: evidence.Failed})
	assert.Equal(t, run.Scenarios[0].Detail, evidence.NoChecksReason)
	assert.Equal(t, run.Scenarios[1].Verdict.Kind, evidence.Passed)
	assert.Equal(t, run.Verdict.Kind, evidence.Failed)
	ev := readJSON[evidence.Scenario](t, filepath.Join(out, "01-fake", "evidence.json"))
	assert.Equal(t, len(ev.Checks), 0)
	assert.Equal(t, ev.Failure, evidence.NoChecksReason)
	assert.Equal(t, ev.Verdict.Kind, evidence.Failed)
}

func TestScenarioVerdict(t *testing.T) {
	ok := evidence.Check{Name: "a", OK: true}
	skip := &evidence.Verdict{Kind: evidence.Skipped, Reason: "needs v2"}
	for _, tc := range []struct {
		name     string
		s        evidence.Scenario
		explicit *evidence.Verdict
		want     evidence.Verdict
	}{
		{"no checks", evidence.Scenario{}, nil, evidence.Verdict{Kind: evidence.Failed, Reason: evidence.NoChecksReason}},
		{"one passed check", evidence.Scenario{Checks: []evidence.Check{ok}}, nil, evidence.Verdict{Kind: evidence.Passed}},
		{"skipped without checks", evidence.Scenario{}, skip, *skip},
		{"failed check beats skip", evidence.Scenario{Checks: []evidence.Check{{Name: "b"}}}, skip, evidence.Verdict{Kind: evidence.Failed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.DeepEqual(t, evidence.ScenarioVerdict(&tc.s, tc.explicit, false), tc.want)
		})
	}
}

func TestCombineRuns(t *testing.T) {
	p, f, s := evidence.Verdict{Kind: evidence.Passed}, evidence.Verdict{Kind: evidence.Failed}, evidence.Verdict{Kind: evidence.Skipped, Reason: "r"}
	for _, tc := range []struct {
		runs []evidence.Verdict
		want evidence.Verdict
	}{
		{[]evidence.Verdict{p, p, p}, p},
		{[]evidence.Verdict{f, f}, f},
		{[]evidence.Verdict{p, f, p}, evidence.Verdict{Kind: evidence.Flaky, Reason: "passed 2 of 3"}},
		{[]evidence.Verdict{s, s}, s},
		{[]evidence.Verdict{p, s}, evidence.Verdict{Kind: evidence.Flaky, Reason: "passed 1 of 2"}},
	} {
		assert.Check(t, is.DeepEqual(evidence.CombineRuns(tc.runs), tc.want), "%v", tc.runs)
	}
}

// --repeat runs every entry N times in one report: one directory and
// namespace per run, per-scenario pass counts, and a scenario that failed
// some runs is flaky, which fails the run and the gate.
func TestRunRepeatCountsPassesAndFlakes(t *testing.T) {
	f := fake{calls: new(atomic.Int64)}
	cfg, out := fakeRun(t, f, "pass", "flaky", "fail-check")
	cfg.Repeat = 4
	run, err := qualify.Run(context.Background(), cfg)
	assert.NilError(t, err)
	// Every run is listed in campaign order, with its own evidence, index
	// and namespace.
	assert.Equal(t, len(run.Scenarios), 12)
	namespaces := map[string]bool{}
	for k, s := range run.Scenarios {
		assert.Equal(t, s.Index, k+1)
		assert.Equal(t, s.Repeat, k/3+1)
		assert.Equal(t, s.Dir, fmt.Sprintf("%02d-fake", k+1))
		ev := readJSON[evidence.Scenario](t, filepath.Join(out, s.Dir, "evidence.json"))
		assert.Equal(t, ev.Index, k+1)
		assert.Equal(t, ev.Repeat, k/3+1)
		assert.Equal(t, ev.Verdict, s.Verdict)
		assert.Check(t, !namespaces[ev.Namespace], "namespace %s reused", ev.Namespace)
		namespaces[ev.Namespace] = true
	}
	assert.Equal(t, run.Verdict.Kind, evidence.Failed)
	assert.Equal(t, qualify.ExitCode(run.Run, nil), 1)

	assert.Assert(t, run.Campaign != nil)
	assert.Equal(t, run.Campaign.Repeat, 4)
	assert.Equal(t, run.Campaign.Parallel, 1)
	assert.Equal(t, len(run.Campaign.Rounds), 4)
	assert.DeepEqual(t, run.Campaign.Rounds[1].Order, []string{"04-fake", "05-fake", "06-fake"})
	assert.DeepEqual(t, run.Campaign.Scenarios, []evidence.CampaignScenario{
		{Index: 1, Name: "fake", Runs: 4, Passes: 4, Verdict: evidence.Verdict{Kind: evidence.Passed}},
		{Index: 2, Name: "fake", Runs: 4, Passes: 2, Verdict: evidence.Verdict{Kind: evidence.Flaky, Reason: "passed 2 of 4"}},
		{Index: 3, Name: "fake", Runs: 4, Passes: 0, Verdict: evidence.Verdict{Kind: evidence.Failed}},
	})

	var junit struct {
		Suite struct {
			Tests    int `xml:"tests,attr"`
			Failures int `xml:"failures,attr"`
		} `xml:"testsuite"`
	}
	data, err := os.ReadFile(filepath.Join(out, "junit.xml"))
	assert.NilError(t, err)
	assert.NilError(t, xml.Unmarshal(data, &junit))
	assert.Equal(t, junit.Suite.Tests, 12)
	assert.Equal(t, junit.Suite.Failures, 6)
	summary, err := os.ReadFile(filepath.Join(out, "summary.md"))
	assert.NilError(t, err)
	assert.Check(t, is.Contains(string(summary), "- Campaign: repeat 4, parallel 1"))
	assert.Check(t, is.Contains(string(summary), "- fake: flaky (passed 2 of 4)\n"))
	assert.Check(t, is.Contains(string(summary), "- fake: passed 4/4\n"))

	// The gate refuses a flaky scenario even though it passed some runs;
	// the signed report verifies.
	f = fake{calls: new(atomic.Int64)}
	cfg, out = fakeRun(t, f, "flaky")
	cfg.Repeat = 2
	keys := t.TempDir()
	_, pubPath, err := attest.GenerateKey(keys)
	assert.NilError(t, err)
	cfg.SigningKey, err = attest.LoadPrivateKey(filepath.Join(keys, attest.PrivateKeyFile))
	assert.NilError(t, err)
	run, err = qualify.Run(context.Background(), cfg)
	assert.NilError(t, err)
	assert.Equal(t, run.Campaign.Scenarios[0].Passes, 1)
	pub, err := attest.LoadPublicKey(pubPath)
	assert.NilError(t, err)
	signed, err := evidence.VerifyRun(context.Background(), out, pub)
	assert.NilError(t, err)
	m := evidence.Merge([]*evidence.Signed{signed})
	assert.Equal(t, m.Cells[0][0].Kind, evidence.Flaky)
	assert.Equal(t, m.Cells[0][0].String(), "flaky (passed 1 of 2)")
	assert.Equal(t, m.Cells[0][0].Passed, 0, "a flaky scenario never counts as passed")
	assert.Equal(t, m.Columns[0].RunVerdicts[0].Kind, evidence.Failed)
}

// solo is a scenario that must run alone: it checks that no "slow" fake
// runs beside it.
type solo struct{ f fake }

func (solo) Name() string                         { return "solo" }
func (solo) Validate(params map[string]any) error { return scenario.DecodeParams(params, &struct{}{}) }
func (solo) Exclusive() string                    { return "it must run alone" }

func (s solo) Run(ctx context.Context, env *scenario.Env, params map[string]any, rec *scenario.Record) error {
	rec.Equal("no other scenario runs beside it", int64(0), s.f.running.Load())
	time.Sleep(100 * time.Millisecond)
	rec.Equal("none started while it ran", int64(0), s.f.running.Load())
	return nil
}

// An Exclusive scenario waits for the running ones and runs alone.
func TestRunParallelExclusive(t *testing.T) {
	f := fake{running: new(atomic.Int64), most: new(atomic.Int64)}
	cfg, _ := fakeRun(t, f, "slow", "slow", "slow")
	reg := scenario.NewRegistry(f, solo{f})
	cfg.Registry = reg
	solo := manifest.Entry{Name: "solo", Params: map[string]any{}}
	m := *cfg.Manifest
	m.Scenarios = []manifest.Entry{m.Scenarios[0], m.Scenarios[1], solo, m.Scenarios[2], solo}
	cfg.Manifest, cfg.Parallel = &m, 3
	run, err := qualify.Run(context.Background(), cfg)
	assert.NilError(t, err)
	for _, s := range run.Scenarios {
		assert.Check(t, is.Equal(s.Verdict.Kind, evidence.Passed), "%s: %s", s.Dir, s.Detail)
	}
	assert.DeepEqual(t, run.Campaign.Rounds[0].Exclusive, []string{"03-solo", "05-solo"})
	assert.DeepEqual(t, run.Campaign.Rounds[0].Order[2:], []string{"03-solo", "04-fake", "05-solo"})
}

// --parallel runs scenarios of a round concurrently, each in its own
// directory and namespace, with the same evidence as one at a time.
func TestRunParallel(t *testing.T) {
	f := fake{running: new(atomic.Int64), most: new(atomic.Int64)}
	cfg, out := fakeRun(t, f, "slow", "slow", "slow", "slow", "fail-check", "slow")
	cfg.Parallel = 3
	run, err := qualify.Run(context.Background(), cfg)
	assert.NilError(t, err)
	assert.Check(t, f.most.Load() >= 2, "at most %d ran at once", f.most.Load())
	assert.Check(t, f.most.Load() <= 3, "%d ran at once", f.most.Load())
	assert.Equal(t, len(run.Scenarios), 6)
	for i, s := range run.Scenarios {
		assert.Equal(t, s.Index, i+1)
		want := evidence.Passed
		if i == 4 {
			want = evidence.Failed
		}
		assert.Check(t, is.Equal(s.Verdict.Kind, want), "%d", i)
		ev := readJSON[evidence.Scenario](t, filepath.Join(out, s.Dir, "evidence.json"))
		assert.Equal(t, ev.Index, i+1)
		assert.Equal(t, len(ev.Checks), len(readJSON[evidence.Scenario](t, filepath.Join(out, run.Scenarios[0].Dir, "evidence.json")).Checks)+boolInt(i == 4))
	}
	assert.Assert(t, run.Campaign != nil)
	assert.Equal(t, run.Campaign.Parallel, 3)
	assert.Equal(t, run.Campaign.Repeat, 1)
	assert.Equal(t, len(run.Campaign.Rounds[0].Order), 6)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
