package evidence

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"strings"
	"time"
)

// A gate column's reports and timing, for the test-reporter renderings of
// the gate (GateJUnit, GateTestEvents): a report's junit.xml names its
// suite by profile only (a run does not know its row), so lane A's and
// lane B's, both linux-x64-cgroupv1, collide in a test reporter; these
// name each suite (package) by the gate's column.
type columnRuns struct {
	col   GateColumn
	cells []Cell // by scenario, as g.Matrix.Cells[i][j]
	runs  []*Run
	// durations are each scenario's summed duration over runs, in
	// milliseconds, by scenario name.
	durations map[string]int64
	start     time.Time
	end       time.Time
}

func columnsOf(g *GateResult, reports []*Signed) []columnRuns {
	byDir := map[string]*Signed{}
	for _, r := range reports {
		byDir[r.Dir] = r
	}
	out := make([]columnRuns, len(g.Columns))
	for j, c := range g.Columns {
		cr := columnRuns{col: c, durations: map[string]int64{}}
		for i := range g.Matrix.Scenarios {
			cr.cells = append(cr.cells, g.Matrix.Cells[i][j])
		}
		for _, gr := range c.Reports {
			rep := byDir[gr.Dir]
			if rep == nil || rep.Run == nil {
				continue
			}
			cr.runs = append(cr.runs, rep.Run)
			for _, s := range rep.Run.Scenarios {
				cr.durations[s.Name] += s.DurationMs
			}
			if t := rep.Run.Timing.Start; cr.start.IsZero() || t.Before(cr.start) {
				cr.start = t
			}
			if t := rep.Run.Timing.End; t.After(cr.end) {
				cr.end = t
			}
		}
		out[j] = cr
	}
	return out
}

// elapsedMs is the column's duration in milliseconds: the sum of its
// reports' run durations.
func (c columnRuns) elapsedMs() int64 {
	var ms int64
	for _, r := range c.runs {
		ms += r.Timing.DurationMs
	}
	return ms
}

// stateMessage is the column's state and, unless it passed, why: its
// refusals' problems and its violations, one a line.
func (c columnRuns) stateMessage() (string, string) {
	msg := string(c.col.State)
	if c.col.State == StatePending {
		msg += ", no report"
	}
	return msg, strings.Join(columnNote(c.col), "\n")
}

// suiteName is the JUnit suite name, classname and test2json package of
// a column: "qualbox." and the column's name ("qualbox.lane-a").
func suiteName(c GateColumn) string { return "qualbox." + c.Name }

// GateJUnit renders the gate as one JUnit XML document in the layout of a
// report's junit.xml (both schemas it validates against,
// docs/qualification.md#evidence): one testsuite per gate column (row),
// in the gate's order, named "qualbox.ROW" with that classname on each of
// its test cases, so that two rows of one profile do not collide in a
// test reporter. Its first test case, "row state", is the column's state:
// a failure (failed or refused, the footnote's lines as text), skipped
// (pending), or passed. Then one test case per scenario of the matrix the
// column ran, from its cell: failed or flaky as a failure, skipped and
// not_applicable as skipped, with the reason as message; time is the
// scenario's summed duration over the column's reports in seconds. The
// suite's properties name the row's kind and each report's directory
// and tuple; timestamp is its earliest report's start (UTC, no zone).
// reports are the verified reports g was judged from (their runs give the
// timings); a column's report missing from them has no timing.
func GateJUnit(g *GateResult, reports []*Signed) ([]byte, error) {
	doc := junitSuites{}
	for j, c := range columnsOf(g, reports) {
		name := suiteName(c.col)
		suite := junitSuite{
			Name: name, Time: seconds(c.elapsedMs()), Hostname: "localhost", Package: name, ID: j,
			Timestamp: c.start.UTC().Format("2006-01-02T15:04:05"),
			Properties: []junitProperty{
				{"gate.column", c.col.Name},
				{"gate.kind", role(c.col)},
				{"gate.state", string(c.col.State)},
			},
		}
		var out strings.Builder
		for k, r := range c.col.Reports {
			p := fmt.Sprintf("report.%d.", k+1)
			suite.Properties = append(suite.Properties,
				junitProperty{p + "dir", r.Dir}, junitProperty{p + "tuple", strings.ReplaceAll(r.Tuple.Label(), " · ", ", ")},
				junitProperty{p + "manifest.sha256", r.Tuple.ManifestSHA256}, junitProperty{p + "runVerdict", r.RunVerdict.String()})
			fmt.Fprintf(&out, "report %s: run verdict %s\n", r.Dir, r.RunVerdict)
		}
		state := junitCase{Name: stateRow, Classname: name, Time: seconds(0)}
		msg, text := c.stateMessage()
		switch c.col.State {
		case StateFailed, StateRefused:
			suite.Failures++
			state.Failure = &junitFailure{Message: msg, Type: string(c.col.State), Text: text}
		case StatePending:
			suite.Skipped++
			state.Skipped = &junitSkipped{Message: msg}
		}
		suite.Cases = append(suite.Cases, state)
		for i, scenario := range g.Matrix.Scenarios {
			cell := c.cells[i]
			if cell.Runs == 0 {
				continue // not in this column's reports
			}
			tc := junitCase{Name: scenario, Classname: name, Time: seconds(c.durations[scenario])}
			switch cell.Kind {
			case Failed, Flaky:
				suite.Failures++
				tc.Failure = &junitFailure{Message: cell.String(), Type: string(cell.Kind), Text: cell.Reason}
			case Skipped, NotApplicable:
				suite.Skipped++
				tc.Skipped = &junitSkipped{Message: Verdict{Kind: cell.Kind, Reason: cell.Reason}.String()}
			}
			suite.Cases = append(suite.Cases, tc)
		}
		suite.Tests = len(suite.Cases)
		suite.SystemOut = out.String()
		doc.Suites = append(doc.Suites, suite)
	}
	data, err := xml.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("evidence: encode gate JUnit: %w", err)
	}
	return append([]byte(xml.Header), append(data, '\n')...), nil
}

