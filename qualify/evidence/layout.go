package evidence

import (
	"encoding/xml"
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/qualbox/qualbox/qualify/attest"
)

// The names of a report's files (docs/qualification.md#evidence).
const (
	// RunFile is the run evidence (a Run) at the top of a report; it is
	// written last, so its presence marks a complete report.
	RunFile = "evidence.json"
	// SummaryFile is the Markdown summary of the run (Markdown).
	SummaryFile = "summary.md"
	// JUnitFile is the JUnit XML of the run (JUnit).
	JUnitFile = "junit.xml"
	// ScenarioFile is a scenario's evidence (a Scenario) in its directory
	// "<nn>-<name>".
	ScenarioFile = "evidence.json"
	// GoroutinesFile holds the controller's goroutine stacks, written
	// into a scenario's directory when the scenario passes its time limit.
	GoroutinesFile = "goroutines.txt"
)

// ScenarioDir is the placeholder of a scenario's directory ("<nn>-<name>",
// nn its 1-based campaign index of at least two digits) in ReportFile.Name.
const ScenarioDir = "<nn>-<name>"

// ReportFile is one entry of a report's file set.
type ReportFile struct {
	// Name is the file's slash-separated path in the report. A name that
	// starts with ScenarioDir + "/" lies in a scenario's directory; a
	// final "*" there stands for any other path below that directory.
	Name string
	// MediaType is the file's IANA media type.
	MediaType string
	// Required: the file is in every report (top level), or in every
	// directory of a scenario that ran (scenario files). Optional files
	// are written only in some runs.
	Required bool
	// Signed: the file is a subject of the signed statement (every file
	// but the envelope is).
	Signed bool
	// WrittenBy names what writes the file.
	WrittenBy string

	// render renders a run-level file that WriteReport writes; nil for a
	// file written elsewhere (WrittenBy).
	render func(r *Run, scenarios []*Scenario) ([]byte, error)
	// schema checks a signed file's document (VerifyRun); nil when it has
	// none.
	schema func(name string, data []byte) error
	// check cross-checks a run-level file against the run evidence and
	// the scenario files (crossCheck; by Run.Scenarios index, nil for one
	// not run or not readable); nil when there is nothing to compare.
	check func(r *Run, scenarios []*Scenario, data []byte) []string
}

// Scenario reports whether f lies in a scenario's directory.
func (f ReportFile) Scenario() bool { return strings.HasPrefix(f.Name, ScenarioDir+"/") }

// FileSet is a set of report files, in the order listings use.
type FileSet []ReportFile

// Layout is a report's file set, in the order the listings and the
// cross-check use. A report holds nothing else: VerifyRun refuses any other
// file (docs/qualification.md#evidence).
var Layout = FileSet{
	{Name: RunFile, MediaType: "application/json", Required: true, Signed: true,
		WrittenBy: "WriteReport (the run evidence), last", render: renderRun, schema: runSchema},
	{Name: SummaryFile, MediaType: "text/markdown", Required: true, Signed: true,
		WrittenBy: "WriteReport (Markdown)", render: renderMarkdown, check: summaryProblems},
	{Name: JUnitFile, MediaType: "application/xml", Required: true, Signed: true,
		WrittenBy: "WriteReport (JUnit)", render: JUnit, schema: junitSchema, check: junitProblems},
	// Optional so that reports written before it existed still verify.
	{Name: HTMLFile, MediaType: "text/html", Signed: true,
		WrittenBy: "WriteReport (HTML)", render: RunHTML, check: htmlProblems},
	{Name: TestResultFile, MediaType: "application/vnd.dsse.envelope.v1+json", Signed: true,
		WrittenBy: "SignTestResult, before the envelope (only a signed report has it; checked when present)"},
	{Name: attest.EnvelopeFile, MediaType: "application/vnd.dsse.envelope.v1+json",
		WrittenBy: "SignRun, after every other file (only a signed report has it)"},
	{Name: ScenarioDir + "/" + ScenarioFile, MediaType: "application/json", Required: true, Signed: true,
		WrittenBy: "qualify's campaign, once the scenario returned", schema: scenarioSchema},
	{Name: ScenarioDir + "/" + GoroutinesFile, MediaType: "text/plain", Signed: true,
		WrittenBy: "qualify's time limit, when the scenario ran past it or did not return after an interruption"},
	{Name: ScenarioDir + "/*", MediaType: "application/octet-stream", Signed: true,
		WrittenBy: "the scenario and its sandboxes (scenario.Env.Dir: records, markers, spilled files)"},
}

