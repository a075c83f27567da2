package evidence

import "fmt"

// NoChecksReason is the reason of the failed verdict of a scenario that
// ran to completion without recording a single check.
const NoChecksReason = "no checks recorded"

// ScenarioVerdict derives a scenario's verdict from its evidence: failed
// ("interrupted") when interrupted; failed on a failure, a failed check or
// a cleanup error; otherwise the scenario's own explicit skip or
// not-applicable verdict when it gave one; failed (NoChecksReason) when it
// recorded no check, since a scenario that checked nothing proved nothing;
// passed otherwise (docs/qualification.md#evidence).
func ScenarioVerdict(s *Scenario, explicit *Verdict, interrupted bool) Verdict {
	switch {
	case interrupted:
		return Verdict{Kind: Failed, Reason: "interrupted"}
	case s.Failure != "" || s.PassedChecks() < len(s.Checks) || len(s.CleanupErrors) > 0:
		return Verdict{Kind: Failed}
	case explicit != nil:
		return *explicit
	case len(s.Checks) == 0:
		return Verdict{Kind: Failed, Reason: NoChecksReason}
	}
	return Verdict{Kind: Passed}
}

// CombineRuns is the verdict of a manifest entry run several times: the
// runs' common verdict when they all agree (failed when all failed), flaky
// when they disagree, e.g. 19 of 20 passed. A scenario must pass every run
// to pass the campaign.
func CombineRuns(runs []ScenarioRun) Verdict {
	if len(runs) == 0 {
		return Verdict{Kind: Skipped, Reason: "not run"}
	}
	first, passes, same := runs[0].Verdict, 0, true
	for _, r := range runs {
		if r.Verdict.Kind == Passed {
			passes++
		}
		same = same && r.Verdict.Kind == first.Kind
	}
	if !same {
		return Verdict{Kind: Flaky, Reason: fmt.Sprintf("passed %d of %d", passes, len(runs))}
	}
	if first.Kind == Failed {
		return Verdict{Kind: Failed}
	}
	return first
}
