package evidence_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/platforms"
	"github.com/qualbox/qualbox/qualify/evidence"
	"github.com/qualbox/qualbox/qualify/scenario"
)

// twoRows is lane-a (Engine 20.10.) and lane-b (Engine 2.0.), in that
// order, lane-b informational when informational.
func twoRows(informational bool) *evidence.Requirement {
	return &evidence.Requirement{
		Rows: []evidence.Row{
			{Name: "lane-a", Profile: "linux-x64-cgroupv1", Engine: "20.10.", Manifests: []string{"ab"}, Scenarios: []string{"admission", "isolation"}},
			{Name: "lane-b", Profile: "linux-x64-cgroupv1", Engine: "2.0.", Manifests: []string{"bb"}, Scenarios: []string{"admission", "isolation"}, Informational: informational},
		},
		Harness: harnessPin,
	}
}

func states(g *evidence.GateResult) map[string]evidence.ColumnState {
	out := map[string]evidence.ColumnState{}
	for _, c := range g.Columns {
		out[c.Name] = c.State
	}
	return out
}

func markdown(t *testing.T, g *evidence.GateResult) string {
	t.Helper()
	md, err := evidence.GateMarkdown(g)
	assert.NilError(t, err)
	return string(md)
}

// A missing informational row is pending and passes; a missing required
// row fails, naming the row.
func TestJudgePendingAndMissingRows(t *testing.T) {
	a := passedReport(t, harnessV2, nil)

	g := evidence.Judge([]*evidence.Signed{a}, nil, twoRows(true))
	assert.Check(t, g.Passed)
	assert.DeepEqual(t, states(g), map[string]evidence.ColumnState{"lane-a": evidence.StatePassed, "lane-b": evidence.StatePending})
	assert.Equal(t, g.Line(), "GATE: PASSED (1 passed, 0 failed, 1 pending, 0 refused rows)")
	md := markdown(t, g)
	assert.Check(t, strings.HasPrefix(md, "GATE: PASSED (1 passed, 0 failed, 1 pending, 0 refused rows)\n"))
	assert.Check(t, is.Contains(md, "- **lane-b** (informational row): pending, no report"))

	g = evidence.Judge([]*evidence.Signed{a}, nil, twoRows(false))
	assert.Check(t, !g.Passed)
	assert.Equal(t, g.Line(), "GATE: FAILED (1 passed, 1 failed, 0 pending, 0 refused rows)")
	assert.DeepEqual(t, g.Columns[1].Violations, []string{"row lane-b (profile linux-x64-cgroupv1, engine 2.0.): no report with a pinned manifest"})
	md = markdown(t, g)
	assert.Check(t, is.Contains(md, "| row state | passed | failed [1] |"), md)
	assert.Check(t, is.Contains(md, "- [1] lane-b failed:\n  - row lane-b (profile linux-x64-cgroupv1, engine 2.0.): no report with a pinned manifest\n"), md)
}

// A key holder of an informational row forges a failing report of it:
// the row shows failed, the violation is listed as not blocking, and the
// gate still passes. The same report of a required row fails the gate.
func TestJudgeInformationalRowFailureDoesNotGate(t *testing.T) {
	a := passedReport(t, harnessV2, nil)
	failing := passedReport(t, harnessV2, func(r *evidence.Run) {
		laneB(r)
		r.Scenarios[1].Verdict, r.Scenarios[1].Passed = evidence.Verdict{Kind: evidence.Failed}, 1
		r.Verdict = evidence.Verdict{Kind: evidence.Failed}
	})
	reports := []*evidence.Signed{a, failing}
	g := evidence.Judge(reports, nil, twoRows(true))
	assert.Check(t, g.Passed, "%v", g.Violations)
	assert.Equal(t, g.Line(), "GATE: PASSED (1 passed, 1 failed, 0 pending, 0 refused rows)")
	assert.Equal(t, states(g)["lane-b"], evidence.StateFailed)
	assert.Check(t, len(g.Violations) > 0)
	for _, v := range g.Violations {
		assert.Check(t, !v.Blocking, "%v", v)
		assert.DeepEqual(t, v.Columns, []string{"lane-b"})
	}
	assert.Check(t, is.Contains(g.Violations[0].Message, "lane-b: report "+failing.Dir+": run verdict failed"))
	assert.DeepEqual(t, evidence.Gate(g.Matrix, reports, twoRows(true)), []string(nil))

	g = evidence.Judge(reports, nil, twoRows(false))
	assert.Check(t, !g.Passed)
	assert.Check(t, is.Contains(evidence.Gate(g.Matrix, reports, twoRows(false)), "lane-b: isolation: failed"))
}

