package evidence_test

import (
	"context"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/qualify/evidence"
)

// partial makes the two-scenario fixture a run of --only admission:
// isolation is listed as not selected.
func partial(r *evidence.Run) {
	r.Selection = &evidence.Selection{Only: []string{"admission"}, Skipped: []string{"isolation"}}
	r.Scenarios[1] = evidence.ScenarioSummary{Index: 2, Name: "isolation", Verdict: evidence.Verdict{Kind: evidence.Skipped, Reason: evidence.NotSelectedReason}}
}

// A partial report verifies, and its summary says PARTIAL and what was
// not run.
func TestPartialReportVerifies(t *testing.T) {
	dir, keys := passedFixture(t, partial)
	s, err := evidence.VerifyRun(context.Background(), dir, pub(t, keys))
	assert.NilError(t, err)
	assert.DeepEqual(t, s.Run.Selection.Skipped, []string{"isolation"})
	md, err := evidence.Markdown(s.Run)
	assert.NilError(t, err)
	assert.Check(t, is.Contains(string(md), "- Verdict: **passed**\n- Coverage: **PARTIAL** (--only admission): not run: isolation\n"))
	var table strings.Builder
	assert.NilError(t, evidence.Table(&table, s.Run))
	assert.Check(t, strings.HasSuffix(table.String(), "PARTIAL (--only admission): not run: isolation\n"), table.String())

	// --skip records the same partiality.
	dir, keys = passedFixture(t, func(r *evidence.Run) {
		partial(r)
		r.Selection.Only, r.Selection.Skip = nil, []string{"isolation"}
	})
	_, err = evidence.VerifyRun(context.Background(), dir, pub(t, keys))
	assert.NilError(t, err)
}

// A selection that does not describe the scenario list is refused: a
// header hiding partiality, a scenario left out that the selection
// selects, a Skipped list that is not what the flag leaves out, names the
// run does not list, and both flags at once.
func TestForgedSelectionIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		edit       func(r *evidence.Run)
	}{
		{"header says complete", `scenario 2 "isolation" is listed as not run, but the run was not interrupted`,
			func(r *evidence.Run) { partial(r); r.Selection = nil }},
		{"selected scenario not run", `scenario 2 "isolation" is selected by --only admission,isolation, but is listed as not run: not selected`,
			func(r *evidence.Run) {
				partial(r)
				r.Selection.Only = []string{"admission", "isolation"}
			}},
		{"skipped list hides one", `selection says skipped [], but --only admission leaves out [isolation]`,
			func(r *evidence.Run) { partial(r); r.Selection.Skipped = []string{} }},
		{"unlisted name", `selection names scenario "lifecycle", which the run does not list`,
			func(r *evidence.Run) { partial(r); r.Selection.Only = []string{"admission", "lifecycle"} }},
		{"both flags", "selection has 1 --only and 1 --skip names: want exactly one of them",
			func(r *evidence.Run) { partial(r); r.Selection.Skip = []string{"isolation"} }},
		{"unselected scenario ran", `scenario 1 "admission" is not selected by --skip admission, but is not listed as not run: not selected`,
			func(r *evidence.Run) {
				partial(r)
				r.Selection.Only, r.Selection.Skip = nil, []string{"admission"}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, keys := passedFixture(t, tc.edit)
			refused(t, dir, keys, "evidence.json", tc.want)
		})
	}
}

// The gate refuses a partial report for a required row, naming the row
// and the scenarios not run; for an informational row it shows the same
// violation without failing the gate.
func TestGateRefusesAPartialReportForARequiredRow(t *testing.T) {
	a := passedReport(t, harnessV2, nil)
	b := passedReport(t, harnessV2, func(r *evidence.Run) { laneB(r); partial(r) })
	reports := []*evidence.Signed{a, b}
	want := "report " + b.Dir + ": row lane-b (profile linux-x64-cgroupv1, engine 2.0.): partial report (--only admission): scenarios not run: isolation"

	g := evidence.Judge(reports, nil, twoRows(false))
	assert.Check(t, !g.Passed)
	assert.Check(t, is.Contains(evidence.Gate(g.Matrix, reports, twoRows(false)), want))

	g = evidence.Judge(reports, nil, twoRows(true))
	assert.Check(t, g.Passed, "%v", g.Violations)
	var shown bool
	for _, v := range g.Violations {
		if v.Message == want {
			shown = true
			assert.Check(t, !v.Blocking)
			assert.DeepEqual(t, v.Columns, []string{"lane-b"})
		}
	}
	assert.Check(t, shown, "%v", g.Violations)

	// A complete report of the same rows passes.
	full := passedReport(t, harnessV2, laneB)
	assert.DeepEqual(t, evidence.Gate(evidence.Merge([]*evidence.Signed{a, full}), []*evidence.Signed{a, full}, twoRows(false)), []string(nil))
}

func TestNewSelection(t *testing.T) {
	entries := []string{"admission", "isolation", "admission", "lifecycle"}
	s := evidence.NewSelection([]string{"admission"}, true, entries)
	assert.DeepEqual(t, s, &evidence.Selection{Only: []string{"admission"}, Skipped: []string{"isolation", "lifecycle"}})
	s = evidence.NewSelection([]string{"admission"}, false, entries)
	assert.DeepEqual(t, s, &evidence.Selection{Skip: []string{"admission"}, Skipped: []string{"admission"}})
	assert.Check(t, s.Selected("isolation") && !s.Selected("admission"))
	// Selecting every entry is a complete run: no selection.
	assert.Check(t, is.Nil(evidence.NewSelection([]string{"lifecycle", "isolation", "admission"}, true, entries)))
	var none *evidence.Selection
	assert.Check(t, none.Selected("anything"))
}