// TestEvent is one event of `go test -json` (cmd/test2json's TestEvent):
// Action is "start", "run", "output", "pass", "fail" or "skip"; Package
// names the gate column, Test the scenario (empty for the column's own
// events); Elapsed is in seconds, on pass, fail and skip.
type TestEvent struct {
	Time    *time.Time `json:",omitempty"`
	Action  string
	Package string   `json:",omitempty"`
	Test    string   `json:",omitempty"`
	Elapsed *float64 `json:",omitempty"`
	Output  string   `json:",omitempty"`
}

// GateTestEvents renders the gate as `go test -json` events, one JSON
// object a line, for tools that read them (gotestsum, go-junit-report,
// IDEs): per gate column in the gate's order, a package "qualbox/ROW"
// (start), then for each scenario the column ran its run, output and
// pass, fail (failed, flaky) or skip (skipped, not_applicable) events
// with the output go test prints ("=== RUN", the reason, "--- PASS: ..."),
// and last the package's own output and result: pass when the column
// passed, skip when it is pending, fail when it failed or was refused
// (its footnote's lines as output). Elapsed is the summed duration of the
// column's reports (a scenario's over them); Time is the column's
// earliest report start on start and run events and its latest end on
// the others, absent for a column without a report.
func GateTestEvents(g *GateResult, reports []*Signed) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for _, c := range columnsOf(g, reports) {
		pkg := "qualbox/" + c.col.Name
		var start, end *time.Time
		if !c.start.IsZero() {
			s, e := c.start.UTC(), c.end.UTC()
			start, end = &s, &e
		}
		var events []TestEvent
		emit := func(at *time.Time, action, test, output string, elapsed *float64) {
			events = append(events, TestEvent{Time: at, Action: action, Package: pkg, Test: test, Elapsed: elapsed, Output: output})
		}
		emit(start, "start", "", "", nil)
		for i, scenario := range g.Matrix.Scenarios {
			cell := c.cells[i]
			if cell.Runs == 0 {
				continue
			}
			secs := float64(c.durations[scenario]) / 1000
			emit(start, "run", scenario, "", nil)
			emit(start, "output", scenario, "=== RUN   "+scenario+"\n", nil)
			action, word := "pass", "PASS"
			switch cell.Kind {
			case Failed, Flaky:
				action, word = "fail", "FAIL"
			case Skipped, NotApplicable:
				action, word = "skip", "SKIP"
			}
			if action != "pass" {
				why := cell.String()
				if cell.Reason != "" && cell.Runs > 1 {
					why += ": " + cell.Reason
				}
				emit(end, "output", scenario, "    "+oneLine(why)+"\n", nil)
			}
			emit(end, "output", scenario, fmt.Sprintf("--- %s: %s (%.2fs)\n", word, scenario, secs), nil)
			emit(end, action, scenario, "", &secs)
		}
		secs := float64(c.elapsedMs()) / 1000
		msg, text := c.stateMessage()
		action, word := "pass", "ok  "
		switch c.col.State {
		case StateFailed, StateRefused:
			action, word = "fail", "FAIL"
		case StatePending:
			action, word = "skip", "?   "
		}
		if text != "" {
			for _, l := range strings.Split(text, "\n") {
				emit(end, "output", "", oneLine(l)+"\n", nil)
			}
		}
		emit(end, "output", "", fmt.Sprintf("%s\t%s\t%.3fs (%s)\n", word, pkg, secs, msg), nil)
		emit(end, action, "", "", &secs)
		for _, e := range events {
			if err := enc.Encode(e); err != nil {
				return nil, fmt.Errorf("evidence: encode test events: %w", err)
			}
		}
	}
	return buf.Bytes(), nil
}

// oneLine is s with line breaks as spaces: an output event is one line.
func oneLine(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }), " ")
}
