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
	// Name names the row in gate messages, e.g. "lane-a".
	Name string `yaml:"name" json:"name"`
	// Profile is the platform profile name.
	Profile string `yaml:"profile" json:"profile"`
	// Engine, when set, is a prefix of the Engine version, e.g. "20.10.".
	Engine string `yaml:"engine,omitempty" json:"engine,omitempty"`
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
	// this row (each report, not only the row's column as a whole).
	Scenarios []string `yaml:"scenarios" json:"scenarios"`
}

// Matches reports whether t belongs to the row (manifest aside).
func (r Row) Matches(t Tuple) bool {
	return t.Profile == r.Profile &&
		strings.HasPrefix(t.EngineVersion, r.Engine) &&
		(r.ControllerOS == "" || t.ControllerOS == r.ControllerOS) &&
		(r.ControllerArch == "" || t.ControllerArch == r.ControllerArch) &&
		(r.CgroupVersion == "" || t.CgroupVersion == r.CgroupVersion) &&
		strings.HasPrefix(t.OperatingSystem, r.OperatingSystem)
}

func (r Row) String() string {
	s := fmt.Sprintf("row %s (profile %s", r.Name, r.Profile)
	for _, f := range [][2]string{{"engine", r.Engine}, {"controller os", r.ControllerOS}, {"controller arch", r.ControllerArch}, {"cgroup v", r.CgroupVersion}, {"os", r.OperatingSystem}} {
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
}

// Gate judges merged reports and returns one line per violation, nil when
// the gate passes (docs/qualification.md#gate).
//
// Without a requirement (req nil) it fails only on failures: a run verdict
// that is not passed, or a scenario that failed in any report. With one,
// also on: a report made without an Engine (EnginelessProblem); a report
// whose tuple matches more than one row; a report without the required
// harness identity (module, catalogue pair, clean revision); a report older than MaxReportAge; a
// report that matches no required row; a report of a row that ran a
// manifest the row does not pin, or that does not list the pinned
// manifest's scenarios, params, policy and user (ManifestProblems); a
// required row with no satisfying report; a report of a row in which one
// of the row's scenarios was not run or did not pass (a failed one is
// already named by the matrix line).
//
// Gate does not judge who signed: a policy's trust entries do that before
// (VerifyTrusted).
func Gate(m *Matrix, reports []*Signed, req *Requirement) []string {
	var out []string
	for _, c := range m.Columns {
		for k, v := range c.RunVerdicts {
			if v.Kind != Passed {
				out = append(out, fmt.Sprintf("%s: report %s: run verdict %s", c.Key, c.Reports[k], v))
			}
		}
	}
	for i, name := range m.Scenarios {
		for j, c := range m.Columns {
			// A flaky cell (a repeated campaign whose runs disagreed) fails
			// the gate like a failed one (docs/qualification.md#gate).
			if k := m.Cells[i][j].Kind; k == Failed || k == Flaky {
				out = append(out, fmt.Sprintf("%s: %s: %s", c.Key, name, m.Cells[i][j]))
			}
		}
	}
	if req == nil {
		return out
	}
	satisfied := make([]int, len(req.Rows))
	for _, rep := range reports {
		for _, why := range req.Harness.Check(rep.Predicate.Harness) {
			out = append(out, fmt.Sprintf("report %s: %s", rep.Dir, why))
		}
		if age := time.Since(rep.Run.Timing.End); req.MaxReportAge > 0 && age > req.MaxReportAge {
			out = append(out, fmt.Sprintf("report %s: run ended %s, %s ago, beyond the policy's maxReportAge %s",
				rep.Dir, rep.Run.Timing.End.UTC().Format(time.RFC3339), age.Round(time.Minute), req.MaxReportAge))
		}
		if why := EnginelessProblem(rep); why != "" {
			out = append(out, fmt.Sprintf("report %s: %s", rep.Dir, why))
			continue
		}
		t := rep.Predicate.Tuple
		matched := false
		rowsMatched := 0
		for i, row := range req.Rows {
			if !row.Matches(t) {
				continue
			}
			matched = true
			if rowsMatched++; rowsMatched == 2 {
				out = append(out, fmt.Sprintf("report %s: %s", rep.Dir, multipleRowsProblem(t, matchingRows(req.Rows, t))))
			}
			if k := slices.Index(row.Manifests, t.ManifestSHA256); k >= 0 {
				satisfied[i]++
				if k < len(row.Pinned) && row.Pinned[k] != nil {
					for _, p := range ManifestProblems(rep, row.Pinned[k]) {
						out = append(out, fmt.Sprintf("report %s: %s: %s", rep.Dir, row, p))
					}
				}
			} else {
				out = append(out, fmt.Sprintf("report %s: %s: manifest sha256 %s is not one the row pins (%s)", rep.Dir, row, t.ManifestSHA256, strings.Join(row.Manifests, ", ")))
			}
			out = append(out, rowScenarios(rep, row)...)
		}
		if !matched {
			out = append(out, fmt.Sprintf("report %s (%s) matches no required row", rep.Dir, t.Label()))
		}
	}
	for i, row := range req.Rows {
		if satisfied[i] == 0 {
			out = append(out, fmt.Sprintf("%s: no report with a pinned manifest", row))
		}
	}
	return out
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
// ones are left to the matrix lines.
func rowScenarios(rep *Signed, row Row) []string {
	var out []string
	for _, name := range row.Scenarios {
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
