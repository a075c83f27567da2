package evidence

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/qualbox/qualbox/qualify/attest"
)

// Cross-checks of a verified report (docs/qualification.md#evidence): every
// signed file must tell the same story as evidence.json, and every verdict
// must follow from the checks behind it. A signer is trusted for integrity,
// not for consistency: a report whose summary.md says passed over a failed
// scenario file, or whose scenario says passed with a failed check, is
// rejected, naming the file.

// RecomputeVerdict derives a scenario's verdict from its own evidence with
// the harness's rule: failed on a failure, a failed check, a cleanup
// error, a resource recorded present after cleanup or an abandonment;
// otherwise its recorded skipped or not_applicable verdict (which
// needs a reason), or passed, which needs at least one check. It returns
// the verdict and, when the recorded verdict disagrees, why.
func RecomputeVerdict(s *Scenario) (Verdict, string) {
	var failedCheck string
	for _, c := range s.Checks {
		if !c.OK {
			failedCheck = c.Name
			break
		}
	}
	leaked := leakedResource(s)
	switch {
	case s.Failure != "" || failedCheck != "" || len(s.CleanupErrors) > 0 || leaked != "" || s.Abandoned:
		if s.Verdict.Kind != Failed {
			why := "its failure"
			switch {
			case failedCheck != "":
				why = fmt.Sprintf("check %q failed", failedCheck)
			case len(s.CleanupErrors) > 0:
				why = "it has cleanup errors"
			case leaked != "":
				why = "resource " + leaked + " is recorded present after cleanup"
			case s.Abandoned:
				why = "it was abandoned"
			}
			return Verdict{Kind: Failed}, fmt.Sprintf("verdict %s, but %s", s.Verdict, why)
		}
		return s.Verdict, ""
	case s.Verdict.Kind == Failed:
		return Verdict{Kind: Passed}, "verdict failed without a failure, a failed check or a cleanup error"
	case s.Verdict.Kind == Skipped || s.Verdict.Kind == NotApplicable:
		if s.Verdict.Reason == "" {
			return s.Verdict, fmt.Sprintf("verdict %s without a reason", s.Verdict.Kind)
		}
		return s.Verdict, ""
	case s.Verdict.Kind != Passed:
		return s.Verdict, fmt.Sprintf("unknown verdict kind %q", s.Verdict.Kind)
	case len(s.Checks) == 0:
		return Verdict{Kind: Failed}, "verdict passed with no checks recorded"
	}
	return s.Verdict, ""
}

// leakedResource names the first of s's resources recorded present after
// cleanup ("compute qb-x"), or "".
func leakedResource(s *Scenario) string {
	for _, r := range s.Resources {
		if r.Absent != nil && !*r.Absent {
			return r.Role + " " + r.Name
		}
	}
	return ""
}

// runVerdictProblem says why r.Verdict does not follow from its scenarios,
// its image cleanup, its header admission and its interruption, or "".
func runVerdictProblem(r *Run) string {
	var cause string
	for _, s := range r.Scenarios {
		if !s.Verdict.OK() {
			cause = "scenario " + s.Name + " " + string(s.Verdict.Kind)
			break
		}
	}
	switch {
	case r.Interrupted:
		cause = "the run was interrupted"
	case r.Image.RemoveError != "" || (r.Image.Removed != nil && !*r.Image.Removed):
		cause = "the guest image was not removed"
	case admissionRefused(r):
		cause = "its admission refused profile " + r.Profile
	}
	switch {
	case cause != "" && r.Verdict.Kind != Failed:
		return fmt.Sprintf("run verdict %s, but %s", r.Verdict, cause)
	case cause == "" && r.Verdict.Kind != Passed:
		return fmt.Sprintf("run verdict %s, but no scenario failed, its admission did not refuse and the run was neither interrupted nor left its image", r.Verdict)
	}
	return ""
}

