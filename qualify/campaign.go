package qualify

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/qualbox/qualbox/qualify/evidence"
	"github.com/qualbox/qualbox/qualify/manifest"
	"github.com/qualbox/qualbox/qualify/scenario"
)

// job is one run of one manifest entry: repetition r (1-based), entry i
// (0-based) and its campaign-wide index k (1-based), which names its
// directory "<k>-<name>".
type job struct {
	k, r, i int
	e       manifest.Entry
}

// campaign is the state of runCampaign shared by its scenario goroutines.
type campaign struct {
	cfg   Config
	run   *evidence.Run
	out   string
	total int
	// parallel is how many scenarios may run at once (cfg.Parallel, at
	// least 1).
	parallel int
	// concurrent is set when scenarios may run at once (cfg.Parallel > 1).
	concurrent bool

	// progress receives the events, only through emit (with mu held, so
	// one call at a time).
	progress func(ProgressEvent)

	mu sync.Mutex
	// finished is set once RunFinished was emitted: an abandoned
	// scenario's goroutine may still log, and its events are dropped.
	finished bool
	sums     []*evidence.ScenarioSummary // by k-1; nil when not run
	results  []*evidence.Scenario        // by k-1; nil when not run
	order    []string
	err      error
	// abandoned names the directory of a scenario that did not return
	// within its grace period; nothing starts after it.
	abandoned string
}

// runCampaign runs every manifest entry cfg.Repeat times (at least once),
// up to cfg.Parallel at a time within a repetition, and fills
// run.Scenarios with every run in campaign order (and run.Campaign, with
// each entry's tally when repeated, when it repeated or ran in
// parallel). It returns the scenario evidence that was written, in campaign order. A
// scenario that implements scenario.Exclusive waits for the running ones
// and runs alone. After ctx is cancelled, or a scenario was abandoned,
// nothing new starts; what did not start is listed as skipped ("not run:
// interrupted", or naming the abandoned scenario). Progress events go
// to progress, one call at a time (RunStarted first, RunFinished last,
// also when it returns an error).
//
// The steps: announce the run (RunStarted); run each repetition as a
// round (runRound), stopping at the first error a round leaves; finish
// the run's evidence (finish); RunFinished, however it returns.
func runCampaign(ctx context.Context, cfg Config, run *evidence.Run, out string, progress func(ProgressEvent)) ([]*evidence.Scenario, error) {
	repeat, parallel := max(cfg.Repeat, 1), max(cfg.Parallel, 1)
	n := len(cfg.Manifest.Scenarios)
	c := &campaign{cfg: cfg, run: run, out: out, progress: progress, total: repeat * n, parallel: parallel, concurrent: parallel > 1,
		sums: make([]*evidence.ScenarioSummary, repeat*n), results: make([]*evidence.Scenario, repeat*n)}
	c.mu.Lock()
	c.emit(ProgressEvent{Kind: RunStarted, Total: c.total, Runs: c.selectedRuns(repeat), Parallel: parallel, Limit: cfg.limits().limit})
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.emit(ProgressEvent{Kind: RunFinished, Total: c.total})
	}()
	var rounds []evidence.CampaignRound
	for r := 1; r <= repeat; r++ {
		rec, err := c.runRound(ctx, r)
		if err != nil {
			return nil, err
		}
		rounds = append(rounds, rec)
	}
	return c.finish(rounds, repeat, parallel), nil
}

// selectedRuns is how many scenario runs the selection leaves of repeat
// repetitions.
func (c *campaign) selectedRuns(repeat int) int {
	runs := 0
	for _, e := range c.cfg.Manifest.Scenarios {
		if c.cfg.Selection.Selected(e.Name) {
			runs += repeat
		}
	}
	return runs
}

// round is one repetition of the manifest as runRound schedules it.
type round struct {
	rec   evidence.CampaignRound
	slots chan struct{}
	wg    sync.WaitGroup
}

// runRound runs repetition r of every manifest entry, in manifest order
// (schedule), waits for all of them and returns the round's record with
// the order they started in, or the first error a scenario left in c.err.
func (c *campaign) runRound(ctx context.Context, r int) (evidence.CampaignRound, error) {
	rd := &round{rec: evidence.CampaignRound{Repeat: r, Order: []string{}}, slots: make(chan struct{}, c.parallel)}
	c.mu.Lock()
	c.order = nil
	c.mu.Unlock()
	n := len(c.cfg.Manifest.Scenarios)
	for i, e := range c.cfg.Manifest.Scenarios {
		c.schedule(ctx, rd, job{k: (r-1)*n + i + 1, r: r, i: i, e: e})
	}
	rd.wg.Wait()
	c.mu.Lock()
	rd.rec.Order = append(rd.rec.Order, c.order...)
	err := c.err
	c.mu.Unlock()
	return rd.rec, err
}

