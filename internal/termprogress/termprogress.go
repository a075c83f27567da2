package termprogress

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"

	"github.com/qualbox/qualbox/qualify"
	"github.com/qualbox/qualbox/qualify/evidence"
)

// Mode is a --progress value.
type Mode string

// The --progress values.
const (
	// Auto is TTY when stderr is a terminal, TERM is not "dumb" and CI is
	// not set, else Plain.
	Auto Mode = "auto"
	// TTY is the live display, whatever stderr is.
	TTY Mode = "tty"
	// Plain is qualify.PlainProgress's lines.
	Plain Mode = "plain"
)

// Modes lists the --progress values, in the order the help gives them.
var Modes = []Mode{Auto, TTY, Plain}

// ParseMode returns the Mode s names, or an error naming s and the values
// allowed.
func ParseMode(s string) (Mode, error) {
	for _, m := range Modes {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("%q: want auto, tty or plain", s)
}

// Resolve returns what mode means for progress written to w: TTY or Plain.
// Auto is TTY only when isTerminal(w), getenv("TERM") is not "dumb" and
// getenv("CI") is empty (a CI log keeps the plain lines even when the
// runner allocates a terminal). isTerminal and getenv are parameters so
// that a test decides; the command passes IsTerminal and os.Getenv.
func Resolve(mode Mode, w io.Writer, getenv func(string) string, isTerminal func(io.Writer) bool) Mode {
	switch mode {
	case TTY, Plain:
		return mode
	}
	if getenv("TERM") == "dumb" || getenv("CI") != "" || !isTerminal(w) {
		return Plain
	}
	return TTY
}

// IsTerminal reports whether w is an *os.File open on a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}

// Options tune a Display; the zero value is the terminal's.
type Options struct {
	// Width is the display's width in columns; 0 means the terminal's
	// (80 when w is not a terminal).
	Width int
	// RefreshRate is how often the display is redrawn; 0 means mpb's
	// default (150 ms).
	RefreshRate time.Duration
}

// Display is the live progress display of one run on a terminal: a bar
// per running scenario (its label and running time), a line per finished
// scenario above them (its verdict and duration), and at the bottom the
// campaign's bar (runs done of all, elapsed time, time left). Detail
// lines (--verbose) print above the bars. Heartbeats are not shown: the
// running times are. Its Event method is a qualify.Config.Progress.
type Display struct {
	w    io.Writer
	opts Options

	// mu serializes Event and Close, which drive mpb.
	mu      sync.Mutex
	p       *mpb.Progress
	overall *mpb.Bar
	bars    map[int]*mpb.Bar // running scenario bars, by event Index
	closed  bool

	// est is read by the time-left decorator on mpb's goroutines.
	est estimate
}

// New returns a display that draws on w once the run starts (RunStarted);
// until then it draws nothing. Close it after the run.
func New(w io.Writer, opts Options) *Display {
	return &Display{w: w, opts: opts, bars: map[int]*mpb.Bar{}, est: estimate{running: map[int]time.Time{}}}
}

// Event updates the display with e. Events after RunFinished or Close are
// ignored.
func (d *Display) Event(e qualify.ProgressEvent) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	if d.p == nil && e.Kind != qualify.RunStarted {
		return
	}
	now := time.Now()
	switch e.Kind {
	case qualify.RunStarted:
		if d.p != nil {
			return
		}
		d.est.start(e)
		d.start(e)
	case qualify.ScenarioStarted:
		d.est.started(e.Index, now)
		// "⠋ [k/n] NAME 12s (limit 15m0s)"
		d.bars[e.Index] = d.p.New(0, mpb.NopStyle(),
			mpb.PrependDecorators(decor.Spinner(nil), decor.Name(" "+e.Label()+" "), decor.Elapsed(decor.ET_STYLE_GO),
				decor.Name(fmt.Sprintf(" (limit %s)", e.Limit))),
		)
	case qualify.ScenarioDetail:
		prefix := "      "
		if e.Concurrent {
			prefix += e.Dir + ": "
		}
		d.println(prefix + e.Line)
	case qualify.ScenarioFinished:
		d.est.finished(e.Index, e.Elapsed)
		if b := d.bars[e.Index]; b != nil {
			b.Abort(true)
			delete(d.bars, e.Index)
		}
		d.println(fmt.Sprintf("%s %s %s in %s", mark(e.Verdict), e.Label(), e.Verdict, evidence.FormatDuration(e.Elapsed)))
		d.overall.Increment()
	case qualify.ScenarioSkipped:
		d.est.skipped(e.Verdict.Reason == evidence.NotSelectedReason)
		if e.Verdict.Reason != evidence.NotSelectedReason {
			d.println(fmt.Sprintf("%s %s %s", mark(e.Verdict), e.Label(), e.Verdict))
		}
		d.overall.Increment()
	case qualify.RunFinished:
		d.close()
	}
}

// Close ends the display: bars of scenarios still running are removed,
// the campaign's bar is drawn one last time (complete, or as far as the
// run got) and Close returns once the display's goroutines have ended,
// so what the caller prints next comes below it. Close is idempotent.
func (d *Display) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.close()
}

