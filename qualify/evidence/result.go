package evidence

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/qualbox/qualbox/qualify/attest"
)

// ColumnState is the gate's word for one matrix column
// (docs/qualification.md#gate).
type ColumnState string

const (
	// StatePassed: the column has reports and no violation.
	StatePassed ColumnState = "passed"
	// StateFailed: a violation concerns the column (for a required row
	// that has no report, the missing report).
	StateFailed ColumnState = "failed"
	// StatePending: an informational row with no report.
	StatePending ColumnState = "pending"
	// StateRefused: a report of the column did not verify or was not
	// admitted by the policy's trust.
	StateRefused ColumnState = "refused"
)

// Column kinds (GateColumn.Kind).
const (
	// KindRow is a row of the requirement, named by the row.
	KindRow = "row"
	// KindTuple is a tuple column of a merge without a requirement,
	// in the order of the tuples' labels and named by TupleColumnNames.
	KindTuple = "tuple"
	// KindReport is the column of one report, named by its directory: a
	// refused report whose claimed tuple matches no row (or any refused
	// report without a requirement), or a verified report that matches no
	// row of the requirement.
	KindReport = "report"
)

// Refusal is a report directory that did not verify (signature,
// subjects, schemas, cross-checks) or that the policy's trust did not
// admit. The gate shows it and fails; it does not abort the merge.
type Refusal struct {
	Dir string `json:"dir"`
	// Problems are the verify problems ("file: problem") or trust
	// problems, one per line of the refusal's footnote.
	Problems []string `json:"problems"`
	// Claimed is the tuple the report's evidence.json claims, read without
	// trusting it and only to place the refusal in its row's column; nil
	// when unreadable.
	Claimed *Tuple `json:"claimedTuple,omitempty"`
	err     error
}

// RefusalOf describes dir's verification error err (from VerifyRun or
// VerifyTrusted) as a Refusal: an *attest.VerifyError's problems, a
// *TrustError's, else the error's text.
func RefusalOf(dir string, err error) Refusal {
	r := Refusal{Dir: dir, err: err}
	var ve *attest.VerifyError
	var te *TrustError
	switch {
	case errors.As(err, &ve):
		for _, p := range ve.Problems {
			r.Problems = append(r.Problems, p.File+": "+p.Problem)
		}
	case errors.As(err, &te):
		r.Problems = append(r.Problems, te.Problems...)
	default:
		r.Problems = []string{err.Error()}
	}
	// Unverified: a forger may claim any tuple here, which only decides
	// the column that shows the refusal; a refusal fails the gate anyway.
	if data, err := readRegular(filepath.Join(dir, "evidence.json"), attest.MaxFileBytes); err == nil {
		var run Run
		if attest.StrictJSONFile(data, "evidence.json", &run) == nil {
			t := TupleOf(&run)
			r.Claimed = &t
		}
	}
	return r
}

func (r Refusal) message() string {
	if r.err != nil && strings.HasPrefix(r.err.Error(), r.Dir) {
		return "refused: " + r.err.Error()
	}
	return fmt.Sprintf("refused: %s: %s", r.Dir, strings.Join(r.Problems, "; "))
}

// GateReport is one verified report of a gate column.
type GateReport struct {
	Dir        string  `json:"dir"`
	Tuple      Tuple   `json:"tuple"`
	RunVerdict Verdict `json:"runVerdict"`
	// Posture is the report's posture as this build reads it
	// (ReadPosture), not the report's record alone; nil for a run
	// without an Engine.
	Posture *PostureReading `json:"posture,omitempty"`
}

// GateColumn is one column of the gate: a row of the requirement, a
// tuple (without a requirement), or one report's own column.
type GateColumn struct {
	Name string `json:"name"`
	// Kind is KindRow, KindTuple or KindReport.
	Kind string `json:"kind"`
	// Informational is true only for an informational row.
	Informational bool         `json:"informational"`
	State         ColumnState  `json:"state"`
	Reports       []GateReport `json:"reports"`
	Refused       []Refusal    `json:"refused"`
	// Violations are the messages of every violation that concerns the
	// column.
	Violations []string `json:"violations"`
}

// GateCounts counts the columns by state.
type GateCounts struct {
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Pending int `json:"pending"`
	Refused int `json:"refused"`
}

// GateResult is the whole gate over some reports: whether it passed, the
// columns in order with their states, every violation, and the matrix
// whose columns are Columns, in the same order.
type GateResult struct {
	Passed     bool            `json:"passed"`
	Counts     GateCounts      `json:"counts"`
	Columns    []GateColumn    `json:"columns"`
	Violations []GateViolation `json:"violations"`
	Matrix     *Matrix         `json:"matrix"`
}