// Columns are the policy's rows in the policy's order, named by row,
// whatever the order of the reports; without a requirement, the tuples
// ordered by label.
func TestJudgePolicyOrderBeatsArgumentOrder(t *testing.T) {
	a, b := passedReport(t, harnessV2, nil), passedReport(t, harnessV2, laneB)
	ab := evidence.Judge([]*evidence.Signed{a, b}, nil, twoRows(false))
	ba := evidence.Judge([]*evidence.Signed{b, a}, nil, twoRows(false))
	assert.Equal(t, markdown(t, ab), markdown(t, ba))
	assert.Equal(t, ab.Columns[0].Name, "lane-a")
	assert.Equal(t, ab.Columns[0].Reports[0].Dir, a.Dir)
	assert.Check(t, is.Contains(markdown(t, ab), "| Scenario  | lane-a | lane-b |"), markdown(t, ab))

	reversed := twoRows(false)
	reversed.Rows[0], reversed.Rows[1] = reversed.Rows[1], reversed.Rows[0]
	g := evidence.Judge([]*evidence.Signed{a, b}, nil, reversed)
	assert.Check(t, is.Contains(markdown(t, g), "| Scenario  | lane-b | lane-a |"), markdown(t, g))

	// Without a requirement: the tuple whose label sorts first (engine
	// 2.0.0-beta.24 before 20.10.24) comes first, in either argument
	// order, each named by profile and Engine version (they share the
	// profile).
	for _, reports := range [][]*evidence.Signed{{a, b}, {b, a}} {
		g := evidence.Judge(reports, nil, nil)
		assert.DeepEqual(t, columnNames(g), []string{"linux-x64-cgroupv1@2.0.0-beta.24", "linux-x64-cgroupv1@20.10.24"})
		assert.Equal(t, g.Columns[0].Reports[0].Dir, b.Dir)
		assert.Equal(t, g.Columns[1].Reports[0].Dir, a.Dir)
	}
}

// Without a requirement the reports record no row: a tuple column is
// named by its profile when that is unique, else by profile and Engine
// version, else by its report's directory; never by its position.
func TestJudgeTupleColumnsNamedByTheirReports(t *testing.T) {
	a, b := passedReport(t, harnessV2, nil), passedReport(t, harnessV2, laneB)
	c := passedReport(t, harnessV2, asLinuxX64)
	otherKernel := passedReport(t, harnessV2, func(r *evidence.Run) { laneB(r); r.Engine.KernelVersion = "6.12.0" })
	g := evidence.Judge([]*evidence.Signed{c, otherKernel, b, a}, nil, nil)
	byDir := map[string]string{}
	for _, col := range g.Columns {
		assert.Equal(t, col.Kind, evidence.KindTuple)
		assert.Equal(t, len(col.Reports), 1)
		byDir[col.Reports[0].Dir] = col.Name
	}
	// The two directory-named columns lose the parents they share.
	assert.Equal(t, filepath.Dir(b.Dir), filepath.Dir(otherKernel.Dir), "fixture: the reports' directories")
	assert.DeepEqual(t, byDir, map[string]string{
		a.Dir:           "linux-x64-cgroupv1@20.10.24",
		b.Dir:           filepath.Base(b.Dir),
		otherKernel.Dir: filepath.Base(otherKernel.Dir),
		c.Dir:           "linux-x64",
	})
	md := markdown(t, g)
	assert.Check(t, is.Contains(md, "| linux-x64 "), md)
	assert.Check(t, !regexp.MustCompile(`\| T\d+ +\|`).MatchString(md), md)

	// The name of a column does not depend on the others' positions:
	// dropping a report renames only the columns it disambiguated.
	g = evidence.Judge([]*evidence.Signed{a, c, b}, nil, nil)
	assert.DeepEqual(t, columnNames(g), []string{"linux-x64", "linux-x64-cgroupv1@2.0.0-beta.24", "linux-x64-cgroupv1@20.10.24"})
}