var scenarioDirName = regexp.MustCompile(`^[0-9]{2,}-[a-z0-9-]+$`)

// FileOf returns the Layout entry a report path belongs to (Layout.Match).
func FileOf(name string) (ReportFile, bool) { return Layout.Match(name) }

// Match returns the first entry of s a report path (slash-separated,
// relative to the report) belongs to; false when s has no place for it. A
// scenario file matches by the shape of its directory name only: whether
// evidence.json lists that directory is the cross-check's.
func (s FileSet) Match(name string) (ReportFile, bool) {
	top, rest, nested := strings.Cut(name, "/")
	for _, f := range s {
		switch {
		case !f.Scenario():
			if !nested && name == f.Name {
				return f, true
			}
		case nested && rest != "" && scenarioDirName.MatchString(top):
			want := strings.TrimPrefix(f.Name, ScenarioDir+"/")
			if want == "*" || want == rest {
				return f, true
			}
		}
	}
	return ReportFile{}, false
}

// TopFiles returns the names of the signed files at the top of a report,
// in Layout order; required only the required ones.
func TopFiles(required bool) []string {
	var names []string
	for _, f := range Layout {
		if !f.Scenario() && f.Signed && (f.Required || !required) {
			names = append(names, f.Name)
		}
	}
	return names
}

// WriteReport writes the run-level files of a report into dir, each
// atomically (WriteFile): every Layout entry WriteReport renders, RunFile
// last so that its presence marks a complete report. scenarios are the
// scenario evidence written, in campaign order. An error names the file.
func WriteReport(dir string, r *Run, scenarios []*Scenario) error {
	var last *ReportFile
	for i, f := range Layout {
		if f.render == nil {
			continue
		}
		if f.Name == RunFile {
			last = &Layout[i]
			continue
		}
		if err := writeRendered(dir, f, r, scenarios); err != nil {
			return err
		}
	}
	return writeRendered(dir, *last, r, scenarios)
}

func writeRendered(dir string, f ReportFile, r *Run, scenarios []*Scenario) error {
	data, err := f.render(r, scenarios)
	if err != nil {
		return fmt.Errorf("evidence: render %s: %w", f.Name, err)
	}
	return WriteFile(filepath.Join(dir, filepath.FromSlash(f.Name)), data)
}

func renderRun(r *Run, _ []*Scenario) ([]byte, error) { return MarshalJSON(r) }

func renderMarkdown(r *Run, _ []*Scenario) ([]byte, error) { return Markdown(r) }

// schemaOf returns the schema check of a signed report file, or nil.
func schemaOf(name string) func([]byte) error {
	f, ok := FileOf(name)
	if !ok || f.schema == nil {
		return nil
	}
	return func(data []byte) error { return f.schema(name, data) }
}

func runSchema(name string, data []byte) error {
	var r Run
	if err := attest.StrictJSONFile(data, name, &r); err != nil {
		return err
	}
	if r.Schema != Schema {
		return fmt.Errorf("schema %q: want %q", r.Schema, Schema)
	}
	return nil
}

func scenarioSchema(name string, data []byte) error {
	var s Scenario
	if err := attest.StrictJSONFile(data, name, &s); err != nil {
		return err
	}
	if s.Schema != Schema {
		return fmt.Errorf("schema %q: want %q", s.Schema, Schema)
	}
	if want := path.Dir(name); fmt.Sprintf("%02d-%s", s.Index, s.Name) != want {
		return fmt.Errorf("scenario %d %q does not belong in %s", s.Index, s.Name, want)
	}
	return nil
}

func junitSchema(_ string, data []byte) error {
	if err := junitDocumentProblem(data); err != nil {
		return err
	}
	var v struct {
		XMLName xml.Name `xml:"testsuites"`
	}
	return xml.Unmarshal(data, &v)
}

// Problems compares the files of one or more reports (slash-separated
// paths relative to each report, directories left out) with s: a file s
// has no place for, and an entry of s that none of the files belongs to
// (nothing wrote it), each named. nil when every file has its entry and
// every entry its file.
func (s FileSet) Problems(files []string) []string {
	var out []string
	written := map[string]bool{}
	for _, name := range files {
		f, ok := s.Match(name)
		if !ok {
			out = append(out, name+": a file the report layout has no place for")
			continue
		}
		written[f.Name] = true
	}
	for _, f := range s {
		if !written[f.Name] {
			out = append(out, f.Name+": in the report layout, but no report file belongs to it")
		}
	}
	return out
}
