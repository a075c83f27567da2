package qualify

import (
	"fmt"
	"io"
	"time"

	"github.com/qualbox/qualbox/qualify/evidence"
)

// ProgressKind says what a ProgressEvent reports.
type ProgressKind int

// The events of a run, in the order Run emits them: RunStarted once, then
// for each scenario run either ScenarioSkipped, or ScenarioStarted, any
// number of ScenarioHeartbeat and ScenarioDetail, and ScenarioFinished;
// then RunFinished once. With Config.Parallel > 1 the events of
// concurrent scenarios interleave.
const (
	// RunStarted: the campaign starts. Total, Runs, Parallel and Limit
	// are set; the scenario fields are zero.
	RunStarted ProgressKind = iota
	// ScenarioStarted: a scenario run starts (its directory exists).
	ScenarioStarted
	// ScenarioHeartbeat: the scenario is still running after Elapsed.
	ScenarioHeartbeat
	// ScenarioDetail: a detail line of the scenario (Config.Verbose), in
	// Line.
	ScenarioDetail
	// ScenarioFinished: the scenario returned (or was abandoned) and its
	// evidence is written; Verdict and Elapsed are set.
	ScenarioFinished
	// ScenarioSkipped: the scenario run did not start: not selected
	// (evidence.NotSelectedReason), or not run after an interruption or
	// an abandoned scenario. Verdict says which.
	ScenarioSkipped
	// RunFinished: no more scenario event follows. Run emits it before it
	// writes the report, also when the campaign stopped on an error.
	RunFinished
)

// ProgressEvent is one step of a run, for Config.Progress.
type ProgressEvent struct {
	Kind ProgressKind
	// Index is the scenario run's campaign-wide index, 1..Total: the k
	// of its directory "<kk>-<name>".
	Index int
	// Total is the number of scenario runs in the campaign: the manifest's
	// entries times the repeat count, selected or not.
	Total int
	// Runs (RunStarted only) is how many of Total are selected to run.
	Runs int
	// Parallel (RunStarted only) is how many scenarios may run at once,
	// at least 1.
	Parallel int
	// Limit is the time limit of one scenario run (Config.ScenarioTimeout
	// or DefaultScenarioTimeout); set on RunStarted and ScenarioStarted.
	Limit time.Duration
	// Name is the scenario's manifest name.
	Name string
	// Repeat is the 1-based repetition of a repeated campaign
	// (Config.Repeat > 1), else 0.
	Repeat int
	// Dir is the scenario run's directory name in the report, "<kk>-<name>";
	// empty for ScenarioSkipped.
	Dir string
	// Concurrent is set when scenarios may run at once (Config.Parallel >
	// 1): the plain lines then name the directory in detail lines and
	// print no "running" line.
	Concurrent bool
	// Verdict is the outcome (ScenarioFinished, ScenarioSkipped).
	Verdict evidence.Verdict
	// Elapsed is the scenario's run time (ScenarioFinished) or the time
	// it has been running, a multiple of Config.Heartbeat
	// (ScenarioHeartbeat).
	Elapsed time.Duration
	// Line is the detail line, without its newline (ScenarioDetail).
	Line string
}

// Label is the event's scenario label in progress lines: "[k/total] name",
// plus " (run r)" in a repeated campaign.
func (e ProgressEvent) Label() string {
	l := fmt.Sprintf("[%d/%d] %s", e.Index, e.Total, e.Name)
	if e.Repeat > 0 {
		l += fmt.Sprintf(" (run %d)", e.Repeat)
	}
	return l
}

// PlainProgress returns the progress observer that prints the plain
// progress lines on w, each ending in a newline: "[k/n] NAME: running"
// when a scenario starts (not when scenarios run concurrently),
// "[k/n] NAME ... VERDICT (DURATION)" when it ends, "[k/n] NAME ...
// VERDICT" for a skipped one, "qualify: NAME still running after D" for
// a heartbeat, and detail lines indented by six spaces (and prefixed
// with the directory name when concurrent). It is what Run uses when
// Config.Progress is nil. Each event is one Write; w nil discards.
func PlainProgress(w io.Writer) func(ProgressEvent) {
	w = orDiscard(w)
	return func(e ProgressEvent) {
		switch e.Kind {
		case ScenarioStarted:
			if !e.Concurrent {
				fmt.Fprintf(w, "%s: running\n", e.Label())
			}
		case ScenarioHeartbeat:
			fmt.Fprintf(w, "qualify: %s still running after %s\n", e.Name, e.Elapsed)
		case ScenarioDetail:
			prefix := "      "
			if e.Concurrent {
				prefix += e.Dir + ": "
			}
			fmt.Fprintf(w, "%s%s\n", prefix, e.Line)
		case ScenarioFinished:
			fmt.Fprintf(w, "%s ... %s (%s)\n", e.Label(), e.Verdict, evidence.FormatDuration(e.Elapsed))
		case ScenarioSkipped:
			fmt.Fprintf(w, "%s ... %s\n", e.Label(), e.Verdict)
		}
	}
}