// crossCheck compares the signed files of a report with its evidence.json
// (already decoded into r) and checks its claims (claims.go) at time now.
// subjects are the signed statement's subject names. It
// returns the decoded scenario evidence by r.Scenarios index (nil when not
// run or unreadable); problems are *attest.FileError values, joined.
func crossCheck(r *Run, subjects []string, read func(string) ([]byte, error), now time.Time) ([]*Scenario, error) {
	var errs []error
	fail := func(file, format string, args ...any) {
		errs = append(errs, &attest.FileError{File: file, Err: fmt.Errorf(format, args...)})
	}
	files := make([]*Scenario, len(r.Scenarios))
	abandoned := "" // the directory of an abandoned scenario listed so far
	referenced := map[string]bool{}
	for i, sum := range r.Scenarios {
		// A manifest may list a scenario twice (with other params); the
		// index and directory tell the entries apart.
		if sum.Index != i+1 {
			fail("evidence.json", "scenario %d %q has index %d", i+1, sum.Name, sum.Index)
		}
		if sum.Dir == "" {
			// Not run (interrupted, or a scenario abandoned, before it):
			// no evidence, no checks.
			if sum.Verdict.Kind != Skipped || sum.Checks != 0 {
				fail("evidence.json", "scenario %q has no evidence directory but verdict %s and %d checks", sum.Name, sum.Verdict, sum.Checks)
			}
			switch {
			case r.Selection != nil && !r.Selection.Selected(sum.Name):
				// Not selected (qualify run --only/--skip): selectionProblems
				// checks its reason.
			case sum.Abandoned:
				fail("evidence.json", "scenario %d %q is abandoned but has no evidence directory", sum.Index, sum.Name)
			case !r.Interrupted && abandoned == "":
				fail("evidence.json", "scenario %d %q is listed as not run, but the run was not interrupted and no scenario before it was abandoned", sum.Index, sum.Name)
			}
			continue
		}
		if sum.Abandoned && abandoned == "" {
			abandoned = sum.Dir
		}
		file := sum.Dir + "/evidence.json"
		if want := fmt.Sprintf("%02d-%s", sum.Index, sum.Name); sum.Dir != want {
			fail("evidence.json", "scenario %q: directory %q, want %q", sum.Name, sum.Dir, want)
			continue
		}
		referenced[file] = true
		data, err := read(file)
		if err != nil {
			fail(file, "%v", err)
			continue
		}
		var s Scenario
		if err := attest.StrictJSONFile(data, file, &s); err != nil {
			fail(file, "%v", err)
			continue
		}
		files[i] = &s
		if _, why := RecomputeVerdict(&s); why != "" {
			fail(file, "%s", why)
		}
		if s.Abandoned != sum.Abandoned {
			fail(file, "abandoned %t, but evidence.json says %t", s.Abandoned, sum.Abandoned)
		}
		if s.Repeat != sum.Repeat {
			fail(file, "repeat %d, but evidence.json says %d", s.Repeat, sum.Repeat)
		}
		for _, p := range resourceProblems(r, &s) {
			fail(file, "%s", p)
		}
		for _, p := range scenarioTimeProblems(r, sum, &s, now) {
			fail(file, "%s", p)
		}
		for _, p := range machineProblems(r, &s) {
			fail(file, "%s", p)
		}
		switch {
		case s.Verdict != sum.Verdict:
			fail(file, "verdict %s, but evidence.json says %s", s.Verdict, sum.Verdict)
		case len(s.Checks) != sum.Checks || s.PassedChecks() != sum.Passed:
			fail(file, "%d/%d checks passed, but evidence.json says %d/%d", s.PassedChecks(), len(s.Checks), sum.Passed, sum.Checks)
		}
	}
	dirs := map[string]bool{}
	for _, sum := range r.Scenarios {
		if sum.Dir != "" {
			dirs[sum.Dir] = true
		}
	}
	for _, f := range subjects {
		switch top, _, nested := strings.Cut(f, "/"); {
		case isScenarioEvidence(f) && !referenced[f]:
			fail(f, "scenario evidence that evidence.json does not list")
		case !nested && !slices.Contains(reportFiles, f):
			fail(f, "a file the report layout does not have: the top of a report holds only %s (docs/qualification.md#evidence)", strings.Join(reportFiles, ", "))
		case nested && !dirs[top]:
			fail(f, "in directory %s/, which is no scenario directory evidence.json lists", top)
		}
	}
	if why := runVerdictProblem(r); why != "" {
		fail("evidence.json", "%s", why)
	}
	for _, check := range []func(*Run) []string{hostProblems, tupleProblems, imageProblems} {
		for _, p := range check(r) {
			fail("evidence.json", "%s", p)
		}
	}
	for _, p := range timingProblems("run", r.Timing, now) {
		fail("evidence.json", "%s", p)
	}
	for _, p := range selectionProblems(r) {
		fail("evidence.json", "%s", p)
	}
	for _, p := range campaignProblems(r) {
		fail("evidence.json", "%s", p)
	}
	if data, err := read("summary.md"); err == nil {
		for _, p := range summaryProblems(r, data) {
			fail("summary.md", "%s", p)
		}
	}
	if data, err := read("junit.xml"); err == nil {
		for _, p := range junitProblems(r, data) {
			fail("junit.xml", "%s", p)
		}
	}
	return files, errors.Join(errs...)
}

// reportFiles are the files at the top of a report besides the envelope;
// everything else lies in a scenario's directory.
var reportFiles = []string{"evidence.json", "summary.md", "junit.xml", TestResultFile}

// isScenarioEvidence reports whether a subject name is a scenario's
// evidence file.
func isScenarioEvidence(name string) bool {
	return scenarioEvidence.MatchString(name) && path.Dir(name) != "."
}

// campaignProblems recomputes a repeated campaign's per-entry tallies from
// the runs the report lists and compares them with the recorded ones: the
// matrix and the gate read a campaign's verdicts from its tallies, so a
// tally must be what its runs say (docs/qualification.md#evidence).
func campaignProblems(r *Run) []string {
	c := r.Campaign
	if c == nil || c.Repeat <= 1 {
		if c != nil && len(c.Scenarios) > 0 {
			return []string{fmt.Sprintf("campaign of repeat %d carries %d tallies", c.Repeat, len(c.Scenarios))}
		}
		return nil
	}
	if len(r.Scenarios)%c.Repeat != 0 || len(c.Scenarios) != len(r.Scenarios)/c.Repeat {
		return []string{fmt.Sprintf("campaign of repeat %d lists %d runs and %d tallies", c.Repeat, len(r.Scenarios), len(c.Scenarios))}
	}
	var out []string
	n := len(c.Scenarios)
	for i, got := range c.Scenarios {
		want := CampaignScenario{Index: i + 1, Name: r.Scenarios[i].Name}
		var verdicts []Verdict
		for k := 0; k < c.Repeat; k++ {
			s := r.Scenarios[k*n+i]
			if s.Name != want.Name {
				out = append(out, fmt.Sprintf("campaign entry %d is %q in repeat 1 but %q in repeat %d", i+1, want.Name, s.Name, k+1))
			}
			if s.Dir == "" {
				continue // not run: interrupted, or after an abandoned scenario
			}
			want.Runs++
			if s.Verdict.Kind == Passed {
				want.Passes++
			}
			verdicts = append(verdicts, s.Verdict)
		}
		want.Verdict = CombineRuns(verdicts)
		if got != want {
			out = append(out, fmt.Sprintf("campaign tally %q, but its runs say %q", got, want))
		}
	}
	return out
}
