package evidence

import (
	"slices"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
)

// A repeated campaign's tallies must be what its runs say: the matrix and
// the gate read them, so a tally that claims more than the runs is refused.
func TestCampaignTalliesAreRecomputed(t *testing.T) {
	run := func(name string, k Kind) ScenarioSummary {
		return ScenarioSummary{Name: name, Dir: "x", Verdict: Verdict{Kind: k}}
	}
	r := &Run{
		Scenarios: []ScenarioSummary{run("isolation", Passed), run("memory", Passed), run("isolation", Passed), run("memory", Failed)},
		Campaign: &Campaign{Repeat: 2, Scenarios: []CampaignScenario{
			{Index: 1, Name: "isolation", Runs: 2, Passes: 2, Verdict: Verdict{Kind: Passed}},
			{Index: 2, Name: "memory", Runs: 2, Passes: 1, Verdict: Verdict{Kind: Flaky, Reason: "passed 1 of 2"}},
		}},
	}
	assert.DeepEqual(t, campaignProblems(r), []string(nil))

	// The signer claims memory passed both runs.
	r.Campaign.Scenarios[1] = CampaignScenario{Index: 2, Name: "memory", Runs: 2, Passes: 2, Verdict: Verdict{Kind: Passed}}
	got := campaignProblems(r)
	assert.Assert(t, len(got) == 1, "%v", got)
	assert.Check(t, strings.Contains(got[0], `campaign tally "memory: passed 2/2", but its runs say "memory: flaky (passed 1 of 2)"`), got[0])

	// A scenario that never ran in some repeat cannot be tallied as run.
	r.Scenarios[3] = ScenarioSummary{Name: "memory", Verdict: Verdict{Kind: Skipped}}
	r.Campaign.Scenarios[1] = CampaignScenario{Index: 2, Name: "memory", Runs: 2, Passes: 1, Verdict: Verdict{Kind: Passed}}
	assert.Check(t, len(campaignProblems(r)) == 1)

	// Tallies without a repeat, or of the wrong count, are refused.
	assert.Check(t, len(campaignProblems(&Run{Campaign: &Campaign{Repeat: 1, Scenarios: r.Campaign.Scenarios}})) == 1)
	assert.Check(t, len(campaignProblems(&Run{Scenarios: r.Scenarios[:3], Campaign: &Campaign{Repeat: 2, Scenarios: r.Campaign.Scenarios}})) == 1)
}

// A report that lists a scenario twice contributes it once: its two lines
// cannot hide another report of the same tuple that never ran it.
func TestMergeCountsReportsNotLines(t *testing.T) {
	rep := func(lines ...PredicateLine) *Signed {
		return &Signed{Dir: "r", Predicate: Predicate{Verdict: Verdict{Kind: Passed}, Scenarios: lines}}
	}
	pass := PredicateLine{Name: "isolation", Verdict: Verdict{Kind: Passed}}
	other := PredicateLine{Name: "admission", Verdict: Verdict{Kind: Passed}}
	m := Merge([]*Signed{rep(pass, pass), rep(other)})
	i := slices.Index(m.Scenarios, "isolation")
	assert.Equal(t, m.Cells[i][0], Cell{Kind: Passed, Passed: 1, Runs: 1})
	na := PredicateLine{Name: "isolation", Verdict: Verdict{Kind: NotApplicable, Reason: "no"}}
	m = Merge([]*Signed{rep(pass, na)})
	assert.Equal(t, m.Cells[0][0], Cell{Kind: NotApplicable, Reason: "no", Passed: 0, Runs: 1})
}

// Tally counts the runs with a directory and their passes, per entry, and
// combines their verdicts: a run not run is left out, and a pass and a
// failure are flaky.
func TestTally(t *testing.T) {
	run := func(name, dir string, k Kind) ScenarioSummary {
		return ScenarioSummary{Name: name, Dir: dir, Verdict: Verdict{Kind: k}}
	}
	got := Tally([]ScenarioSummary{
		run("isolation", "01-isolation", Passed), run("memory", "02-memory", Passed),
		run("isolation", "03-isolation", Passed), run("memory", "04-memory", Failed),
		run("isolation", "05-isolation", Passed), run("memory", "", Skipped),
	}, 3)
	assert.DeepEqual(t, got, []CampaignScenario{
		{Index: 1, Name: "isolation", Runs: 3, Passes: 3, Verdict: Verdict{Kind: Passed}},
		{Index: 2, Name: "memory", Runs: 2, Passes: 1, Verdict: Verdict{Kind: Flaky, Reason: "passed 1 of 2"}},
	})
	assert.Check(t, Tally(nil, 2) == nil)
}
