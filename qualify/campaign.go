package qualify

import (
	"context"
	"fmt"
	"io"
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
	cfg    Config
	run    *evidence.Run
	out    string
	stderr io.Writer
	total  int

	mu      sync.Mutex
	sums    []*evidence.ScenarioSummary // by k-1; nil when not run
	results []*evidence.Scenario        // by k-1; nil when not run
	order   []string
	err     error
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
// interrupted", or naming the abandoned scenario).
func runCampaign(ctx context.Context, cfg Config, run *evidence.Run, out string, stderr io.Writer) ([]*evidence.Scenario, error) {
	m := cfg.Manifest
	repeat, parallel := max(cfg.Repeat, 1), max(cfg.Parallel, 1)
	n := len(m.Scenarios)
	c := &campaign{cfg: cfg, run: run, out: out, stderr: stderr, total: repeat * n,
		sums: make([]*evidence.ScenarioSummary, repeat*n), results: make([]*evidence.Scenario, repeat*n)}
	var rounds []evidence.CampaignRound
	for r := 1; r <= repeat; r++ {
		round := evidence.CampaignRound{Repeat: r, Order: []string{}}
		c.mu.Lock()
		c.order = nil
		c.mu.Unlock()
		slots := make(chan struct{}, parallel)
		var wg sync.WaitGroup
		for i, e := range m.Scenarios {
			j := job{k: (r-1)*n + i + 1, r: r, i: i, e: e}
			if !cfg.Selection.Selected(e.Name) {
				c.notSelected(j)
				continue
			}
			exclusive := exclusiveReason(cfg.Registry[e.Name]) != ""
			if exclusive {
				wg.Wait()
			}
			if ctx.Err() == nil && !c.stopped() {
				select {
				case slots <- struct{}{}:
				case <-ctx.Done():
				}
			}
			if ctx.Err() != nil || c.stopped() {
				c.notRun(ctx, j)
				continue
			}
			if exclusive {
				round.Exclusive = append(round.Exclusive, c.dirName(j))
			}
			c.mu.Lock()
			c.order = append(c.order, c.dirName(j))
			c.mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots }()
				c.runJob(ctx, j, parallel > 1)
			}()
			if exclusive || parallel == 1 {
				wg.Wait()
			}
		}
		wg.Wait()
		c.mu.Lock()
		round.Order = append(round.Order, c.order...)
		err := c.err
		c.mu.Unlock()
		if err != nil {
			return nil, err
		}
		rounds = append(rounds, round)
	}

	return c.finish(rounds, repeat, parallel), nil
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

// label is j's progress label: "[k/total] name", plus "(run r)" when
// repeated.
func (c *campaign) label(j job) string {
	l := fmt.Sprintf("[%d/%d] %s", j.k, c.total, j.e.Name)
	if c.cfg.Repeat > 1 {
		l += fmt.Sprintf(" (run %d)", j.r)
	}
	return l
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
	fmt.Fprintf(c.stderr, "%s ... %s\n", c.label(j), sum.Verdict)
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
	fmt.Fprintf(c.stderr, "%s ... %s\n", c.label(j), sum.Verdict)
}

// runJob runs one scenario in its own directory and namespace and writes
// its evidence. concurrent prints the progress line only once done, so
// lines of concurrent scenarios do not interleave.
func (c *campaign) runJob(ctx context.Context, j job, concurrent bool) {
	cfg, m := c.cfg, c.cfg.Manifest
	dirName := c.dirName(j)
	dir := filepath.Join(c.out, dirName)
	if err := os.Mkdir(dir, 0o755); err != nil {
		c.fail(err)
		return
	}
	if !concurrent {
		c.mu.Lock()
		fmt.Fprintf(c.stderr, "%s: running\n", c.label(j))
		c.mu.Unlock()
	}
	env := &scenario.Env{
		Profile: m.Profile, Endpoint: m.Endpoint, ImageID: cfg.ImageID, User: m.User,
		Namespace: scenarioNamespace(m.Namespace, j.e.Name), Policy: m.Policy, Dir: dir, Engine: cfg.Engine, Host: cfg.Host,
	}
	if cfg.Verbose {
		prefix := "      "
		if concurrent {
			prefix = "      " + dirName + ": "
		}
		env.Logf = func(format string, args ...any) {
			c.mu.Lock()
			defer c.mu.Unlock()
			fmt.Fprintf(c.stderr, prefix+format+"\n", args...)
		}
	}
	stopHeartbeat := c.heartbeat(j.e.Name)
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
	fmt.Fprintf(c.stderr, "%s ... %s (%s)\n", c.label(j), ev.Verdict, evidence.FormatDuration(ev.Timing.Duration()))
}

// DefaultHeartbeat is the interval of the heartbeat lines while a
// scenario runs, when Config.Heartbeat is 0: a CI log that shows nothing
// for longer looks hung.
const DefaultHeartbeat = 30 * time.Second

// heartbeat prints "qualify: <name> still running after <d>" on stderr
// every cfg.Heartbeat (d a multiple of it) until the returned function is
// called; that function returns once no more line can be printed.
func (c *campaign) heartbeat(name string) (stop func()) {
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
				c.mu.Lock()
				fmt.Fprintf(c.stderr, "qualify: %s still running after %s\n", name, time.Duration(n)*every)
				c.mu.Unlock()
			}
		}
	}()
	return func() {
		close(done)
		<-exited
	}
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