// Line is the verdict line every rendering starts with, e.g.
// "GATE: FAILED (2 passed, 1 failed, 2 pending, 0 refused rows)"; the
// counts are of columns (rows, and any report's own column).
func (g *GateResult) Line() string {
	v := "PASSED"
	if !g.Passed {
		v = "FAILED"
	}
	c := g.Counts
	return fmt.Sprintf("GATE: %s (%d passed, %d failed, %d pending, %d refused rows)", v, c.Passed, c.Failed, c.Pending, c.Refused)
}

// Judge is the release gate over verified reports and refused ones
// (docs/qualification.md#gate). With a requirement the columns are its
// rows in its order, each holding the reports whose tuple matches it
// (a report may be in several), then one column per verified report that
// matches no row, named by its directory; a refused report goes to the
// rows its claimed tuple matches, else to a column of its own. Without a
// requirement the columns are the distinct tuples ordered by label, named
// by TupleColumnNames, then one column per refused report. Reports and refusals are
// taken in directory order, so argument order changes nothing.
//
// The gate passes when there is no refusal and no violation (Gate) other
// than ones that concern informational rows only. A column is refused
// when it holds a refusal, else failed when a violation concerns it, else
// pending when it has no report (an informational row), else passed.
func Judge(reports []*Signed, refused []Refusal, req *Requirement) *GateResult {
	reports = slices.Clone(reports)
	slices.SortStableFunc(reports, func(a, b *Signed) int { return strings.Compare(a.Dir, b.Dir) })
	refused = slices.Clone(refused)
	slices.SortStableFunc(refused, func(a, b Refusal) int { return strings.Compare(a.Dir, b.Dir) })
	// The steps: the columns (the requirement's rows, or the tuples), the
	// matrix and each column's reports, the violations, the states.
	j := &judging{g: &GateResult{}, names: map[string]bool{}}
	if req != nil {
		j.rowColumns(reports, refused, req)
	} else {
		j.tupleColumns(reports, refused)
	}
	j.fillReports()
	j.judgeViolations(reports, refused, req)
	j.settle()
	return j.g
}

// judging is the state of one Judge as its steps fill it.
type judging struct {
	g *GateResult
	// mcols and members are the matrix columns and their reports, by
	// column index; names holds every column name taken (and the rows').
	mcols   []MatrixColumn
	members [][]*Signed
	names   map[string]bool
}

// addColumn appends column c of tuple t and returns its index. A report
// column named like a row or an earlier column gets " (report N)":
// violations find their columns by name, so a report directory named like
// a row (or given twice) must not share its column.
func (j *judging) addColumn(c GateColumn, t Tuple) int {
	if c.Kind == KindReport {
		base := c.Name
		for n := 2; j.names[c.Name]; n++ {
			c.Name = fmt.Sprintf("%s (report %d)", base, n)
		}
	}
	j.names[c.Name] = true
	j.g.Columns = append(j.g.Columns, c)
	j.mcols = append(j.mcols, MatrixColumn{Key: c.Name, Tuple: t, Reports: []string{}, RunVerdicts: []Verdict{}})
	j.members = append(j.members, nil)
	return len(j.g.Columns) - 1
}

// rowColumns makes the requirement's columns: its rows, each report in
// every row its tuple matches (else in a column of its own), and each
// refusal in every row its claimed tuple matches (else its own column).
func (j *judging) rowColumns(reports []*Signed, refused []Refusal, req *Requirement) {
	for _, r := range req.Rows {
		j.names[r.Name] = true
	}
	for _, r := range req.Rows {
		j.addColumn(GateColumn{Name: r.Name, Kind: KindRow, Informational: r.Informational}, Tuple{})
	}
	for _, rep := range reports {
		matched := false
		for k, r := range req.Rows {
			if r.Matches(rep.Predicate.Tuple) {
				j.members[k] = append(j.members[k], rep)
				matched = true
			}
		}
		if !matched {
			k := j.addColumn(GateColumn{Name: rep.Dir, Kind: KindReport}, rep.Predicate.Tuple)
			j.members[k] = append(j.members[k], rep)
		}
	}
	for _, ref := range refused {
		placed := false
		for k, r := range req.Rows {
			if ref.Claimed != nil && r.Matches(*ref.Claimed) {
				j.g.Columns[k].Refused = append(j.g.Columns[k].Refused, ref)
				placed = true
			}
		}
		if !placed {
			k := j.addColumn(GateColumn{Name: ref.Dir, Kind: KindReport}, Tuple{})
			j.g.Columns[k].Refused = append(j.g.Columns[k].Refused, ref)
		}
	}
}