// schedule starts j in rd, in steps:
//
//  1. a job the selection leaves out is recorded as not selected;
//  2. an exclusive job waits for the running ones;
//  3. it takes a slot (admit); interrupted or stopped, it is recorded as
//     not run;
//  4. its directory joins the round's order (and its exclusive list) and
//     it starts;
//  5. a job that runs alone (exclusive, or Parallel 1) is waited for.
func (c *campaign) schedule(ctx context.Context, rd *round, j job) {
	if !c.cfg.Selection.Selected(j.e.Name) {
		c.notSelected(j)
		return
	}
	exclusive := exclusiveReason(c.cfg.Registry[j.e.Name]) != ""
	if exclusive {
		rd.wg.Wait()
	}
	if !c.admit(ctx, rd.slots) {
		c.notRun(ctx, j)
		return
	}
	if exclusive {
		rd.rec.Exclusive = append(rd.rec.Exclusive, c.dirName(j))
	}
	c.mu.Lock()
	c.order = append(c.order, c.dirName(j))
	c.mu.Unlock()
	rd.wg.Add(1)
	go func() {
		defer rd.wg.Done()
		defer func() { <-rd.slots }()
		c.runJob(ctx, j)
	}()
	if exclusive || c.parallel == 1 {
		rd.wg.Wait()
	}
}

// admit waits for a slot unless ctx is done or a scenario was abandoned,
// and reports whether a job may start: neither is the case once it has
// its slot. A slot taken by a job that may not start is not given back:
// nothing more starts in the round.
func (c *campaign) admit(ctx context.Context, slots chan struct{}) bool {
	if ctx.Err() == nil && !c.stopped() {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
	}
	return ctx.Err() == nil && !c.stopped()
}

// finish fills run.Scenarios with every run in campaign order and
// run.Campaign (when repeated or parallel, with each entry's tally when
// repeated), and returns the scenario evidence that was written.
func (c *campaign) finish(rounds []evidence.CampaignRound, repeat, parallel int) []*evidence.Scenario {
	run := c.run
	var written []*evidence.Scenario
	for _, ev := range c.results {
		if ev != nil {
			written = append(written, ev)
		}
	}
	if repeat > 1 || parallel > 1 {
		run.Campaign = &evidence.Campaign{Repeat: repeat, Parallel: parallel, Rounds: rounds}
	}
	for _, s := range c.sums {
		run.Scenarios = append(run.Scenarios, *s)
	}
	if repeat > 1 {
		// Each manifest entry's tally over its runs, as VerifyRun
		// recomputes it.
		run.Campaign.Scenarios = evidence.Tally(run.Scenarios, repeat)
	}
	return written
}

// dirName is the directory of j's evidence: "<nn>-<name>" with the
// campaign-wide index.
func (c *campaign) dirName(j job) string { return fmt.Sprintf("%02d-%s", j.k, j.e.Name) }

// event is the progress event of kind about j, with its identity set
// (Index, Total, Name, Repeat when repeated, Concurrent).
func (c *campaign) event(kind ProgressKind, j job) ProgressEvent {
	e := ProgressEvent{Kind: kind, Index: j.k, Total: c.total, Name: j.e.Name, Concurrent: c.concurrent}
	if c.cfg.Repeat > 1 {
		e.Repeat = j.r
	}
	return e
}

// stopped reports whether a scenario was abandoned, after which nothing
// new starts.
func (c *campaign) stopped() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.abandoned != ""
}

