package qualify_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp/cmpopts"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/qualify"
	"github.com/qualbox/qualbox/qualify/evidence"
)

// The plain printer turns each event into today's progress line, and the
// events that had no line (the run's start and end, a concurrent
// scenario's start) into nothing.
func TestPlainProgressLines(t *testing.T) {
	passed := evidence.Verdict{Kind: evidence.Passed}
	skipped := evidence.Verdict{Kind: evidence.Skipped, Reason: evidence.NotSelectedReason}
	failed := evidence.Verdict{Kind: evidence.Failed, Reason: "boom"}
	a := qualify.ProgressEvent{Index: 1, Total: 3, Name: "admission", Dir: "01-admission"}
	b := qualify.ProgressEvent{Index: 2, Total: 3, Name: "isolation"}
	c := qualify.ProgressEvent{Index: 3, Total: 4, Name: "lifecycle", Dir: "03-lifecycle", Repeat: 2, Concurrent: true}
	with := func(e qualify.ProgressEvent, kind qualify.ProgressKind, f func(*qualify.ProgressEvent)) qualify.ProgressEvent {
		e.Kind = kind
		if f != nil {
			f(&e)
		}
		return e
	}
	events := []qualify.ProgressEvent{
		{Kind: qualify.RunStarted, Total: 3, Runs: 2, Parallel: 1, Limit: time.Minute},
		with(a, qualify.ScenarioStarted, func(e *qualify.ProgressEvent) { e.Limit = time.Minute }),
		with(a, qualify.ScenarioHeartbeat, func(e *qualify.ProgressEvent) { e.Elapsed = 30 * time.Second }),
		with(a, qualify.ScenarioHeartbeat, func(e *qualify.ProgressEvent) { e.Elapsed = time.Minute }),
		with(a, qualify.ScenarioDetail, func(e *qualify.ProgressEvent) { e.Line = "admitted 12 checks" }),
		with(a, qualify.ScenarioFinished, func(e *qualify.ProgressEvent) { e.Verdict, e.Elapsed = passed, 1234*time.Millisecond }),
		with(b, qualify.ScenarioSkipped, func(e *qualify.ProgressEvent) { e.Verdict = skipped }),
		with(c, qualify.ScenarioStarted, nil),
		with(c, qualify.ScenarioDetail, func(e *qualify.ProgressEvent) { e.Line = "100% done" }),
		with(c, qualify.ScenarioFinished, func(e *qualify.ProgressEvent) { e.Verdict, e.Elapsed = failed, 50*time.Millisecond }),
		{Kind: qualify.RunFinished, Total: 3},
	}
	var out bytes.Buffer
	p := qualify.PlainProgress(&out)
	for _, e := range events {
		p(e)
	}
	want := []string{
		"[1/3] admission: running",
		"qualify: admission still running after 30s",
		"qualify: admission still running after 1m0s",
		"      admitted 12 checks",
		"[1/3] admission ... passed (1.2s)",
		"[2/3] isolation ... skipped (not run: not selected)",
		"      03-lifecycle: 100% done",
		"[3/4] lifecycle (run 2) ... failed (boom) (0.1s)",
	}
	assert.Check(t, strings.HasSuffix(out.String(), "\n"), "%q", out.String())
	assert.DeepEqual(t, strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"), want)
}

// A run with Config.Progress set sends it every event in order, with the
// scenario's identity, directory, verdict and time limit, and prints no
// plain line on Stderr.
func TestRunEmitsProgressEvents(t *testing.T) {
	cfg, _ := fakeRun(t, fake{}, "log", "fail-check")
	var stderr bytes.Buffer
	var events []qualify.ProgressEvent
	cfg.Stderr, cfg.Verbose, cfg.ScenarioTimeout = &stderr, true, 5*time.Minute
	cfg.Progress = func(e qualify.ProgressEvent) { events = append(events, e) }
	res, err := qualify.Run(context.Background(), cfg)
	assert.NilError(t, err)
	assert.Check(t, is.Equal(stderr.String(), ""), "plain lines besides the events")

	failed := res.Scenarios[1].Verdict
	assert.Check(t, is.Equal(failed.Kind, evidence.Failed))
	one := qualify.ProgressEvent{Index: 1, Total: 2, Name: "fake", Dir: "01-fake"}
	two := qualify.ProgressEvent{Index: 2, Total: 2, Name: "fake", Dir: "02-fake"}
	set := func(e qualify.ProgressEvent, kind qualify.ProgressKind, f func(*qualify.ProgressEvent)) qualify.ProgressEvent {
		e.Kind = kind
		f(&e)
		return e
	}
	want := []qualify.ProgressEvent{
		{Kind: qualify.RunStarted, Total: 2, Runs: 2, Parallel: 1, Limit: 5 * time.Minute},
		set(one, qualify.ScenarioStarted, func(e *qualify.ProgressEvent) { e.Limit = 5 * time.Minute }),
		set(one, qualify.ScenarioDetail, func(e *qualify.ProgressEvent) { e.Line = "detail 1 of log" }),
		set(one, qualify.ScenarioFinished, func(e *qualify.ProgressEvent) { e.Verdict = evidence.Verdict{Kind: evidence.Passed} }),
		set(two, qualify.ScenarioStarted, func(e *qualify.ProgressEvent) { e.Limit = 5 * time.Minute }),
		set(two, qualify.ScenarioFinished, func(e *qualify.ProgressEvent) { e.Verdict = failed }),
		{Kind: qualify.RunFinished, Total: 2},
	}
	assert.DeepEqual(t, events, want, cmpopts.IgnoreFields(qualify.ProgressEvent{}, "Elapsed"))
	// Elapsed is the duration the evidence records.
	for _, e := range events {
		if e.Kind == qualify.ScenarioFinished {
			assert.Check(t, is.Equal(e.Elapsed, time.Duration(res.Scenarios[e.Index-1].DurationMs)*time.Millisecond), e.Label())
		}
	}
}

// With --repeat and --parallel the scenario events are concurrent and
// labelled with their repetition.
func TestRunProgressEventsOfACampaign(t *testing.T) {
	cfg, _ := fakeRun(t, fake{}, "pass", "slow")
	cfg.Repeat, cfg.Parallel = 2, 2
	var events []qualify.ProgressEvent
	cfg.Progress = func(e qualify.ProgressEvent) { events = append(events, e) }
	_, err := qualify.Run(context.Background(), cfg)
	assert.NilError(t, err)
	assert.Assert(t, len(events) > 2)
	assert.Check(t, is.DeepEqual(events[0], qualify.ProgressEvent{Kind: qualify.RunStarted, Total: 4, Runs: 4, Parallel: 2, Limit: qualify.DefaultScenarioTimeout}))
	assert.Check(t, is.Equal(events[len(events)-1].Kind, qualify.RunFinished))
	var labels []string
	for _, e := range events[1 : len(events)-1] {
		assert.Check(t, e.Concurrent, "%+v", e)
		if e.Kind == qualify.ScenarioFinished {
			labels = append(labels, e.Label())
		}
	}
	assert.Check(t, is.DeepEqual(labels, []string{"[1/4] fake (run 1)", "[2/4] fake (run 1)", "[3/4] fake (run 2)", "[4/4] fake (run 2)"},
		cmpopts.SortSlices(func(a, b string) bool { return a < b })))
}