// Names taken twice (two directories that differ only by a trailing
// slash) are told apart; a lone directory-named column keeps its path.
func TestTupleColumnNamesDistinct(t *testing.T) {
	x := evidence.Tuple{Profile: "linux-x64", EngineVersion: "29.1.4"}
	y := x
	y.Kernel = "6.12"
	assert.DeepEqual(t, evidence.TupleColumnNames([]evidence.Tuple{x, y}, []string{"r/a/", "r/a"}), []string{"a", "a (2)"})
	assert.DeepEqual(t, evidence.TupleColumnNames([]evidence.Tuple{x, y}, []string{"r/l1/t1/", "r/l2/t1/"}), []string{"l1/t1", "l2/t1"})
	assert.DeepEqual(t, evidence.TupleColumnNames([]evidence.Tuple{{}}, []string{"reports/x/"}), []string{"reports/x"})
}

func columnNames(g *evidence.GateResult) []string {
	var out []string
	for _, c := range g.Columns {
		out = append(out, c.Name)
	}
	return out
}

// A key holder forges a report of lane-b: it tampers with a signed file
// after signing. The report does not verify; the gate does not abort but
// marks lane-b refused (from the tuple its unverified evidence.json
// claims), lists the verify problem and fails, even with lane-b
// informational. A report whose evidence.json is unreadable gets a column
// of its own, named by its directory.
func TestJudgeRefusedReportMarksItsColumn(t *testing.T) {
	a := passedReport(t, harnessV2, nil)
	dir, keys := signedReport(t, laneB)
	edit(t, filepath.Join(dir, "summary.md"), "# qualbox", "# forged qualbox")
	_, err := evidence.VerifyRun(context.Background(), dir, pub(t, keys))
	assert.Assert(t, err != nil)
	ref := evidence.RefusalOf(dir, err)
	assert.Check(t, is.Contains(strings.Join(ref.Problems, "\n"), "summary.md: "))

	for _, informational := range []bool{false, true} {
		g := evidence.Judge([]*evidence.Signed{a}, []evidence.Refusal{ref}, twoRows(informational))
		assert.Check(t, !g.Passed)
		assert.Equal(t, g.Line(), "GATE: FAILED (1 passed, 0 failed, 0 pending, 1 refused rows)")
		assert.Equal(t, states(g)["lane-b"], evidence.StateRefused)
		assert.Check(t, g.Violations[0].Blocking)
		assert.Check(t, is.Contains(g.Violations[0].Message, "refused: "+dir))
		md := markdown(t, g)
		assert.Check(t, is.Contains(md, "| row state | passed | refused [1] |"), md)
		assert.Check(t, is.Contains(md, "- [1] lane-b refused:\n"), md)
		assert.Check(t, is.Contains(md, "  - "+dir+": summary.md: "), md)
	}

	lost := t.TempDir()
	assert.NilError(t, os.WriteFile(filepath.Join(lost, "evidence.json"), []byte("{"), 0o644))
	_, err = evidence.VerifyRun(context.Background(), lost, pub(t, keys))
	assert.Assert(t, err != nil)
	g := evidence.Judge([]*evidence.Signed{a}, []evidence.Refusal{evidence.RefusalOf(lost, err)}, twoRows(true))
	assert.Check(t, !g.Passed)
	assert.DeepEqual(t, states(g), map[string]evidence.ColumnState{"lane-a": evidence.StatePassed, "lane-b": evidence.StatePending, lost: evidence.StateRefused})
	assert.Equal(t, g.Columns[2].Kind, evidence.KindReport)
}

