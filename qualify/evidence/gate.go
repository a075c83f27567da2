package evidence

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/qualbox/qualbox/qualify/manifest"
)

// Row is one platform row a release gate requires (docs/qualification.md#rows):
// reports of a profile on an Engine line, run with a pinned manifest. A
// report matches a row when its signed tuple has the row's profile and
// every set field; it satisfies the row when it also ran one of the
// row's manifests, and the row's scenarios must have passed in it.
type Row struct {
	// Name names the row in gate messages and the gate matrix's column,
	// e.g. "lane-a".
	Name string `yaml:"name" json:"name"`
	// Informational rows do not gate: without a report such a row is
	// pending, and its failures are shown but do not fail the gate
	// (docs/qualification.md#gate). The zero value is a required row. A
	// policy file states it per row (PolicyRow.Required false); CLI rows
	// are required.
	Informational bool `yaml:"-" json:"informational"`
	// Profile is the platform profile name.
	Profile string `yaml:"profile" json:"profile"`
	// Engine, when set, is the Engine version exactly ("29.1.4"), or a
	// prefix of it when it ends in "." or "-" ("20.10.", "2.0.0-"): an
	// exact release never matches its release candidates ("29.1.4-rc.1")
	// or a later patch ("29.1.40").
	Engine string `yaml:"engine,omitempty" json:"engine,omitempty"`
	// EngineCommit, Containerd and Runc, when set, must equal the tuple's
	// Engine commit (/version GitCommit, "08440b6") and the containerd and
	// runc commits /info reports; StorageDriver the tuple's ("overlayfs"
	// for the containerd image store). They pin a row to one Engine tuple.
	EngineCommit  string `yaml:"engineCommit,omitempty" json:"engineCommit,omitempty"`
	Containerd    string `yaml:"containerd,omitempty" json:"containerd,omitempty"`
	Runc          string `yaml:"runc,omitempty" json:"runc,omitempty"`
	StorageDriver string `yaml:"storageDriver,omitempty" json:"storageDriver,omitempty"`
	// Runtime, when set, must equal the tuple's OCI runtime (the profile's
	// runtime the run's sandboxes requested and read back, "runc"); a
	// report made before tuples recorded it has none and does not match.
	Runtime string `yaml:"runtime,omitempty" json:"runtime,omitempty"`
	// ControllerOS and ControllerArch, when set, must equal the tuple's
	// (GOOS and GOARCH of the controller, e.g. darwin/arm64).
	ControllerOS   string `yaml:"controllerOS,omitempty" json:"controllerOS,omitempty"`
	ControllerArch string `yaml:"controllerArch,omitempty" json:"controllerArch,omitempty"`
	// CgroupVersion, when set, must equal the tuple's ("1" or "2").
	CgroupVersion string `yaml:"cgroupVersion,omitempty" json:"cgroupVersion,omitempty"`
	// OperatingSystem, when set, is a prefix of the Engine host's operating
	// system, e.g. "Ubuntu" to tell a hosted runner from a Debian lane.
	OperatingSystem string `yaml:"operatingSystem,omitempty" json:"operatingSystem,omitempty"`
	// Manifests are the hex SHA-256 digests of the manifests a report of
	// this row may have run (a policy file names the manifest files).
	Manifests []string `yaml:"-" json:"manifests"`
	// Pinned are the parsed manifests by Manifests index, when known (a
	// policy file's always are; nil entries or a short list skip the
	// comparison): a report that ran one must list its scenarios, params,
	// policy and user (ManifestProblems).
	Pinned []*manifest.Manifest `yaml:"-" json:"-"`
	// Scenarios are the scenario names that must pass in every report of
	// this row (each report, not only the row's column as a whole), but
	// for one the Pinned manifest the report ran does not list and the
	// report's catalogue predates (ScenarioAddedIn): such a report is
	// judged by what its manifest runs.
	Scenarios []string `yaml:"scenarios" json:"scenarios"`
}