// notRun records j as skipped because the run was interrupted, or a
// scenario abandoned, first.
func (c *campaign) notRun(ctx context.Context, j job) {
	sum := &evidence.ScenarioSummary{Index: j.k, Name: j.e.Name, Verdict: evidence.Verdict{Kind: evidence.Skipped, Reason: "not run: interrupted"}}
	if c.cfg.Repeat > 1 {
		sum.Repeat = j.r
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.abandoned != "" && ctx.Err() == nil {
		sum.Verdict.Reason = "not run: scenario " + c.abandoned + " was abandoned"
	} else {
		c.run.Interrupted = true
	}
	c.sums[j.k-1] = sum
	e := c.event(ScenarioSkipped, j)
	e.Verdict = sum.Verdict
	c.emit(e)
}

// notSelected records j as skipped because cfg.Selection leaves it out.
func (c *campaign) notSelected(j job) {
	sum := &evidence.ScenarioSummary{Index: j.k, Name: j.e.Name, Verdict: evidence.Verdict{Kind: evidence.Skipped, Reason: evidence.NotSelectedReason}}
	if c.cfg.Repeat > 1 {
		sum.Repeat = j.r
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sums[j.k-1] = sum
	e := c.event(ScenarioSkipped, j)
	e.Verdict = sum.Verdict
	c.emit(e)
}

// runJob runs one scenario in its own directory and namespace and writes
// its evidence, with its progress events (ScenarioStarted, then
// ScenarioHeartbeat and ScenarioDetail, ScenarioFinished).
func (c *campaign) runJob(ctx context.Context, j job) {
	cfg, m := c.cfg, c.cfg.Manifest
	dirName := c.dirName(j)
	dir := filepath.Join(c.out, dirName)
	if err := os.Mkdir(dir, 0o755); err != nil {
		c.fail(err)
		return
	}
	started := c.event(ScenarioStarted, j)
	started.Dir, started.Limit = dirName, cfg.limits().limit
	c.mu.Lock()
	c.emit(started)
	c.mu.Unlock()
	env := &scenario.Env{
		Profile: m.Profile, Endpoint: m.Endpoint, ImageID: cfg.ImageID, User: m.User,
		Namespace: scenarioNamespace(m.Namespace, j.e.Name), Policy: m.Policy, Dir: dir, Engine: cfg.Engine, Host: cfg.Host,
	}
	if cfg.Verbose {
		env.Logf = func(format string, args ...any) {
			e := c.event(ScenarioDetail, j)
			e.Dir, e.Line = dirName, fmt.Sprintf(format, args...)
			c.mu.Lock()
			defer c.mu.Unlock()
			c.emit(e)
		}
	}
	stopHeartbeat := c.heartbeat(j, dirName)
	ev, abandoned := runScenario(ctx, cfg.Registry[j.e.Name], env, j.k, j.e, cfg.Engine, cfg.limits())
	stopHeartbeat()
	if abandoned {
		c.mu.Lock()
		if c.abandoned == "" {
			c.abandoned = dirName
		}
		c.mu.Unlock()
	}
	if c.cfg.Repeat > 1 {
		ev.Repeat = j.r
	}
	if err := evidence.WriteJSON(filepath.Join(dir, evidence.ScenarioFile), ev); err != nil {
		c.fail(err)
		return
	}
	sum := &evidence.ScenarioSummary{Index: j.k, Name: j.e.Name, Dir: dirName, Verdict: ev.Verdict, Checks: len(ev.Checks),
		Passed: ev.PassedChecks(), DurationMs: ev.Timing.DurationMs, Detail: detail(ev), Repeat: ev.Repeat, Abandoned: ev.Abandoned}
	c.mu.Lock()
	defer c.mu.Unlock()
	if ctx.Err() != nil && ev.Verdict.Kind == evidence.Failed {
		c.run.Interrupted = true
	}
	c.sums[j.k-1], c.results[j.k-1] = sum, ev
	e := c.event(ScenarioFinished, j)
	e.Dir, e.Verdict, e.Elapsed = dirName, ev.Verdict, ev.Timing.Duration()
	c.emit(e)
}

// DefaultHeartbeat is the interval of the heartbeat lines while a
// scenario runs, when Config.Heartbeat is 0: a CI log that shows nothing
// for longer looks hung.
const DefaultHeartbeat = 30 * time.Second

// heartbeat emits a ScenarioHeartbeat for j (in directory dir) every
// cfg.Heartbeat, Elapsed a multiple of it: the plain line "qualify:
// <name> still running after <d>". It stops when the returned function is
// called; that function returns once no more event can be emitted.
func (c *campaign) heartbeat(j job, dir string) (stop func()) {
	every := c.cfg.Heartbeat
	if every <= 0 {
		every = DefaultHeartbeat
	}
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(every)
		defer t.Stop()
		for n := 1; ; n++ {
			select {
			case <-done:
				return
			case <-t.C:
				e := c.event(ScenarioHeartbeat, j)
				e.Dir, e.Elapsed = dir, time.Duration(n)*every
				c.mu.Lock()
				c.emit(e)
				c.mu.Unlock()
			}
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}

// emit passes e to c.progress unless the run finished; c.mu must be held.
func (c *campaign) emit(e ProgressEvent) {
	if c.finished {
		return
	}
	c.progress(e)
	c.finished = e.Kind == RunFinished
}

func (c *campaign) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
	}
}

// exclusiveReason returns why s must run alone, or "".
func exclusiveReason(s scenario.Scenario) string {
	if x, ok := s.(scenario.Exclusive); ok {
		return x.Exclusive()
	}
	return ""
}
