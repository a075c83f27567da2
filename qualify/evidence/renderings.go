package evidence

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Checks that the renderings of a verified report (summary.md, junit.xml)
// say what its evidence.json says (docs/qualification.md#evidence). They
// live apart from crosscheck.go's checks of claims; crossCheck calls them.

// summaryProblems compares summary.md with what Markdown renders from r,
// byte for byte: what a reader of summary.md (a CI step summary, say)
// sees is what the gate saw, every header line, column and the campaign's
// tallies included. The verdict line and the first four table columns
// (#, scenario, verdict, checks) are compared first, for a precise message
// where they disagree; otherwise the first differing line is named.
func summaryProblems(r *Run, _ []*Scenario, data []byte) []string {
	out := summaryTableProblems(r, data)
	if len(out) > 0 {
		return out
	}
	want, err := Markdown(r)
	if err != nil {
		return []string{fmt.Sprintf("evidence.json does not render: %v", err)}
	}
	if !bytes.Equal(data, want) {
		return []string{"differs from what evidence.json renders: " + firstDifference(data, want)}
	}
	return nil
}

// firstDifference describes where got first differs from want, by line.
func firstDifference(got, want []byte) string {
	lines := func(b []byte) []string {
		l := strings.SplitAfter(string(b), "\n")
		if l[len(l)-1] == "" {
			l = l[:len(l)-1]
		}
		return l
	}
	g, w := lines(got), lines(want)
	for i := 0; i < len(g) || i < len(w); i++ {
		switch {
		case i >= len(g):
			return fmt.Sprintf("line %d is missing, want %q", i+1, w[i])
		case i >= len(w):
			return fmt.Sprintf("line %d %q is extra", i+1, g[i])
		case g[i] != w[i]:
			return fmt.Sprintf("line %d is %q, want %q", i+1, g[i], w[i])
		}
	}
	return "same lines" // unreachable: got != want
}

// summaryTableProblems compares summary.md's verdict line and the first
// four columns of its table (#, scenario, verdict, checks) with r.
func summaryTableProblems(r *Run, data []byte) []string {
	var out []string
	if want := fmt.Sprintf("- Verdict: **%s**\n", r.Verdict); !bytes.Contains(data, []byte(want)) {
		out = append(out, fmt.Sprintf("has no line %q", strings.TrimSpace(want)))
	}
	var rows [][]string
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "|") || strings.HasPrefix(line, "|:") {
			continue // not a table line, or the alignment line
		}
		cells := strings.Split(line, "|")
		if len(cells) > 1 && strings.TrimSpace(cells[1]) == "#" {
			continue // the header
		}
		if len(cells) < 6 {
			out = append(out, fmt.Sprintf("table row %q has too few columns", line))
			continue
		}
		row := make([]string, 4)
		for i := range row {
			row[i] = strings.TrimSpace(cells[i+1])
		}
		rows = append(rows, row)
	}
	want := tableRows(r)
	if len(rows) != len(want) {
		return append(out, fmt.Sprintf("table has %d scenario rows, evidence.json %d scenarios", len(rows), len(want)))
	}
	for i, row := range rows {
		if !slices.Equal(row, want[i][:4]) {
			out = append(out, fmt.Sprintf("row %d is %s, evidence.json says %s", i+1, strings.Join(row, " | "), strings.Join(want[i][:4], " | ")))
		}
	}
	return out
}