// Matches reports whether t belongs to the row (manifest aside).
func (r Row) Matches(t Tuple) bool {
	exact := func(want, got string) bool { return want == "" || got == want }
	return t.Profile == r.Profile &&
		engineMatches(r.Engine, t.EngineVersion) &&
		exact(r.EngineCommit, t.EngineCommit) && exact(r.Containerd, t.Containerd) &&
		exact(r.Runc, t.Runc) && exact(r.StorageDriver, t.StorageDriver) && exact(r.Runtime, t.Runtime) &&
		(r.ControllerOS == "" || t.ControllerOS == r.ControllerOS) &&
		(r.ControllerArch == "" || t.ControllerArch == r.ControllerArch) &&
		(r.CgroupVersion == "" || t.CgroupVersion == r.CgroupVersion) &&
		strings.HasPrefix(t.OperatingSystem, r.OperatingSystem)
}

// engineMatches applies Row.Engine to an Engine version: exact, or a
// prefix when want ends in "." or "-".
func engineMatches(want, version string) bool {
	if want == "" {
		return true
	}
	if strings.HasSuffix(want, ".") || strings.HasSuffix(want, "-") {
		return strings.HasPrefix(version, want)
	}
	return version == want
}

func (r Row) String() string {
	s := fmt.Sprintf("row %s (profile %s", r.Name, r.Profile)
	for _, f := range [][2]string{{"engine", r.Engine}, {"engine commit", r.EngineCommit}, {"containerd", r.Containerd}, {"runc", r.Runc},
		{"storage", r.StorageDriver}, {"runtime", r.Runtime}, {"controller os", r.ControllerOS}, {"controller arch", r.ControllerArch}, {"cgroup v", r.CgroupVersion}, {"os", r.OperatingSystem}} {
		if f[1] != "" {
			s += ", " + f[0] + " " + f[1]
		}
	}
	return s + ")"
}

// Requirement is what a release gate demands beyond "nothing failed":
// the rows that must each have a report with a pinned manifest, each with
// the scenarios that must pass in its reports, and the exact harness.
type Requirement struct {
	Rows    []Row
	Harness HarnessRequirement
	// MaxReportAge, when not zero, refuses a report whose run ended
	// longer ago than this when the gate runs.
	MaxReportAge time.Duration
	// Floors refuse a report whose Engine reports a runtime component
	// below its floor (FloorProblems).
	Floors []Floor
}

// Gate judges merged reports and returns one line per violation that
// fails the gate, nil when the gate passes (docs/qualification.md#gate);
// Judge is the whole gate, with refused reports, row states and
// informational rows' violations.
//
// Without a requirement (req nil) it fails only on failures: a run verdict
// that is not passed, or a scenario that failed in any report. With one,
// also on: a report made without an Engine (EnginelessProblem); a report
// whose tuple matches more than one row; a report without the required
// harness identity (module, catalogue pair, clean revision); a report
// older than MaxReportAge; a report whose runtime components fall below
// the Floors (FloorProblems); a report that matches no row; a report of a
// row that ran a manifest the row does not pin, or that does not list the
// pinned manifest's scenarios, params, policy and user (ManifestProblems);
// a partial report (Run.Selection: qualify run --only/--skip) of a row;
// a required row with no satisfying report (an informational row with no
// report at all is pending, not a violation); a report of a row in which
// one of the row's scenarios that the report's pinned manifest lists, or
// that its catalogue has (rowScenarios), was not run or did not pass (a
// failed one is already named by the matrix line). A violation that concerns only
// informational rows does not fail the gate; an Engineless report and one
// matching several rows always do.
//
// Gate does not judge who signed: a policy's trust entries do that before
// (VerifyTrusted).
func Gate(m *Matrix, reports []*Signed, req *Requirement) []string {
	var out []string
	for _, v := range violations(m, reports, req) {
		if v.Blocking {
			out = append(out, v.Message)
		}
	}
	return out
}

// GateViolation is one thing the gate found wrong.
type GateViolation struct {
	// Columns are the names of the matrix columns (rows, tuple columns or
	// a refused report's own column) it concerns.
	Columns []string `json:"columns"`
	// Blocking is false only for a violation that concerns informational
	// rows alone: it is shown but does not fail the gate.
	Blocking bool   `json:"blocking"`
	Message  string `json:"message"`
}

