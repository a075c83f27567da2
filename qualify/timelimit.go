package qualify

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"runtime/pprof"
	"time"

	"github.com/qualbox/qualbox/qualify/evidence"
)

// DefaultScenarioTimeout bounds one scenario run when
// Config.ScenarioTimeout is 0. The slowest scenario of the catalogue takes
// about 70 s on an emulated CPU (docs/lanes.md#lane-c), so the bound only
// catches a scenario that no longer makes progress.
const DefaultScenarioTimeout = 15 * time.Minute

// GoroutinesFile is written into a scenario's directory when the scenario
// runs past its time limit, or does not return after an interruption: the
// stack of every goroutine of the controller at that moment (the
// runtime/pprof "goroutine" profile at debug level 2, text), which shows
// what the scenario was waiting on.
const GoroutinesFile = "goroutines.txt"

// TimeLimitError is the cause with which a scenario's context is cancelled
// when the scenario runs past its time limit.
type TimeLimitError struct {
	// Scenario is the manifest name of the scenario.
	Scenario string
	// Limit is the time limit it exceeded.
	Limit time.Duration
}

func (e *TimeLimitError) Error() string {
	return fmt.Sprintf("scenario %s exceeded its time limit of %s", e.Scenario, e.Limit)
}

// interruptGrace caps the grace period after an interruption: whoever
// interrupted wants the run to end soon (a service manager stopping it
// kills it after its own timeout), and the report still has to be written.
const interruptGrace = time.Minute

// scenarioLimits are the bounds of one scenario run: limit from its start
// until its context is cancelled, then grace (after the time limit) or
// interrupted (after an interruption) for it to clean up and return before
// the run abandons it.
type scenarioLimits struct {
	limit, grace, interrupted time.Duration
}

// limits returns cfg's scenario bounds: ScenarioTimeout (default
// DefaultScenarioTimeout); a grace of ScenarioGrace, by default twice the
// policy's cleanup deadline plus a minute, enough for a cancelled
// scenario's own cleanup (stop, then destroy, each bounded by the cleanup
// deadline); and after an interruption the smaller of that grace and
// interruptGrace.
func (cfg *Config) limits() scenarioLimits {
	l := scenarioLimits{limit: cfg.ScenarioTimeout, grace: cfg.ScenarioGrace}
	if l.limit <= 0 {
		l.limit = DefaultScenarioTimeout
	}
	if l.grace <= 0 {
		l.grace = 2*time.Duration(cfg.Manifest.Policy.Deadlines.CleanupMs)*time.Millisecond + time.Minute
	}
	l.interrupted = min(l.grace, interruptGrace)
	return l
}

// superviseScenario waits for done, the outcome of a scenario running on
// sctx (a child of ctx that cancel cancels). When the time limit passes
// first, it writes GoroutinesFile into dir and cancels sctx with a
// *TimeLimitError, and the scenario has l.grace to return; when ctx is
// cancelled first (an interruption), the scenario sees that through sctx,
// the time limit no longer applies, and it has l.interrupted to return.
// If it does not, superviseScenario writes GoroutinesFile (unless already
// written) and gives up: abandoned is true and the scenario's goroutine is
// left running. timedOut reports whether the time limit passed. dumpErr
// is the error writing GoroutinesFile, if any.
func superviseScenario(ctx context.Context, cancel context.CancelCauseFunc, done <-chan error, name, dir string, l scenarioLimits) (failure error, timedOut, abandoned bool, dumpErr error) {
	limit := time.NewTimer(l.limit)
	defer limit.Stop()
	limitC := limit.C
	var giveUp <-chan time.Time
	interrupted := ctx.Done()
	dumped := false
	dump := func() {
		if !dumped {
			dumped, dumpErr = true, writeGoroutines(filepath.Join(dir, GoroutinesFile))
		}
	}
	for {
		select {
		case failure = <-done:
			return failure, timedOut, false, dumpErr
		case <-limitC:
			limitC = nil
			select {
			case failure = <-done:
				// It returned as the limit passed: not late.
				return failure, false, false, nil
			default:
			}
			timedOut = true
			dump()
			cancel(&TimeLimitError{Scenario: name, Limit: l.limit})
			giveUp = time.After(l.grace)
		case <-interrupted:
			interrupted, limitC = nil, nil
			if giveUp == nil {
				giveUp = time.After(l.interrupted)
			}
		case <-giveUp:
			dump()
			return nil, timedOut, true, dumpErr
		}
	}
}

// writeGoroutines writes every goroutine's stack to path, atomically.
func writeGoroutines(path string) error {
	var b bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&b, 2); err != nil {
		return err
	}
	return evidence.WriteFile(path, b.Bytes())
}