// junitProblems compares junit.xml's counts and test cases with r. The
// errors attribute is optional here, and so are the testsuites counts
// (written before junit.xml followed the Ant schema, which has none):
// reports written before still verify. A count that is present must agree.
func junitProblems(r *Run, _ []*Scenario, data []byte) []string {
	var doc struct {
		Tests    *int `xml:"tests,attr"`
		Failures *int `xml:"failures,attr"`
		Suites   []struct {
			Tests    int `xml:"tests,attr"`
			Failures int `xml:"failures,attr"`
			Errors   int `xml:"errors,attr"`
			Skipped  int `xml:"skipped,attr"`
			Cases    []struct {
				Name     string     `xml:"name,attr"`
				Failures []struct{} `xml:"failure"`
				Errors   []struct{} `xml:"error"`
				Skipped  []struct{} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(data, &doc); err != nil {
		return []string{err.Error()}
	}
	if len(doc.Suites) != 1 {
		return []string{fmt.Sprintf("%d test suites, want 1", len(doc.Suites))}
	}
	var out []string
	suite := doc.Suites[0]
	failed, skipped := 0, 0
	for _, s := range r.Scenarios {
		switch s.Verdict.Kind {
		case Failed:
			failed++
		case Skipped, NotApplicable:
			skipped++
		}
	}
	for _, c := range []struct {
		what      string
		got, want int
	}{
		{"testsuites tests", orWant(doc.Tests, len(r.Scenarios)), len(r.Scenarios)},
		{"testsuites failures", orWant(doc.Failures, failed), failed},
		{"testsuite tests", suite.Tests, len(r.Scenarios)},
		{"testsuite failures", suite.Failures, failed},
		{"testsuite errors", suite.Errors, 0},
		{"testsuite skipped", suite.Skipped, skipped},
	} {
		if c.got != c.want {
			out = append(out, fmt.Sprintf("%s=%d, evidence.json says %d", c.what, c.got, c.want))
		}
	}
	if len(suite.Cases) != len(r.Scenarios) {
		return append(out, fmt.Sprintf("%d test cases, evidence.json %d scenarios", len(suite.Cases), len(r.Scenarios)))
	}
	for i, c := range suite.Cases {
		s := r.Scenarios[i]
		if n := len(c.Failures) + len(c.Errors) + len(c.Skipped); n > 1 {
			// Readers disagree on what such a case is (the Ant schema
			// allows one): failed to one, skipped to another.
			out = append(out, fmt.Sprintf("test case %d %s has %d failure, error and skipped elements, want at most one", i+1, c.Name, n))
			continue
		}
		got := "passed"
		switch {
		case len(c.Failures) > 0 || len(c.Errors) > 0:
			got = "failed"
		case len(c.Skipped) > 0:
			got = "skipped"
		}
		want := map[Kind]string{Failed: "failed", Skipped: "skipped", NotApplicable: "skipped"}[s.Verdict.Kind]
		if want == "" {
			want = "passed"
		}
		if c.Name != s.Name || got != want {
			out = append(out, fmt.Sprintf("test case %d is %s %s, evidence.json says %s %s", i+1, c.Name, got, s.Name, s.Verdict.Kind))
		}
	}
	if len(out) > 0 {
		return out
	}
	return junitValueProblems(r, data)
}

// junitShown is what a CI's JUnit view shows of junit.xml besides the
// counts and outcomes: the suite's name, time, timestamp and properties
// (engine, kernel, image), and each case's class, time and message.
type junitShown struct {
	Suite struct {
		Name       string          `xml:"name,attr"`
		Time       string          `xml:"time,attr"`
		Timestamp  string          `xml:"timestamp,attr"`
		Properties []junitProperty `xml:"properties>property"`
		Cases      []struct {
			Name      string `xml:"name,attr"`
			Classname string `xml:"classname,attr"`
			Time      string `xml:"time,attr"`
			Failure   *struct {
				Message string `xml:"message,attr"`
				Type    string `xml:"type,attr"`
			} `xml:"failure"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
			Error *struct{} `xml:"error"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// junitValueProblems compares what junitShown reads from data with what
// JUnit renders from r, so that junit.xml cannot show another engine,
// kernel, image or failure message than evidence.json. The failure text
// (rendered from the scenario files) and the suite's system-out are not
// compared, and a timestamp may carry the "Z" that reports written before
// the Ant layout have.
func junitValueProblems(r *Run, data []byte) []string {
	rendered, err := JUnit(r, nil)
	if err != nil {
		return []string{fmt.Sprintf("evidence.json does not render: %v", err)}
	}
	var got, want junitShown
	if err := xml.Unmarshal(data, &got); err != nil {
		return []string{err.Error()}
	}
	if err := xml.Unmarshal(rendered, &want); err != nil {
		return []string{err.Error()}
	}
	if got.Suite.Timestamp == want.Suite.Timestamp+"Z" {
		got.Suite.Timestamp = want.Suite.Timestamp
	}
	var out []string
	g, w := got.Suite, want.Suite
	for _, c := range []struct{ what, got, want string }{
		{"testsuite name", g.Name, w.Name},
		{"testsuite time", g.Time, w.Time},
		{"testsuite timestamp", g.Timestamp, w.Timestamp},
	} {
		if c.got != c.want {
			out = append(out, fmt.Sprintf("%s %q, evidence.json says %q", c.what, c.got, c.want))
		}
	}
	if !slices.Equal(g.Properties, w.Properties) {
		out = append(out, fmt.Sprintf("properties %v, evidence.json says %v", g.Properties, w.Properties))
	}
	for i, c := range g.Cases {
		wc := w.Cases[i] // as many cases: junitProblems checked
		if c.Classname != wc.Classname || c.Time != wc.Time {
			out = append(out, fmt.Sprintf("test case %d %s: classname %q time %q, evidence.json says %q %q", i+1, c.Name, c.Classname, c.Time, wc.Classname, wc.Time))
		}
		switch {
		case c.Error != nil:
			// JUnit writes failures only (testsuite errors is 0); a CI
			// view shows an error as another outcome than a failure.
			out = append(out, fmt.Sprintf("test case %d %s has an error element: qualbox reports a failed scenario as a failure", i+1, c.Name))
		case c.Failure != nil && wc.Failure != nil && *c.Failure != *wc.Failure:
			out = append(out, fmt.Sprintf("test case %d %s: failure message %q type %q, evidence.json says %q %q", i+1, c.Name, c.Failure.Message, c.Failure.Type, wc.Failure.Message, wc.Failure.Type))
		case c.Skipped != nil && wc.Skipped != nil && *c.Skipped != *wc.Skipped:
			out = append(out, fmt.Sprintf("test case %d %s: skipped message %q, evidence.json says %q", i+1, c.Name, c.Skipped.Message, wc.Skipped.Message))
		}
	}
	return out
}

// orWant returns *p, or want when the attribute is absent.
func orWant(p *int, want int) int {
	if p == nil {
		return want
	}
	return *p
}

// junitDocumentProblem checks that data is one well-formed XML document
// every XML reader parses alike (docs/qualification.md#evidence): an
// optional XML declaration at the very start, then comments and white
// space around exactly one root element, and nothing else. A DOCTYPE (or
// any other <!...> directive, which can declare entities and defaults),
// a processing instruction other than the declaration, a second root
// element, text after the root, a repeated attribute and a namespace
// prefix are each refused: encoding/xml accepts them and reads past
// them, while xmllint, Python or a CI's JUnit reader refuse the document
// or read another element or attribute than the gate did. So is an
// element or attribute outside junitLayout (a nested testsuite, a
// flakyFailure, a status attribute), which the gate does not read but a
// JUnit reader may count or show.
func junitDocumentProblem(data []byte) error {
	dec := xml.NewDecoder(bytes.NewReader(data))
	dec.Strict = true
	var j junitWalk
	for {
		offset := dec.InputOffset()
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("not well-formed XML: %w", err)
		}
		if err := j.token(tok, offset); err != nil {
			return err
		}
	}
	if j.roots == 0 {
		return errors.New("no root element")
	}
	return nil
}

// junitWalk is junitDocumentProblem's state: the element depth, the root
// elements met and the names of the elements enclosing the token.
type junitWalk struct {
	depth, roots int
	open         []string
}

// token checks one token, read at byte offset.
func (j *junitWalk) token(tok xml.Token, offset int64) error {
	switch tok := tok.(type) {
	case xml.ProcInst:
		if tok.Target != "xml" {
			return fmt.Errorf("processing instruction <?%s?> at byte %d: only the XML declaration is allowed", tok.Target, offset)
		}
		if offset != 0 {
			return fmt.Errorf("XML declaration at byte %d: it must start the document", offset)
		}
	case xml.Directive:
		what, _, _ := strings.Cut(string(tok), " ")
		return fmt.Errorf("<!%s> at byte %d: no DOCTYPE or other directive is allowed", what, offset)
	case xml.StartElement:
		return j.start(tok, offset)
	case xml.EndElement:
		j.depth--
		j.open = j.open[:len(j.open)-1]
	case xml.CharData:
		if j.depth == 0 && len(bytes.TrimLeft(tok, " \t\r\n")) > 0 {
			return fmt.Errorf("text %q at byte %d, outside the root element", truncate(string(tok), 20), offset)
		}
	}
	return nil
}

// start checks an element: the only root, no namespace, where junitLayout
// allows it, with its attributes (junitAttrsProblem).
func (j *junitWalk) start(tok xml.StartElement, offset int64) error {
	if j.depth == 0 {
		if j.roots++; j.roots > 1 {
			return fmt.Errorf("second root element <%s> at byte %d: want one document", tok.Name.Local, offset)
		}
	}
	j.depth++
	if tok.Name.Space != "" {
		return fmt.Errorf("element <%s:%s> at byte %d: namespaces are not allowed", tok.Name.Space, tok.Name.Local, offset)
	}
	parent := ""
	if len(j.open) > 0 {
		parent = j.open[len(j.open)-1]
	}
	j.open = append(j.open, tok.Name.Local)
	attrs, known := junitLayout[[2]string{parent, tok.Name.Local}]
	if !known {
		return fmt.Errorf("element <%s> at byte %d inside %s: junit.xml holds only the elements JUnit writes (a reader may count a nested suite or a flaky or rerun element the gate does not read)", tok.Name.Local, offset, orRoot(parent))
	}
	return junitAttrsProblem(tok, offset, attrs)
}

// junitAttrsProblem checks an element's attributes: none namespaced or
// repeated, each one of attrs.
func junitAttrsProblem(tok xml.StartElement, offset int64, attrs []string) error {
	seen := map[string]bool{}
	for _, a := range tok.Attr {
		if a.Name.Space != "" || a.Name.Local == "xmlns" {
			return fmt.Errorf("<%s> at byte %d: namespaced attribute %s:%s is not allowed", tok.Name.Local, offset, a.Name.Space, a.Name.Local)
		}
		if seen[a.Name.Local] {
			return fmt.Errorf("<%s> at byte %d: attribute %s repeated", tok.Name.Local, offset, a.Name.Local)
		}
		if !slices.Contains(attrs, a.Name.Local) {
			return fmt.Errorf("<%s> at byte %d: attribute %s is not one JUnit writes there (a reader may take a status from it)", tok.Name.Local, offset, a.Name.Local)
		}
		seen[a.Name.Local] = true
	}
	return nil
}

// junitLayout is every element junit.xml may hold, by its parent's name
// and its own ("" for the root), with the attributes it may carry: what
// JUnit writes, and what reports written before the Ant layout wrote (the
// testsuites counts, a system-out or system-err in a test case).
var junitLayout = map[[2]string][]string{
	{"", "testsuites"}:          {"name", "tests", "failures", "errors", "skipped", "time"},
	{"testsuites", "testsuite"}: {"name", "tests", "failures", "errors", "skipped", "time", "timestamp", "hostname", "package", "id"},
	{"testsuite", "properties"}: nil,
	{"properties", "property"}:  {"name", "value"},
	{"testsuite", "testcase"}:   {"name", "classname", "time"},
	{"testcase", "failure"}:     {"message", "type"},
	{"testcase", "skipped"}:     {"message"},
	{"testcase", "system-out"}:  nil,
	{"testcase", "system-err"}:  nil,
	// JUnit writes no error; the cross-check names one (junitValueProblems).
	{"testcase", "error"}:       {"message", "type"},
	{"testsuite", "system-out"}: nil,
	{"testsuite", "system-err"}: nil,
}

func orRoot(parent string) string {
	if parent == "" {
		return "the document"
	}
	return "<" + parent + ">"
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