// violations is Gate's judgement with each violation's columns: a report's
// own violations concern every column of m that lists it, a row's the
// column named by the row. The steps: the matrix's own (run verdicts,
// failed and flaky cells); with a requirement, each report's (report) and
// the rows no report satisfies (unsatisfied).
func violations(m *Matrix, reports []*Signed, req *Requirement) []GateViolation {
	v := &violationList{req: req, informational: map[string]bool{}, colsOf: map[string][]string{}}
	if req != nil {
		for _, r := range req.Rows {
			v.informational[r.Name] = r.Informational
		}
	}
	for _, c := range m.Columns {
		for _, d := range c.Reports {
			if !slices.Contains(v.colsOf[d], c.Key) {
				v.colsOf[d] = append(v.colsOf[d], c.Key)
			}
		}
	}
	v.matrix(m)
	if req == nil {
		return v.out
	}
	v.satisfied, v.matched = make([]int, len(req.Rows)), make([]int, len(req.Rows))
	for _, rep := range reports {
		v.report(rep)
	}
	v.unsatisfied()
	return v.out
}

// violationList is the state of one violations as its steps fill it.
type violationList struct {
	req *Requirement
	out []GateViolation
	// informational marks the informational rows; colsOf lists the
	// matrix columns of each report directory.
	informational map[string]bool
	colsOf        map[string][]string
	// satisfied and matched count, by row, the reports with a pinned
	// manifest and the reports whose tuple matches.
	satisfied, matched []int
}

// add appends a violation concerning cols, blocking unless cols are all
// informational rows (a violation of no column always blocks).
func (v *violationList) add(cols []string, format string, args ...any) {
	blocking := len(cols) == 0
	for _, c := range cols {
		blocking = blocking || !v.informational[c]
	}
	v.out = append(v.out, GateViolation{Columns: cols, Blocking: blocking, Message: fmt.Sprintf(format, args...)})
}

// matrix adds each column's run verdicts other than passed, then each
// failed or flaky cell.
func (v *violationList) matrix(m *Matrix) {
	for _, c := range m.Columns {
		for k, rv := range c.RunVerdicts {
			if rv.Kind != Passed {
				v.add([]string{c.Key}, "%s: report %s: run verdict %s", c.Key, c.Reports[k], rv)
			}
		}
	}
	for i, name := range m.Scenarios {
		for j, c := range m.Columns {
			// A flaky cell (a repeated campaign whose runs disagreed) fails
			// the gate like a failed one (docs/qualification.md#gate).
			if k := m.Cells[i][j].Kind; k == Failed || k == Flaky {
				v.add([]string{c.Key}, "%s: %s: %s", c.Key, name, m.Cells[i][j])
			}
		}
	}
}

// report adds rep's violations: its harness, its age, an Engineless run
// (nothing more is judged of it), its runtime floors, then each row its
// tuple matches (row), or that it matches none.
func (v *violationList) report(rep *Signed) {
	req := v.req
	cols := v.colsOf[rep.Dir]
	for _, why := range req.Harness.Check(rep.Predicate.Harness) {
		v.add(cols, "report %s: %s", rep.Dir, why)
	}
	if age := time.Since(rep.Run.Timing.End); req.MaxReportAge > 0 && age > req.MaxReportAge {
		v.add(cols, "report %s: run ended %s, %s ago, beyond the policy's maxReportAge %s",
			rep.Dir, rep.Run.Timing.End.UTC().Format(time.RFC3339), age.Round(time.Minute), req.MaxReportAge)
	}
	if why := EnginelessProblem(rep); why != "" {
		v.add(nil, "report %s: %s", rep.Dir, why)
		return
	}
	for _, why := range FloorProblems(rep.Run, req.Floors) {
		v.add(cols, "report %s: %s", rep.Dir, why)
	}
	t := rep.Predicate.Tuple
	rowsMatched := 0
	for i, row := range req.Rows {
		if !row.Matches(t) {
			continue
		}
		v.matched[i]++
		if rowsMatched++; rowsMatched == 2 {
			v.add(nil, "report %s: %s", rep.Dir, multipleRowsProblem(t, matchingRows(req.Rows, t)))
		}
		v.row(rep, i, row)
	}
	if rowsMatched == 0 {
		v.add(cols, "report %s (%s) matches no required row", rep.Dir, t.Label())
	}
}

