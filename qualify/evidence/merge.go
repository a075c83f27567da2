package evidence

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
)

// Matrix is several verified reports rendered as scenarios by column, for
// release gating: by tuple (Merge; reports with identical tuples share a
// column) or by the gate's columns (Judge: rows, then reports' own).
type Matrix struct {
	// Columns are the distinct tuples in the order first seen (Merge), or
	// GateResult.Columns in order (Judge).
	Columns []MatrixColumn `json:"columns"`
	// Scenarios are the scenario names, in the order first seen.
	Scenarios []string `json:"scenarios"`
	// Cells[i][j] is scenario i under column j.
	Cells [][]Cell `json:"cells"`
}

// MatrixColumn is one tuple and the reports behind it.
type MatrixColumn struct {
	Key     string   `json:"key"`
	Tuple   Tuple    `json:"tuple"`
	Reports []string `json:"reports"`
	// RunVerdicts are the signed run-level verdicts of Reports, in order: a
	// run can fail (interrupted, leaked image) with every listed scenario
	// passed.
	RunVerdicts []Verdict `json:"runVerdicts"`
}

// Cell combines one scenario's verdicts from the reports of one column:
// failed when any failed, else flaky when any was flaky, else passed when any passed, else the first
// skipped/not_applicable verdict; Kind is empty when no report ran it.
type Cell struct {
	Kind   Kind   `json:"kind,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Passed and Runs count the reports that passed it and that list it.
	Passed int `json:"passed"`
	Runs   int `json:"runs"`
}

func (c Cell) String() string {
	switch {
	case c.Runs == 0:
		return "-"
	case c.Runs > 1:
		return fmt.Sprintf("%s %d/%d", c.Kind, c.Passed, c.Runs)
	case c.Reason != "":
		return fmt.Sprintf("%s (%s)", c.Kind, c.Reason)
	}
	return string(c.Kind)
}

// Merge builds the matrix of reports (already verified): one column per
// distinct tuple in the order first seen, named by TupleColumnNames
// (Judge orders and names columns for the gate).
func Merge(reports []*Signed) *Matrix {
	var cols []MatrixColumn
	var members [][]*Signed
	col := map[string]int{}
	for _, rep := range reports {
		k, _ := json.Marshal(rep.Predicate.Tuple)
		j, ok := col[string(k)]
		if !ok {
			j = len(cols)
			col[string(k)] = j
			cols = append(cols, MatrixColumn{Tuple: rep.Predicate.Tuple})
			members = append(members, nil)
		}
		members[j] = append(members[j], rep)
	}
	tuples := make([]Tuple, len(cols))
	dirs := make([]string, len(cols))
	for j := range cols {
		tuples[j], dirs[j] = cols[j].Tuple, members[j][0].Dir
	}
	for j, name := range TupleColumnNames(tuples, dirs) {
		cols[j].Key = name
	}
	return mergeColumns(cols, members)
}

// TupleColumnNames names the tuple columns of a merge without a
// requirement, whose reports record no row: tuples[j] is column j's tuple
// and dirs[j] the directory of its first report. Column j is named by its
// tuple's profile ("linux-x64") when no other column has that profile,
// else by profile and Engine version ("linux-x64@29.1.4", the --row
// syntax) when no other column has both, else by its directory less the
// parent directories all columns named so share
// ("20261129T103352Z" for "reports/linux-x64-cgroupv1/20261129T103352Z/"
// beside another report of that directory; the legend names the whole
// directory). A name already taken gets " (2)", " (3)", ... so that names
// are distinct.
func TupleColumnNames(tuples []Tuple, dirs []string) []string {
	profiles := map[string]int{}
	engines := map[string]int{}
	withEngine := func(t Tuple) string { return t.Profile + "@" + t.EngineVersion }
	for _, t := range tuples {
		profiles[t.Profile]++
		engines[withEngine(t)]++
	}
	names := make([]string, len(tuples))
	var byDir []int
	for j, t := range tuples {
		switch {
		case t.Profile != "" && profiles[t.Profile] == 1:
			names[j] = t.Profile
		case t.Profile != "" && t.EngineVersion != "" && engines[withEngine(t)] == 1:
			names[j] = withEngine(t)
		default:
			byDir = append(byDir, j)
		}
	}
	var parts [][]string
	for _, j := range byDir {
		parts = append(parts, strings.Split(strings.TrimSuffix(dirs[j], "/"), "/"))
	}
	// The parent directories every directory-named column shares, so many
	// that each keeps at least its last element.
	common := 0
	if len(parts) > 1 {
	prefix:
		for ; ; common++ {
			for _, p := range parts {
				if common >= len(p)-1 || p[common] != parts[0][common] {
					break prefix
				}
			}
		}
	}
	for k, j := range byDir {
		names[j] = strings.Join(parts[k][common:], "/")
	}
	taken := map[string]bool{}
	for j, n := range names {
		for i := 2; taken[names[j]]; i++ {
			names[j] = fmt.Sprintf("%s (%d)", n, i)
		}
		taken[names[j]] = true
	}
	return names
}

// mergeColumns fills cols (keys and tuples set) with the reports
// members[j] of each column j; a report may be in several columns.
func mergeColumns(cols []MatrixColumn, members [][]*Signed) *Matrix {
	m := &Matrix{Columns: cols}
	row := map[string]int{}
	type key struct{ r, c int }
	verdicts := map[key][]Verdict{}
	for j := range cols {
		for _, rep := range members[j] {
			m.Columns[j].Reports = append(m.Columns[j].Reports, rep.Dir)
			m.Columns[j].RunVerdicts = append(m.Columns[j].RunVerdicts, rep.Predicate.Verdict)
			// A manifest may list a scenario twice (with other params): the
			// report contributes one verdict per scenario, its lines combined,
			// so a cell's runs count reports and one report's two lines cannot
			// hide another report's missing one.
			var names []string
			lines := map[string][]Verdict{}
			for _, s := range scenarioLines(rep) {
				if _, ok := lines[s.Name]; !ok {
					names = append(names, s.Name)
				}
				lines[s.Name] = append(lines[s.Name], s.Verdict)
			}
			for _, name := range names {
				i, ok := row[name]
				if !ok {
					i = len(m.Scenarios)
					row[name] = i
					m.Scenarios = append(m.Scenarios, name)
				}
				c := combine(lines[name])
				if c.Kind == Passed && c.Passed != c.Runs {
					// Passed entries beside a skipped or not-applicable one:
					// the scenario did not pass in this report as a whole.
					v := lines[name][slices.IndexFunc(lines[name], func(v Verdict) bool { return v.Kind != Passed })]
					c.Kind, c.Reason = v.Kind, v.Reason
				}
				verdicts[key{i, j}] = append(verdicts[key{i, j}], Verdict{Kind: c.Kind, Reason: c.Reason})
			}
		}
	}
	m.Cells = make([][]Cell, len(m.Scenarios))
	for i := range m.Scenarios {
		m.Cells[i] = make([]Cell, len(m.Columns))
		for j := range m.Columns {
			m.Cells[i][j] = combine(verdicts[key{i, j}])
		}
	}
	return m
}

// scenarioLines are the scenario verdicts a report contributes: its signed
// predicate's lines, except that a repeated campaign contributes each
// manifest entry once, with the verdict its runs combine to (flaky when
// some failed), from the signed evidence.json's Campaign.
func scenarioLines(rep *Signed) []PredicateLine {
	if rep.Run == nil || rep.Run.Campaign == nil || len(rep.Run.Campaign.Scenarios) == 0 {
		return rep.Predicate.Scenarios
	}
	var out []PredicateLine
	for _, t := range rep.Run.Campaign.Scenarios {
		out = append(out, PredicateLine{Name: t.Name, Verdict: t.Verdict})
	}
	return out
}

func combine(vs []Verdict) Cell {
	c := Cell{Runs: len(vs)}
	for _, v := range vs {
		if v.Kind == Passed {
			c.Passed++
		}
	}
	// Flaky (a repeated campaign's scenario that failed some runs) ranks
	// with failed: it never counts as passed, so Gate refuses it.
	for _, want := range []Kind{Failed, Flaky, Passed} {
		if i := slices.IndexFunc(vs, func(v Verdict) bool { return v.Kind == want }); i >= 0 {
			c.Kind, c.Reason = want, vs[i].Reason
			return c
		}
	}
	if len(vs) > 0 {
		c.Kind, c.Reason = vs[0].Kind, vs[0].Reason
	}
	return c
}

func (m *Matrix) render(w io.Writer, opts ...tablewriter.Option) error {
	opts = append(opts,
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAlignment(tw.AlignLeft),
	)
	t := tablewriter.NewTable(w, opts...)
	header := []string{"Scenario"}
	for _, c := range m.Columns {
		header = append(header, c.Key)
	}
	t.Header(header)
	for i, name := range m.Scenarios {
		row := []string{name}
		for _, c := range m.Cells[i] {
			row = append(row, c.String())
		}
		if err := t.Append(row); err != nil {
			return err
		}
	}
	return t.Render()
}

// MatrixTable renders the column legend (one tuple per line) and the
// matrix as a plain-text table.
func MatrixTable(w io.Writer, m *Matrix) error {
	var buf bytes.Buffer
	for _, c := range m.Columns {
		fmt.Fprintf(&buf, "%s: %s (%d report(s))\n", c.Key, c.Tuple.Label(), len(c.Reports))
	}
	if err := m.render(&buf); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// MatrixMarkdown renders the matrix as Markdown: a legend listing every
// column's full tuple and reports, then the table.
func MatrixMarkdown(m *Matrix) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString("# qualbox qualification matrix\n\n")
	for _, c := range m.Columns {
		fmt.Fprintf(&buf, "- **%s**: %s\n", c.Key, strings.Join(c.Tuple.Lines(), "; "))
		for _, r := range c.Reports {
			fmt.Fprintf(&buf, "  - report `%s`\n", r)
		}
	}
	buf.WriteString("\n")
	if err := m.render(&buf, tablewriter.WithRenderer(renderer.NewMarkdown())); err != nil {
		return nil, err
	}
	return []byte(strings.TrimRight(buf.String(), "\n") + "\n"), nil
}
