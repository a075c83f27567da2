package evidence

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"slices"
	"strings"
	"time"
)

// HTMLFile is a report's self-contained HTML rendering (RunHTML): the run
// header, the scenario table, every scenario's checks and a plot of each
// observer series against its limit. It is signed like summary.md, and
// verification re-renders it from the verified evidence and compares the
// bytes (docs/qualification.md#evidence).
const HTMLFile = "report.html"

//go:embed html/*.tmpl
var htmlTemplates embed.FS

var htmlTmpl = template.Must(template.New("").Funcs(template.FuncMap{
	"kindClass": kindClass,
}).ParseFS(htmlTemplates, "html/*.tmpl"))

// RunHTML renders HTMLFile for a run: one HTML5 document with its styles
// inline and no script, font, image or link outside it (a browser opens
// it offline). scenarios are the scenario evidence files, matched to
// r.Scenarios by Index; a listed scenario without one shows its summary
// only. The same evidence always renders the same bytes: the inputs are
// normalised through their JSON form first, so the rendering at write
// time and the one at verification agree.
func RunHTML(r *Run, scenarios []*Scenario) ([]byte, error) {
	var posture []string
	if r.Posture != nil {
		posture = r.Posture.Lines()
	}
	v, err := runViewOf(r, scenarios, posture)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := htmlTmpl.ExecuteTemplate(&buf, "run.tmpl", v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// GateHTML renders the gate over reports as one self-contained HTML
// document, like RunHTML: the GATE line, each column's kind and state
// with its reports' tuples and postures, the matrix (columns named by the
// policy's rows, in its order) with its numbered notes, and then each
// admitted report as RunHTML shows it, but for its posture, which is this
// build's reading (ReadPosture) instead of the report's record.
func GateHTML(g *GateResult, reports []*Signed) ([]byte, error) {
	gv := viewOf(g, func(s string) string { return s })
	v := gateHTMLView{Line: g.Line(), Passed: g.Passed, States: gv.states, Header: gv.header(func(s string) string { return s })}
	for j, c := range g.Columns {
		col := gateHTMLColumn{Name: c.Name, Role: role(c), State: gv.states[j], Class: stateClass(c.State)}
		for _, r := range c.Reports {
			text := r.Dir + " (run verdict " + r.RunVerdict.String() + "): " + strings.Join(r.Tuple.Lines(), "; ")
			if r.Posture != nil {
				text += "; " + strings.Join(r.Posture.Brief(), "; ")
			}
			col.Reports = append(col.Reports, text)
		}
		v.Columns = append(v.Columns, col)
	}
	for i, name := range g.Matrix.Scenarios {
		row := gateHTMLRow{Scenario: name}
		for j, c := range g.Matrix.Cells[i] {
			row.Cells = append(row.Cells, htmlCell{Text: gv.cells[i][j], Class: kindClass(c.Kind)})
		}
		v.Rows = append(v.Rows, row)
	}
	for _, n := range gv.notes.list {
		v.Notes = append(v.Notes, htmlNote{Head: n.head, Items: n.items})
	}
	sorted := slices.Clone(reports)
	slices.SortStableFunc(sorted, func(a, b *Signed) int { return strings.Compare(a.Dir, b.Dir) })
	for i, s := range sorted {
		var posture []string
		if p := ReadPosture(s.Run); p != nil {
			posture = p.Lines()
		}
		rv, err := runViewOf(s.Run, s.Scenarios, posture)
		if err != nil {
			return nil, fmt.Errorf("evidence: %s: %w", s.Dir, err)
		}
		rv.Dir, rv.Anchor = s.Dir, fmt.Sprintf("r%d", i+1)
		for k := range rv.Sections {
			rv.Sections[k].Anchor = rv.Anchor + "-" + rv.Sections[k].Anchor
		}
		v.Reports = append(v.Reports, rv)
	}
	var buf bytes.Buffer
	if err := htmlTmpl.ExecuteTemplate(&buf, "gate.tmpl", v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

type gateHTMLView struct {
	Line    string
	Passed  bool
	States  []string
	Header  []string
	Columns []gateHTMLColumn
	Rows    []gateHTMLRow
	Notes   []htmlNote
	Reports []*runView
}

type gateHTMLColumn struct {
	Name, Role, State, Class string
	Reports                  []string
}

type gateHTMLRow struct {
	Scenario string
	Cells    []htmlCell
}

type htmlCell struct{ Text, Class string }

type htmlNote struct {
	Head  string
	Items []string
}

// runView is a run prepared for its template.
type runView struct {
	Dir, Anchor string // set for a report inside a gate
	Profile     string
	Verdict     string
	Class       string
	Facts       [][2]string
	Rows        []scenarioRow
	Sections    []scenarioSection
}

type scenarioRow struct {
	Anchor, Index, Name, Verdict, Class, Checks, Duration, Detail string
	// Linked is set when the scenario has a section to link to (one
	// listed as not run has none).
	Linked bool
}

type scenarioSection struct {
	Anchor, Title, Verdict, Class, Failure string
	Checks                                 []Check
	CleanupErrors                          []string
	Plots                                  []template.HTML
}

// runViewOf prepares r for its template, showing posture (Posture.Lines
// or PostureReading.Lines, "key: value" each) as its posture facts.
func runViewOf(r *Run, scenarios []*Scenario, posture []string) (*runView, error) {
	// The JSON form is what verification reads: rendering from it makes
	// the write-time bytes those of any later re-rendering.
	var run Run
	if err := roundTrip(r, &run); err != nil {
		return nil, err
	}
	byIndex := map[int]*Scenario{}
	for _, s := range scenarios {
		if s == nil {
			continue
		}
		var n Scenario
		if err := roundTrip(s, &n); err != nil {
			return nil, err
		}
		byIndex[n.Index] = &n
	}
	v := &runView{Profile: run.Profile, Verdict: run.Verdict.String(), Class: kindClass(run.Verdict.Kind)}
	e := run.Engine
	fact := func(k, val string) { v.Facts = append(v.Facts, [2]string{k, val}) }
	fact("Tuple", TupleOf(&run).Label())
	fact("Manifest", fmt.Sprintf("%s (sha256 %s)", run.Manifest.Path, run.Manifest.SHA256))
	fact("Engine", fmt.Sprintf("%s (API %s, commit %s) at %s", e.Version, e.APIVersion, e.GitCommit, run.Endpoint))
	fact("Host", fmt.Sprintf("kernel %s, %s, cgroup v%s/%s, storage %s", e.KernelVersion, e.OperatingSystem, e.CgroupVersion, e.CgroupDriver, e.StorageDriver))
	for _, l := range posture {
		k, val, _ := strings.Cut(l, ": ")
		fact(strings.ToUpper(k[:1])+k[1:], val)
	}
	fact("Image", fmt.Sprintf("%s (%s)", run.Image.ID, run.Image.Source))
	if run.Harness != nil {
		fact("Harness", run.Harness.String())
	}
	if run.Selection != nil {
		fact("Coverage", fmt.Sprintf("PARTIAL (%s): not run: %s", run.Selection.Flag(), strings.Join(run.Selection.Skipped, ", ")))
	}
	fact("Time", fmt.Sprintf("%s, %s", run.Timing.Start.UTC().Format(time.RFC3339), FormatDuration(run.Timing.Duration())))
	for _, s := range run.Scenarios {
		anchor := fmt.Sprintf("s%d", s.Index)
		checks := "-"
		if s.Checks > 0 {
			checks = fmt.Sprintf("%d/%d", s.Passed, s.Checks)
		}
		detail := s.Detail
		if detail == "" {
			detail = s.Verdict.Reason
		}
		v.Rows = append(v.Rows, scenarioRow{Anchor: anchor, Index: fmt.Sprint(s.Index), Name: s.Name,
			Verdict: string(s.Verdict.Kind), Class: kindClass(s.Verdict.Kind), Checks: checks,
			Duration: FormatDuration(time.Duration(s.DurationMs) * time.Millisecond), Detail: detail})
		file := byIndex[s.Index]
		if file == nil {
			continue
		}
		v.Rows[len(v.Rows)-1].Linked = true
		sec := scenarioSection{Anchor: anchor, Title: fmt.Sprintf("%d. %s", s.Index, s.Name),
			Verdict: file.Verdict.String(), Class: kindClass(file.Verdict.Kind), Failure: file.Failure,
			Checks: file.Checks, CleanupErrors: file.CleanupErrors}
		var keys []string
		for k := range file.Observed {
			if strings.HasPrefix(k, "series:") {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			sec.Plots = append(sec.Plots, seriesPlots(strings.TrimPrefix(k, "series:"), file.Observed[k])...)
		}
		v.Sections = append(v.Sections, sec)
	}
	return v, nil
}

// roundTrip sets out to in's JSON form decoded again.
func roundTrip(in, out any) error {
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

func kindClass(k Kind) string {
	switch k {
	case Passed:
		return "pass"
	case Failed, Flaky:
		return "fail"
	case "":
		return "none"
	}
	return "skip"
}

func stateClass(s ColumnState) string {
	switch s {
	case StatePassed:
		return "pass"
	case StatePending:
		return "skip"
	}
	return "fail"
}

// htmlProblems re-renders HTMLFile from the verified evidence and names
// the first difference: the file may say nothing the evidence does not.
// Without every listed scenario's file there is nothing to compare (the
// missing file is a problem of its own).
func htmlProblems(r *Run, scenarios []*Scenario, data []byte) []string {
	have := 0
	for _, s := range scenarios {
		if s != nil {
			have++
		}
	}
	for _, s := range r.Scenarios {
		if s.Dir != "" {
			have--
		}
	}
	if have != 0 {
		return nil
	}
	want, err := RunHTML(r, scenarios)
	if err != nil {
		return []string{fmt.Sprintf("the evidence does not render: %v", err)}
	}
	if !bytes.Equal(data, want) {
		return []string{"differs from what the evidence renders: " + firstDifference(data, want)}
	}
	return nil
}