// Reasons become footnotes numbered in reading order, one number per
// distinct reason; the terminal table in ASCII mode is plain ASCII even
// when a key holder signs a reason with non-ASCII text and terminal
// escapes, and those are escaped in UTF-8 mode too.
func TestJudgeFootnotesAndASCII(t *testing.T) {
	const reason = "no \x1b[2Jimage mounts · here"
	na := func(r *evidence.Run) {
		r.Scenarios[1] = evidence.ScenarioSummary{Index: 2, Name: "isolation", Dir: "02-isolation", Verdict: evidence.Verdict{Kind: evidence.NotApplicable, Reason: reason}}
	}
	a := passedReport(t, harnessV2, na)
	b := passedReport(t, harnessV2, func(r *evidence.Run) { laneB(r); na(r) })
	g := evidence.Judge([]*evidence.Signed{a, b}, nil, twoRows(false))
	md := markdown(t, g)
	assert.Check(t, is.Contains(md, "| row state | failed [1]         | failed [2]         |"), md)
	assert.Check(t, is.Contains(md, "| isolation | not_applicable [3] | not_applicable [3] |"), md)
	assert.Check(t, is.Contains(md, "- [3] no \\u001b[2Jimage mounts \\u00b7 here\n"), md)
	assert.Check(t, is.Contains(md, "- [1] lane-a failed:\n  - report "+a.Dir+": row lane-a (profile linux-x64-cgroupv1, engine 20.10.):"), md)

	var ascii, utf bytes.Buffer
	assert.NilError(t, evidence.GateTable(&ascii, g, true))
	assert.NilError(t, evidence.GateTable(&utf, g, false))
	for i, c := range ascii.Bytes() {
		assert.Assert(t, c < 0x80, "byte %d of the ASCII table is %#x:\n%s", i, c, ascii.String())
	}
	assert.Check(t, is.Contains(ascii.String(), "+-----------+"), ascii.String())
	assert.Check(t, is.Contains(ascii.String(), "[3] no \\u001b[2Jimage mounts \\u00b7 here\n"), ascii.String())
	assert.Check(t, is.Contains(ascii.String(), "linux-x64-cgroupv1, engine 20.10.24/API 1.41"), ascii.String())
	assert.Check(t, is.Contains(utf.String(), "[3] no \\u001b[2Jimage mounts · here\n"), utf.String())
	assert.Check(t, is.Contains(utf.String(), "┌"), utf.String())
	assert.Check(t, !strings.Contains(utf.String(), "\x1b"))
}

// --json carries the gate: its first line says the verdict, and it holds
// the counts, every column's state and reports, and every violation.
func TestJudgeJSONCarriesViolations(t *testing.T) {
	a := passedReport(t, harnessV2, nil)
	old := passedReport(t, nil, laneB)
	g := evidence.Judge([]*evidence.Signed{a, old}, nil, twoRows(false))
	data, err := evidence.GateJSON(g)
	assert.NilError(t, err)
	first, _, _ := strings.Cut(string(data), "\n")
	assert.Equal(t, first, `{"gate": "GATE: FAILED (1 passed, 1 failed, 0 pending, 0 refused rows)",`)
	var got struct {
		Gate       string `json:"gate"`
		Verdict    string `json:"verdict"`
		Passed     bool   `json:"passed"`
		Counts     evidence.GateCounts
		Columns    []evidence.GateColumn
		Violations []evidence.GateViolation
		Matrix     evidence.Matrix
	}
	assert.NilError(t, json.Unmarshal(data, &got))
	assert.Equal(t, got.Verdict, "failed")
	assert.Equal(t, got.Counts, evidence.GateCounts{Passed: 1, Failed: 1})
	assert.Equal(t, got.Columns[1].State, evidence.StateFailed)
	assert.Equal(t, got.Columns[1].Reports[0].Dir, old.Dir)
	assert.Equal(t, len(got.Violations), 1)
	assert.Check(t, is.Contains(got.Violations[0].Message, "report "+old.Dir+": no harness identity in its signed statement"))
	assert.DeepEqual(t, got.Violations[0].Columns, []string{"lane-b"})
	assert.Equal(t, got.Matrix.Columns[1].Key, "lane-b")
}

// The committed policies hold informational exactly the rows the
// registry says: in reports/gate-policy.yaml lane D's emulated row; in
// CI's, lane C's tuple rows (run when dispatched) and the hosted and
// Desktop rows, while the self-hosted lanes its every run covers are
// required.
func TestCommittedPoliciesRequiredRows(t *testing.T) {
	for path, informational := range map[string][]string{
		filepath.Join("..", "..", "reports", "gate-policy.yaml"): platforms.RowNames(func(e platforms.Entry) bool { return e.ReleaseGate == platforms.Informational }),
		filepath.Join("..", "..", ".github", "gate-policy.yaml"): platforms.RowNames(func(e platforms.Entry) bool { return e.CIGate == platforms.Informational }),
	} {
		assert.Assert(t, len(informational) > 0, path)
		p, err := evidence.LoadPolicy(path, scenario.Default())
		assert.NilError(t, err)
		var got []string
		for _, r := range p.Requirement.Rows {
			if r.Informational {
				got = append(got, r.Name)
			}
		}
		assert.DeepEqual(t, got, informational)
	}
}