func (d *Display) close() {
	if d.closed {
		return
	}
	d.closed = true
	if d.p == nil {
		return
	}
	for i, b := range d.bars {
		b.Abort(true)
		delete(d.bars, i)
	}
	// A run that ended early (interrupted, or an error) keeps its bar as
	// far as it got, without a time left; a complete one has already
	// completed its bar.
	d.est.stop()
	d.overall.Abort(false)
	d.p.Wait()
}

// start creates the container and the campaign's bar.
func (d *Display) start(e qualify.ProgressEvent) {
	opts := []mpb.ContainerOption{mpb.WithOutput(sizedOutput(d.w)), mpb.WithAutoRefresh(), mpb.ForceTTY()}
	if d.opts.Width > 0 {
		opts = append(opts, mpb.WithWidth(d.opts.Width))
	}
	if d.opts.RefreshRate > 0 {
		opts = append(opts, mpb.WithRefreshRate(d.opts.RefreshRate))
	}
	d.p = mpb.New(opts...)
	d.overall = d.p.New(int64(e.Total), mpb.BarStyle(),
		// The campaign's bar stays below the scenarios' bars.
		mpb.BarPriority(math.MaxInt32),
		// "scenarios 2/17 [===>-----] 1m2s, ~12m0s left (at most ...)"
		mpb.PrependDecorators(decor.Name("scenarios "), decor.CountersNoUnit("%d/%d ")),
		mpb.AppendDecorators(decor.Name(" "), decor.Elapsed(decor.ET_STYLE_GO), decor.Any(func(decor.Statistics) string {
			if l := d.est.label(time.Now()); l != "" {
				return ", " + l
			}
			return ""
		})),
	)
}

// sizedOutput is w, unless w is a terminal that reports no width (a
// serial console, a pty nobody sized): mpb would draw its bars in zero
// columns, so it gets w hidden behind a plain io.Writer and draws them in
// Options.Width, else 80, columns.
func sizedOutput(w io.Writer) io.Writer {
	f, ok := w.(*os.File)
	if !ok || !IsTerminal(f) {
		return w
	}
	if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
		return w
	}
	return struct{ io.Writer }{f}
}

// println prints line above the bars.
func (d *Display) println(line string) {
	_, _ = d.p.Write([]byte(strings.TrimSuffix(line, "\n") + "\n"))
}

// mark is a verdict's symbol in finished lines.
func mark(v evidence.Verdict) string {
	switch {
	case v.Kind == evidence.Passed:
		return "✓"
	case !v.OK():
		return "✗"
	}
	return "-"
}

// estimate is what the time left is computed from: the campaign's shape
// (RunStarted) and the scenario runs started and finished so far.
type estimate struct {
	mu sync.Mutex
	// runs to start in all, at most parallel at once, each bounded by
	// limit.
	runs, parallel int
	limit          time.Duration
	// done counts runs finished; total their durations.
	done  int
	total time.Duration
	// running maps the Index of each running scenario to its start.
	running map[int]time.Time
	// stopped: the display closed, nothing is left.
	stopped bool
}

func (s *estimate) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
}

func (s *estimate) start(e qualify.ProgressEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs, s.parallel, s.limit = e.Runs, max(e.Parallel, 1), e.Limit
}

func (s *estimate) started(index int, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running[index] = now
}

func (s *estimate) finished(index int, took time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.running, index)
	s.done++
	s.total += took
}

// skipped is a run that did not start: one not selected never counted in
// runs; one not run (interrupted, or after an abandoned scenario) no
// longer does.
func (s *estimate) skipped(notSelected bool) {
	if notSelected {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs--
}

// left returns, at now, the upper bound of the time left (the remaining
// runs' time limits, and what is left of the running ones'; the grace
// after a time limit not counted) and, once a run finished, an estimate
// from the mean duration of the finished runs, spread over the parallel
// slots and at most the bound. ok is false once nothing is left to run.
func (s *estimate) left(now time.Time) (bound, est time.Duration, haveEst, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	toStart := max(s.runs-s.done-len(s.running), 0)
	if s.stopped || toStart == 0 && len(s.running) == 0 {
		return 0, 0, false, false
	}
	bound = time.Duration(toStart) * s.limit
	for _, t := range s.running {
		bound += max(s.limit-now.Sub(t), 0)
	}
	if s.done == 0 {
		return bound, 0, false, true
	}
	mean := s.total / time.Duration(s.done)
	est = time.Duration(toStart) * mean
	for _, t := range s.running {
		est += max(mean-now.Sub(t), 0)
	}
	est /= time.Duration(max(min(s.parallel, toStart+len(s.running)), 1))
	return bound, min(est, bound), true, true
}

// label is the time-left text of the campaign's bar: "~2m10s left (at most
// 45m0s by the time limits)", or before any run finished "at most 45m0s
// left (by the time limits)".
func (s *estimate) label(now time.Time) string {
	bound, est, haveEst, ok := s.left(now)
	switch {
	case !ok:
		return ""
	case haveEst:
		return fmt.Sprintf("~%s left (at most %s by the time limits)", est.Round(time.Second), bound.Round(time.Second))
	}
	return fmt.Sprintf("at most %s left (by the time limits)", bound.Round(time.Second))
}
