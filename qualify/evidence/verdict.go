package evidence

import "fmt"

// NoChecksReason is the failure the runner records for a scenario that ran
// to completion without recording a single check or an explicit verdict:
// it proved nothing, so it cannot pass.
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
