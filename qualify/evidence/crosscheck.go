package evidence

import (
	"errors"
	"fmt"
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
	c := &crossChecker{r: r, read: read, now: now, referenced: map[string]bool{}}
	files := make([]*Scenario, len(r.Scenarios))
	for i, sum := range r.Scenarios {
		// A manifest may list a scenario twice (with other params); the
		// index and directory tell the entries apart.
		if sum.Index != i+1 {
			c.fail(RunFile, "scenario %d %q has index %d", i+1, sum.Name, sum.Index)
		}
		if sum.Dir == "" {
			c.notRun(sum)
			continue
		}
		files[i] = c.scenario(sum)
	}
	c.subjects(subjects)
	c.run(files)
	return files, errors.Join(c.errs...)
}

// crossChecker is the state of one crossCheck: the report's run evidence,
// how its files are read, the problems so far, and what the scenarios
// listed so far established.
type crossChecker struct {
	r    *Run
	read func(string) ([]byte, error)
	now  time.Time
	errs []error
	// abandoned is the directory of the first abandoned scenario listed.
	abandoned string
	// referenced are the scenario evidence files evidence.json lists.
	referenced map[string]bool
}

// fail records a problem of file as an *attest.FileError.
func (c *crossChecker) fail(file, format string, args ...any) {
	c.errs = append(c.errs, &attest.FileError{File: file, Err: fmt.Errorf(format, args...)})
}

// failAll records each of problems against file.
func (c *crossChecker) failAll(file string, problems []string) {
	for _, p := range problems {
		c.fail(file, "%s", p)
	}
}

// notRun checks a scenario listed without a directory: not run
// (interrupted, or a scenario abandoned, before it, or not selected), so
// no evidence and no checks.
func (c *crossChecker) notRun(sum ScenarioSummary) {
	r := c.r
	if sum.Verdict.Kind != Skipped || sum.Checks != 0 {
		c.fail(RunFile, "scenario %q has no evidence directory but verdict %s and %d checks", sum.Name, sum.Verdict, sum.Checks)
	}
	switch {
	case r.Selection != nil && !r.Selection.Selected(sum.Name):
		// Not selected (qualify run --only/--skip): selectionProblems
		// checks its reason.
	case sum.Abandoned:
		c.fail(RunFile, "scenario %d %q is abandoned but has no evidence directory", sum.Index, sum.Name)
	case !r.Interrupted && c.abandoned == "":
		c.fail(RunFile, "scenario %d %q is listed as not run, but the run was not interrupted and no scenario before it was abandoned", sum.Index, sum.Name)
	}
}

// scenario reads the evidence of a scenario listed with a directory and
// checks it against its summary line; nil when it cannot be read.
func (c *crossChecker) scenario(sum ScenarioSummary) *Scenario {
	if sum.Abandoned && c.abandoned == "" {
		c.abandoned = sum.Dir
	}
	file := sum.Dir + "/" + ScenarioFile
	if want := fmt.Sprintf("%02d-%s", sum.Index, sum.Name); sum.Dir != want {
		c.fail(RunFile, "scenario %q: directory %q, want %q", sum.Name, sum.Dir, want)
		return nil
	}
	c.referenced[file] = true
	data, err := c.read(file)
	if err != nil {
		c.fail(file, "%v", err)
		return nil
	}
	var s Scenario
	if err := attest.StrictJSONFile(data, file, &s); err != nil {
		c.fail(file, "%v", err)
		return nil
	}
	if _, why := RecomputeVerdict(&s); why != "" {
		c.fail(file, "%s", why)
	}
	if s.Abandoned != sum.Abandoned {
		c.fail(file, "abandoned %t, but evidence.json says %t", s.Abandoned, sum.Abandoned)
	}
	if s.Repeat != sum.Repeat {
		c.fail(file, "repeat %d, but evidence.json says %d", s.Repeat, sum.Repeat)
	}
	c.failAll(file, resourceProblems(c.r, &s))
	c.failAll(file, scenarioTimeProblems(c.r, sum, &s, c.now))
	c.failAll(file, machineProblems(c.r, &s))
	c.failAll(file, emulationProblems(c.r, &s))
	c.failAll(file, usernsProblems(c.r, &s))
	c.failAll(file, engineAPIProblems(c.r, &s))
	switch {
	case s.Verdict != sum.Verdict:
		c.fail(file, "verdict %s, but evidence.json says %s", s.Verdict, sum.Verdict)
	case len(s.Checks) != sum.Checks || s.PassedChecks() != sum.Passed:
		c.fail(file, "%d/%d checks passed, but evidence.json says %d/%d", s.PassedChecks(), len(s.Checks), sum.Passed, sum.Checks)
	}
	return &s
}

// subjects checks that every signed file has its place: scenario evidence
// that evidence.json lists, a top-level file of the Layout, or a file in
// a scenario directory evidence.json lists.
func (c *crossChecker) subjects(subjects []string) {
	dirs := map[string]bool{}
	for _, sum := range c.r.Scenarios {
		if sum.Dir != "" {
			dirs[sum.Dir] = true
		}
	}
	top := TopFiles(false)
	for _, f := range subjects {
		switch dir, _, nested := strings.Cut(f, "/"); {
		case isScenarioEvidence(f) && !c.referenced[f]:
			c.fail(f, "scenario evidence that evidence.json does not list")
		case !nested && !slices.Contains(top, f):
			c.fail(f, "a file the report layout does not have: the top of a report holds only %s (docs/qualification.md#evidence)", strings.Join(top, ", "))
		case nested && !dirs[dir]:
			c.fail(f, "in directory %s/, which is no scenario directory evidence.json lists", dir)
		}
	}
}

// run checks the run evidence's own claims and the run-level files that
// the Layout cross-checks against it.
func (c *crossChecker) run(files []*Scenario) {
	r := c.r
	if why := runVerdictProblem(r); why != "" {
		c.fail(RunFile, "%s", why)
	}
	for _, check := range []func(*Run) []string{hostProblems, tupleProblems, postureProblems, imageProblems, imageInputsProblems, binfmtProblems} {
		c.failAll(RunFile, check(r))
	}
	c.failAll(RunFile, timingProblems("run", r.Timing, c.now))
	c.failAll(RunFile, selectionProblems(r))
	c.failAll(RunFile, campaignProblems(r))
	for _, f := range Layout {
		if f.check == nil {
			continue
		}
		if data, err := c.read(f.Name); err == nil {
			c.failAll(f.Name, f.check(r, files, data))
		}
	}
}

// isScenarioEvidence reports whether a subject name is a scenario's
// evidence file.
func isScenarioEvidence(name string) bool {
	f, ok := FileOf(name)
	return ok && f.Name == ScenarioDir+"/"+ScenarioFile
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
	for i := range n {
		for k := 1; k < c.Repeat; k++ {
			if s := r.Scenarios[k*n+i]; s.Name != r.Scenarios[i].Name {
				out = append(out, fmt.Sprintf("campaign entry %d is %q in repeat 1 but %q in repeat %d", i+1, r.Scenarios[i].Name, s.Name, k+1))
			}
		}
	}
	for i, want := range Tally(r.Scenarios, c.Repeat) {
		if got := c.Scenarios[i]; got != want {
			out = append(out, fmt.Sprintf("campaign tally %q, but its runs say %q", got, want))
		}
	}
	return out
}