// A report directory named like an informational row, holding a report of
// no row, gets a column of its own: its violation is not mistaken for the
// informational row's, so it still fails the gate.
func TestJudgeReportColumnNamedLikeARow(t *testing.T) {
	a := passedReport(t, harnessV2, nil)
	stray := passedReport(t, harnessV2, asLinuxX64)
	stray.Dir = "lane-b"
	g := evidence.Judge([]*evidence.Signed{a, stray}, nil, twoRows(true))
	assert.Check(t, !g.Passed, "%+v", g.Violations)
	assert.DeepEqual(t, states(g), map[string]evidence.ColumnState{"lane-a": evidence.StatePassed, "lane-b": evidence.StatePending,
		"lane-b (report 2)": evidence.StateFailed})
	assert.Check(t, is.Contains(g.Columns[2].Violations[0], "report lane-b (linux-x64 · engine 2.0.0-beta.24"))
	assert.Check(t, is.Contains(g.Columns[2].Violations[0], "matches no required row"))
}

// A policy with more rows than one table fits in TableWidth columns (a
// dozen long row names, all pending or failed): the terminal table is
// split into panels of consecutive columns, each led by the scenario
// column and the row states, in the policy's order; no line of either
// rendering is wider than TableWidth, and every row is shown once.
func TestGateTablePanelsFitTableWidth(t *testing.T) {
	a := passedReport(t, harnessV2, nil)
	req := twoRows(false)
	var want []string
	for _, r := range req.Rows {
		want = append(want, r.Name)
	}
	for i := range 12 {
		name := fmt.Sprintf("desktop-native-arm64-macos-%02d", i)
		req.Rows = append(req.Rows, evidence.Row{Name: name, Profile: "desktop-apple-virtualization-native-arm64",
			Manifests: []string{"cc"}, Scenarios: []string{"admission"}, Informational: i%2 == 0})
		want = append(want, name)
	}
	g := evidence.Judge([]*evidence.Signed{a}, nil, req)
	for _, ascii := range []bool{true, false} {
		var buf bytes.Buffer
		assert.NilError(t, evidence.GateTable(&buf, g, ascii))
		out := buf.String()
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		var headers []string
		var tops []string // each panel's top border
		panels, stateRows, admissionRows := 0, 0, 0
		for i, l := range lines {
			assert.Check(t, twidth(l) <= evidence.TableWidth, "ascii %v: line %d is %d columns wide: %q", ascii, i+1, twidth(l), l)
			f := cells(l)
			switch {
			case len(f) == 0:
			case f[0] == "Scenario":
				tops = append(tops, lines[i-1])
				panels++
				headers = append(headers, f[1:]...)
			case f[0] == "row state":
				stateRows++
			case f[0] == "admission":
				admissionRows++
			}
		}
		assert.Check(t, panels > 1, "ascii %v: one table of %d columns:\n%s", ascii, len(g.Columns), out)
		assert.DeepEqual(t, headers, want)
		assert.Check(t, is.Equal(stateRows, panels), out)
		assert.Check(t, is.Equal(admissionRows, panels), out)
		// Panels are as wide as they can be: the next panel's first
		// column would not have fitted in the one before.
		for k := 0; k+1 < len(tops); k++ {
			next := strings.FieldsFunc(tops[k+1], func(r rune) bool { return r != '-' && r != '─' })
			assert.Check(t, twidth(tops[k])+len([]rune(next[1]))+1 > evidence.TableWidth, "panel %d has room for the next column:\n%s", k+1, out)
		}
	}
}

// twidth is the display width of a line of the table (ASCII and box
// drawing, one column a rune).
func twidth(l string) int { return len([]rune(l)) }

// cells are the trimmed cells of a table line, nil for a border line.
func cells(l string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(l, func(r rune) bool { return r == '|' || r == '│' }) {
		if s := strings.TrimSpace(f); s != "" {
			out = append(out, s)
		}
	}
	if len(out) == 0 || strings.Trim(l, "+-┌┐└┘├┤┬┴┼─│| ") == "" {
		return nil
	}
	return out
}
