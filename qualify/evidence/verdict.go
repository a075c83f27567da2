package evidence

import "fmt"

// NoChecksReason is the failure the runner records for a scenario that ran
// to completion without recording a single check or an explicit verdict:
// it proved nothing, so it cannot pass.
const NoChecksReason = "no checks recorded"

// ScenarioVerdict derives a scenario's verdict from its evidence: failed
// ("interrupted") when interrupted; failed on a failure, a failed check, a
// cleanup error, a resource recorded present after cleanup or an
// abandonment; otherwise the scenario's own explicit skip or
// not-applicable verdict when it gave one; failed (NoChecksReason) when it
// recorded no check, since a scenario that checked nothing proved nothing;
// passed otherwise (docs/qualification.md#evidence).
func ScenarioVerdict(s *Scenario, explicit *Verdict, interrupted bool) Verdict {
	switch {
	case interrupted:
		return Verdict{Kind: Failed, Reason: "interrupted"}
	case s.Failure != "" || s.PassedChecks() < len(s.Checks) || len(s.CleanupErrors) > 0 || leakedResource(s) != "" || s.Abandoned:
		return Verdict{Kind: Failed}
	case explicit != nil:
		return *explicit
	case len(s.Checks) == 0:
		return Verdict{Kind: Failed, Reason: NoChecksReason}
	}
	return Verdict{Kind: Passed}
}

// CombineRuns is the verdict of a manifest entry run several times, from
// the verdicts of its runs: their common verdict when they all agree,
// flaky ("passed k of n") when some failed and others did not. A scenario
// must pass every run to pass a campaign; flaky fails it like failed.
func CombineRuns(runs []Verdict) Verdict {
	if len(runs) == 0 {
		return Verdict{Kind: Skipped, Reason: "not run"}
	}
	first, passes, failed, same := runs[0], 0, 0, true
	for _, v := range runs {
		switch v.Kind {
		case Passed:
			passes++
		case Failed, Flaky:
			failed++
		}
		same = same && v.Kind == first.Kind
	}
	switch {
	case failed == len(runs):
		return Verdict{Kind: Failed}
	case failed > 0 || !same:
		return Verdict{Kind: Flaky, Reason: fmt.Sprintf("passed %d of %d", passes, len(runs))}
	}
	return first
}

// RunVerdict is the run verdict the runner signs, from r's scenarios,
// image cleanup, header admission and interruption: failed
// ("interrupted") when interrupted; failed ("guest image not removed:
// ...") when the image the run built is recorded not removed; failed
// ("admission refused: ...") when the header admission of an Engine
// refused the profile (not ok, or an error); failed when a scenario failed
// or was flaky; passed otherwise. Verification recomputes it
// (docs/qualification.md#evidence).
func RunVerdict(r *Run) Verdict {
	switch {
	case r.Interrupted:
		return Verdict{Kind: Failed, Reason: "interrupted"}
	case r.Image.Removed != nil && !*r.Image.Removed || r.Image.RemoveError != "":
		return Verdict{Kind: Failed, Reason: "guest image not removed: " + r.Image.RemoveError}
	case admissionRefused(r):
		why := r.Admission.Error
		if why == "" {
			why = "not admitted"
		}
		return Verdict{Kind: Failed, Reason: "admission refused: " + why}
	}
	for _, s := range r.Scenarios {
		if !s.Verdict.OK() {
			return Verdict{Kind: Failed}
		}
	}
	return Verdict{Kind: Passed}
}

// Tally counts each manifest entry's runs of a campaign repeated repeat
// times (repeat >= 1): runs are the campaign's runs in campaign order,
// repetition after repetition of the same len(runs)/repeat entries, and
// entry i's tally (1-based Index i+1, the name of its first run) counts
// its runs that have an evidence directory (one not run is left out), its
// passes, and the verdict they combine to (CombineRuns). The harness
// writes Campaign.Scenarios with it and VerifyRun recomputes them with it
// (docs/qualification.md#evidence). It returns nil when runs is empty and
// panics when repeat does not divide len(runs).
func Tally(runs []ScenarioSummary, repeat int) []CampaignScenario {
	if repeat < 1 || len(runs)%repeat != 0 {
		panic(fmt.Sprintf("evidence: Tally of %d runs in %d repeats", len(runs), repeat))
	}
	n := len(runs) / repeat
	var out []CampaignScenario
	for i := 0; i < n; i++ {
		t := CampaignScenario{Index: i + 1, Name: runs[i].Name}
		var verdicts []Verdict
		for k := 0; k < repeat; k++ {
			s := runs[k*n+i]
			if s.Dir == "" {
				continue // not run: interrupted, or after an abandoned scenario
			}
			t.Runs++
			if s.Verdict.Kind == Passed {
				t.Passes++
			}
			verdicts = append(verdicts, s.Verdict)
		}
		t.Verdict = CombineRuns(verdicts)
		out = append(out, t)
	}
	return out
}
