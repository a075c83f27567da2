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
// It is evidence.GoroutinesFile of the report layout.
const GoroutinesFile = evidence.GoroutinesFile

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

// interruptGrace caps the grace period after an interruption, and
// interruptChecks the time for all absence checks of the interrupted
// scenario: whoever interrupted wants the run to end soon (a service
// manager stopping it kills it after its own timeout), and the report
// still has to be written.
const (
	interruptGrace  = time.Minute
	interruptChecks = 30 * time.Second
)

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
// deadline); and after an interruption InterruptGrace, by default the
// smaller of that grace and interruptGrace.
func (cfg *Config) limits() scenarioLimits {
	l := scenarioLimits{limit: cfg.ScenarioTimeout, grace: cfg.ScenarioGrace}
	if l.limit <= 0 {
		l.limit = DefaultScenarioTimeout
	}
	if l.grace <= 0 {
		l.grace = 2*time.Duration(cfg.Manifest.Policy.Deadlines.CleanupMs)*time.Millisecond + time.Minute
	}
	l.interrupted = cfg.InterruptGrace
	if l.interrupted <= 0 {
		l.interrupted = min(l.grace, interruptGrace)
	}
	return l
}

// supervision is how a supervised scenario ended.
type supervision struct {
	// failure is what the scenario returned (nil when abandoned).
	failure error
	// timedOut: the time limit passed before it returned.
	timedOut bool
	// abandoned: it did not return within the grace period.
	abandoned bool
	// grace is the grace period that applied last, and afterInterrupt
	// whether an interruption started it (else the time limit did).
	grace          time.Duration
	afterInterrupt bool
	// dumpErr is the error writing GoroutinesFile, if any.
	dumpErr error
}

// superviseScenario waits for done, the outcome of a scenario running on
// sctx (a child of ctx that cancel cancels). When the time limit passes
// first, it writes GoroutinesFile into dir and cancels sctx with a
// *TimeLimitError, and the scenario has l.grace to return; when ctx is
// cancelled first (an interruption), the scenario sees that through sctx,
// the time limit no longer applies, and it has l.interrupted to return. An
// interruption after the time limit shortens what is left of the grace to
// l.interrupted. If it does not return in time, superviseScenario writes
// GoroutinesFile (unless already written) and gives up: the scenario's
// goroutine is left running.
func superviseScenario(ctx context.Context, cancel context.CancelCauseFunc, done <-chan error, name, dir string, l scenarioLimits) supervision {
	limit := time.NewTimer(l.limit)
	defer limit.Stop()
	limitC := limit.C
	var giveUp <-chan time.Time
	var giveUpAt time.Time
	interrupted := ctx.Done()
	var s supervision
	dumped := false
	dump := func() {
		if !dumped {
			dumped, s.dumpErr = true, writeGoroutines(filepath.Join(dir, GoroutinesFile))
		}
	}
	for {
		select {
		case s.failure = <-done:
			return s
		case <-limitC:
			limitC = nil
			select {
			case s.failure = <-done:
				// It returned as the limit passed: not late.
				return s
			default:
			}
			s.timedOut = true
			dump()
			cancel(&TimeLimitError{Scenario: name, Limit: l.limit})
			giveUp, giveUpAt, s.grace = time.After(l.grace), time.Now().Add(l.grace), l.grace
		case <-interrupted:
			interrupted, limitC = nil, nil
			if giveUp == nil || time.Until(giveUpAt) > l.interrupted {
				giveUp, giveUpAt = time.After(l.interrupted), time.Now().Add(l.interrupted)
				s.grace, s.afterInterrupt = l.interrupted, true
			}
		case <-giveUp:
			dump()
			s.abandoned = true
			return s
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
