package termprogress

import (
	"bytes"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/qualify"
	"github.com/qualbox/qualbox/qualify/evidence"
)

// syncBuffer is a bytes.Buffer that the test reads while mpb writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor waits until out matches re, failing the test after 10 s.
func waitFor(t *testing.T, out *syncBuffer, re string) {
	t.Helper()
	r := regexp.MustCompile(re)
	deadline := time.Now().Add(10 * time.Second)
	for !r.MatchString(out.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("display never showed %q:\n%s", re, out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Driven with a run's events into a buffer, the display draws a bar per
// running scenario with its label, the campaign's N/M and time left, a
// line per finished scenario, none of the plain progress lines, and once
// closed leaves no goroutine behind.
func TestDisplayShowsTheRun(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out syncBuffer
	d := New(&out, Options{Width: 120, RefreshRate: 5 * time.Millisecond})
	ev := func(kind qualify.ProgressKind, index int, name string) qualify.ProgressEvent {
		return qualify.ProgressEvent{Kind: kind, Index: index, Total: 3, Name: name, Dir: "0" + string(rune('0'+index)) + "-" + name, Limit: time.Minute}
	}
	d.Event(qualify.ProgressEvent{Kind: qualify.RunStarted, Total: 3, Runs: 2, Parallel: 1, Limit: time.Minute})
	waitFor(t, &out, `scenarios +0/3 .*at most 2m0s left \(by the time limits\)`)

	skipped := ev(qualify.ScenarioSkipped, 2, "isolation")
	skipped.Verdict = evidence.Verdict{Kind: evidence.Skipped, Reason: evidence.NotSelectedReason}
	d.Event(skipped)
	d.Event(ev(qualify.ScenarioStarted, 1, "admission"))
	waitFor(t, &out, `⠋ \[1/3\] admission [0-9.]+m?s \(limit 1m0s\)`)
	waitFor(t, &out, `scenarios +1/3`)
	d.Event(ev(qualify.ScenarioHeartbeat, 1, "admission"))
	detail := ev(qualify.ScenarioDetail, 1, "admission")
	detail.Line = "admitted 12 checks"
	d.Event(detail)
	finished := ev(qualify.ScenarioFinished, 1, "admission")
	finished.Verdict, finished.Elapsed = evidence.Verdict{Kind: evidence.Passed}, 1234*time.Millisecond
	d.Event(finished)
	waitFor(t, &out, `scenarios +2/3`)

	d.Event(ev(qualify.ScenarioStarted, 3, "lifecycle"))
	waitFor(t, &out, `\[3/3\] lifecycle +[0-9.]+m?s`)
	// One run finished: the estimate from its duration comes first.
	waitFor(t, &out, `~1s left \(at most 1m0s by the time limits\)`)
	finished = ev(qualify.ScenarioFinished, 3, "lifecycle")
	finished.Verdict, finished.Elapsed = evidence.Verdict{Kind: evidence.Failed, Reason: "boom"}, 50*time.Millisecond
	d.Event(finished)
	d.Event(qualify.ProgressEvent{Kind: qualify.RunFinished, Total: 3})
	d.Close()
	d.Event(ev(qualify.ScenarioStarted, 3, "late"))

	got := out.String()
	for _, want := range []string{
		"      admitted 12 checks\n",
		"✓ [1/3] admission passed in 1.2s\n",
		"✗ [3/3] lifecycle failed (boom) in 0.1s\n",
	} {
		assert.Check(t, is.Contains(got, want))
	}
	// The final frame is the complete campaign's bar.
	last := got[strings.LastIndex(got, "scenarios"):]
	assert.Check(t, regexp.MustCompile(`^scenarios +3/3 `).MatchString(last), "%q", last)
	for _, plain := range []string{": running", " ... ", "still running", "not selected", "late"} {
		assert.Check(t, !strings.Contains(got, plain), "%q in the display:\n%s", plain, got)
	}
}

// A display closed before the run started draws nothing and starts
// nothing; closing twice is fine.
func TestDisplayClosedBeforeTheRun(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out syncBuffer
	d := New(&out, Options{})
	d.Event(qualify.ProgressEvent{Kind: qualify.ScenarioStarted, Index: 1, Total: 1, Name: "x"})
	d.Close()
	d.Close()
	assert.Equal(t, out.String(), "")
}

// The time left is bounded by the time limits of what is left, and
// estimated from the finished runs' mean duration spread over the
// parallel slots.
func TestEstimate(t *testing.T) {
	s := estimate{running: map[int]time.Time{}}
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	s.start(qualify.ProgressEvent{Runs: 4, Parallel: 2, Limit: 10 * time.Minute})
	s.started(1, t0)
	bound, _, haveEst, ok := s.left(t0.Add(time.Minute))
	assert.Check(t, ok && !haveEst)
	assert.Check(t, is.Equal(bound, 39*time.Minute))
	assert.Check(t, is.Equal(s.label(t0.Add(time.Minute)), "at most 39m0s left (by the time limits)"))

	s.finished(1, 2*time.Minute)
	s.started(2, t0.Add(2*time.Minute))
	s.started(3, t0.Add(2*time.Minute))
	bound, est, haveEst, ok := s.left(t0.Add(3 * time.Minute))
	assert.Check(t, ok && haveEst)
	assert.Check(t, is.Equal(bound, 28*time.Minute))
	// One to start (2m) and two running with 1m each left of the mean,
	// over 2 slots.
	assert.Check(t, is.Equal(est, 2*time.Minute))

	// A run not run after an interruption no longer counts; a run not
	// selected never did.
	s.skipped(true)
	s.skipped(false)
	bound, _, _, _ = s.left(t0.Add(3 * time.Minute))
	assert.Check(t, is.Equal(bound, 18*time.Minute))
	s.finished(2, time.Minute)
	s.finished(3, time.Minute)
	_, _, _, ok = s.left(t0.Add(4 * time.Minute))
	assert.Check(t, !ok)
	assert.Check(t, is.Equal(s.label(t0.Add(4*time.Minute)), ""))

	// A display closed with runs left (an interrupted run) shows no time
	// left.
	s.started(4, t0.Add(4*time.Minute))
	assert.Check(t, s.label(t0.Add(5*time.Minute)) != "")
	s.stop()
	assert.Check(t, is.Equal(s.label(t0.Add(5*time.Minute)), ""))
}

func TestParseMode(t *testing.T) {
	for _, s := range []string{"auto", "tty", "plain"} {
		m, err := ParseMode(s)
		assert.Check(t, err)
		assert.Check(t, is.Equal(string(m), s))
	}
	for _, s := range []string{"", "TTY", "fancy", "plain "} {
		_, err := ParseMode(s)
		assert.Check(t, is.ErrorContains(err, "want auto, tty or plain"), "%q", s)
	}
}

// Auto is the display only on a terminal whose TERM is not dumb, outside
// CI; tty and plain are what they say.
func TestResolve(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	yes := func(io.Writer) bool { return true }
	var buf bytes.Buffer
	r, w, err := os.Pipe()
	assert.NilError(t, err)
	defer r.Close()
	defer w.Close()
	for _, tc := range []struct {
		name       string
		mode       Mode
		w          io.Writer
		getenv     func(string) string
		isTerminal func(io.Writer) bool
		want       Mode
	}{
		{"buffer", Auto, &buf, env("TERM", "xterm"), IsTerminal, Plain},
		{"pipe", Auto, w, env("TERM", "xterm"), IsTerminal, Plain},
		{"terminal", Auto, w, env("TERM", "xterm"), yes, TTY},
		{"dumb terminal", Auto, w, env("TERM", "dumb"), yes, Plain},
		{"terminal in CI", Auto, w, env("TERM", "xterm", "CI", "true"), yes, Plain},
		{"tty on a pipe", TTY, w, env("TERM", "dumb"), IsTerminal, TTY},
		{"plain on a terminal", Plain, w, env("TERM", "xterm"), yes, Plain},
	} {
		assert.Check(t, is.Equal(Resolve(tc.mode, tc.w, tc.getenv, tc.isTerminal), tc.want), tc.name)
	}
	assert.Check(t, !IsTerminal(&buf))
	assert.Check(t, !IsTerminal(w))
}
