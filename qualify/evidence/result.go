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

	g := &GateResult{}
	var mcols []MatrixColumn
	var members [][]*Signed
	names := map[string]bool{}
	if req != nil {
		for _, r := range req.Rows {
			names[r.Name] = true
		}
	}
	addColumn := func(c GateColumn, t Tuple) int {
		if c.Kind == KindReport {
			// Violations find their columns by name: a report directory
			// named like a row (or given twice) must not share its column.
			base := c.Name
			for n := 2; names[c.Name]; n++ {
				c.Name = fmt.Sprintf("%s (report %d)", base, n)
			}
		}
		names[c.Name] = true
		g.Columns = append(g.Columns, c)
		mcols = append(mcols, MatrixColumn{Key: c.Name, Tuple: t, Reports: []string{}, RunVerdicts: []Verdict{}})
		members = append(members, nil)
		return len(g.Columns) - 1
	}
	if req != nil {
		for _, r := range req.Rows {
			addColumn(GateColumn{Name: r.Name, Kind: KindRow, Informational: r.Informational}, Tuple{})
		}
		for _, rep := range reports {
			matched := false
			for j, r := range req.Rows {
				if r.Matches(rep.Predicate.Tuple) {
					members[j] = append(members[j], rep)
					matched = true
				}
			}
			if !matched {
				j := addColumn(GateColumn{Name: rep.Dir, Kind: KindReport}, rep.Predicate.Tuple)
				members[j] = append(members[j], rep)
			}
		}
		for _, ref := range refused {
			placed := false
			for j, r := range req.Rows {
				if ref.Claimed != nil && r.Matches(*ref.Claimed) {
					g.Columns[j].Refused = append(g.Columns[j].Refused, ref)
					placed = true
				}
			}
			if !placed {
				j := addColumn(GateColumn{Name: ref.Dir, Kind: KindReport}, Tuple{})
				g.Columns[j].Refused = append(g.Columns[j].Refused, ref)
			}
		}
	} else {
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
			j := addColumn(GateColumn{Name: names[i], Kind: KindTuple}, gr.tuple)
			members[j] = gr.reports
		}
		for _, ref := range refused {
			j := addColumn(GateColumn{Name: ref.Dir, Kind: KindReport}, Tuple{})
			g.Columns[j].Refused = append(g.Columns[j].Refused, ref)
		}
	}
	g.Matrix = mergeColumns(mcols, members)
	for j := range g.Columns {
		for _, rep := range members[j] {
			g.Columns[j].Reports = append(g.Columns[j].Reports, GateReport{Dir: rep.Dir, Tuple: rep.Predicate.Tuple, RunVerdict: rep.Predicate.Verdict,
				Posture: ReadPosture(rep.Run)})
		}
	}

	index := map[string]int{}
	for j, c := range g.Columns {
		index[c.Name] = j
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
			if j, ok := index[c]; ok {
				g.Columns[j].Violations = append(g.Columns[j].Violations, v.Message)
			}
		}
	}
	for j := range g.Columns {
		c := &g.Columns[j]
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
	return g
}