// tupleColumns makes the columns without a requirement: one per distinct
// tuple, ordered by label (then by its JSON), named by TupleColumnNames,
// then one per refusal.
func (j *judging) tupleColumns(reports []*Signed, refused []Refusal) {
	type group struct {
		key, label string
		tuple      Tuple
		reports    []*Signed
	}
	var groups []*group
	byKey := map[string]*group{}
	for _, rep := range reports {
		k, _ := json.Marshal(rep.Predicate.Tuple)
		gr := byKey[string(k)]
		if gr == nil {
			gr = &group{key: string(k), label: rep.Predicate.Tuple.Label(), tuple: rep.Predicate.Tuple}
			byKey[string(k)] = gr
			groups = append(groups, gr)
		}
		gr.reports = append(gr.reports, rep)
	}
	slices.SortFunc(groups, func(a, b *group) int {
		if c := strings.Compare(a.label, b.label); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})
	tuples := make([]Tuple, len(groups))
	dirs := make([]string, len(groups))
	for i, gr := range groups {
		tuples[i], dirs[i] = gr.tuple, gr.reports[0].Dir
	}
	names := TupleColumnNames(tuples, dirs)
	for i, gr := range groups {
		k := j.addColumn(GateColumn{Name: names[i], Kind: KindTuple}, gr.tuple)
		j.members[k] = gr.reports
	}
	for _, ref := range refused {
		k := j.addColumn(GateColumn{Name: ref.Dir, Kind: KindReport}, Tuple{})
		j.g.Columns[k].Refused = append(j.g.Columns[k].Refused, ref)
	}
}

// fillReports merges the matrix and lists each column's reports.
func (j *judging) fillReports() {
	g := j.g
	g.Matrix = mergeColumns(j.mcols, j.members)
	for k := range g.Columns {
		for _, rep := range j.members[k] {
			g.Columns[k].Reports = append(g.Columns[k].Reports, GateReport{Dir: rep.Dir, Tuple: rep.Predicate.Tuple, RunVerdict: rep.Predicate.Verdict,
				Posture: ReadPosture(rep.Run)})
		}
	}
}

// judgeViolations lists the violations, each refusal's first (blocking,
// in the columns that hold it), then the matrix's (violations), gives
// each column the messages of those that concern it, and passes the gate
// when none blocks.
func (j *judging) judgeViolations(reports []*Signed, refused []Refusal, req *Requirement) {
	g := j.g
	index := map[string]int{}
	for k, c := range g.Columns {
		index[c.Name] = k
	}
	for _, ref := range refused {
		var cols []string
		for _, c := range g.Columns {
			if slices.ContainsFunc(c.Refused, func(r Refusal) bool { return r.Dir == ref.Dir }) {
				cols = append(cols, c.Name)
			}
		}
		g.Violations = append(g.Violations, GateViolation{Columns: cols, Blocking: true, Message: ref.message()})
	}
	g.Violations = append(g.Violations, violations(g.Matrix, reports, req)...)
	g.Passed = true
	for _, v := range g.Violations {
		g.Passed = g.Passed && !v.Blocking
		for _, c := range v.Columns {
			if k, ok := index[c]; ok {
				g.Columns[k].Violations = append(g.Columns[k].Violations, v.Message)
			}
		}
	}
}

// settle gives each column its state and counts it, and makes every list
// of the result non-nil (JSON arrays, never null).
func (j *judging) settle() {
	g := j.g
	for k := range g.Columns {
		c := &g.Columns[k]
		switch {
		case len(c.Refused) > 0:
			c.State = StateRefused
			g.Counts.Refused++
		case len(c.Violations) > 0:
			c.State = StateFailed
			g.Counts.Failed++
		case len(c.Reports) == 0:
			c.State = StatePending
			g.Counts.Pending++
		default:
			c.State = StatePassed
			g.Counts.Passed++
		}
		if c.Reports == nil {
			c.Reports = []GateReport{}
		}
		if c.Refused == nil {
			c.Refused = []Refusal{}
		}
		if c.Violations == nil {
			c.Violations = []string{}
		}
	}
	if g.Violations == nil {
		g.Violations = []GateViolation{}
	}
}