// row adds rep's violations of row i, which its tuple matches: a manifest
// the row does not pin (or the pinned manifest's problems), a partial
// report, and the row's scenarios it did not run or pass.
func (v *violationList) row(rep *Signed, i int, row Row) {
	t := rep.Predicate.Tuple
	rc := []string{row.Name}
	var ran *manifest.Manifest
	if k := slices.Index(row.Manifests, t.ManifestSHA256); k >= 0 {
		v.satisfied[i]++
		if k < len(row.Pinned) && row.Pinned[k] != nil {
			ran = row.Pinned[k]
			for _, p := range ManifestProblems(rep, ran) {
				v.add(rc, "report %s: %s: %s", rep.Dir, row, p)
			}
		}
	} else {
		v.add(rc, "report %s: %s: manifest sha256 %s is not one the row pins (%s)", rep.Dir, row, t.ManifestSHA256, strings.Join(row.Manifests, ", "))
	}
	if sel := rep.Run.Selection; sel != nil {
		// A partial report qualifies nothing for a required row; an
		// informational row shows it (add judges by rc).
		v.add(rc, "report %s: %s: partial report (%s): scenarios not run: %s", rep.Dir, row, sel.Flag(), strings.Join(sel.Skipped, ", "))
	}
	for _, l := range rowScenarios(rep, row, ran) {
		v.add(rc, "%s", l)
	}
}

// unsatisfied adds each row no report with a pinned manifest satisfies:
// every required row, and an informational one that a report matched.
func (v *violationList) unsatisfied() {
	for i, row := range v.req.Rows {
		if v.satisfied[i] == 0 && (!row.Informational || v.matched[i] > 0) {
			v.add([]string{row.Name}, "%s: no report with a pinned manifest", row)
		}
	}
}

// matchingRows names the rows of rows that t matches.
func matchingRows(rows []Row, t Tuple) []string {
	var out []string
	for _, r := range rows {
		if r.Matches(t) {
			out = append(out, r.Name)
		}
	}
	return out
}

// rowScenarios returns a line for each of row's scenarios that rep did
// not run or that did not pass in it, from the signed predicate; failed
// ones are left to the matrix lines. When ran is the parsed pinned
// manifest whose digest rep recorded, a scenario it does not list is not
// required of rep if rep's catalogue predates the scenario
// (ScenarioAddedIn): a row may pin a manifest from before the catalogue
// grew (docs/qualification.md#gate), and its reports are judged by what
// they ran, while a report of a manifest listing the scenario, or one
// made by a catalogue that has it, still owes it; the archived manifest
// run today skips nothing. With ran nil (a manifest the row does not
// pin, or one not parsed) every row scenario is required.
func rowScenarios(rep *Signed, row Row, ran *manifest.Manifest) []string {
	var out []string
	for _, name := range row.Scenarios {
		if ran != nil && !slices.ContainsFunc(ran.Scenarios, func(e manifest.Entry) bool { return e.Name == name }) {
			// A report without harness identity is refused by the
			// harness check already.
			if h := rep.Predicate.Harness; h != nil && h.CatalogueVersion >= ScenarioAddedIn(name) {
				out = append(out, fmt.Sprintf("report %s: %s: required scenario %s was not run: its manifest %s does not list it, but its catalogue v%d has it (since v%d)",
					rep.Dir, row, name, ran.Path, h.CatalogueVersion, ScenarioAddedIn(name)))
			}
			continue
		}
		ran := false
		for _, l := range rep.Predicate.Scenarios {
			if l.Name != name {
				continue
			}
			ran = true
			if l.Verdict.Kind != Passed && l.Verdict.Kind != Failed {
				out = append(out, fmt.Sprintf("report %s: %s: required scenario %s: %s", rep.Dir, row, name, l.Verdict))
			}
		}
		if !ran {
			out = append(out, fmt.Sprintf("report %s: %s: required scenario %s was not run", rep.Dir, row, name))
		}
	}
	return out
}
