package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/qualify/faultproxy"
	"github.com/qualbox/qualbox/sandboxapi"
)

// WarmPool qualifies the warm pool (docs/contract.md#pool;
// docs/qualification.md#warm-pool): sandboxapi.NewPool over the driver, on
// the real Engine, with the manifest's policy. Each case builds its own
// pool of `size` sandboxes whose recovery records go through a store the
// scenario owns, one file per sandbox under <Dir>/<case>/records
// (recordStore); every sandbox that store sees is tracked, so the runner
// checks all of them absent by exact name and ID afterwards. The cases, in
// run order:
//
//   - distinct: size+1 acquisitions, the last one a refill, are as many
//     sandboxes with distinct compute containers and volumes, and each
//     finds its workspace without the file the one before wrote there.
//   - expiry: with maxIdle = idleMs, size-1 sandboxes are acquired and
//     held half-way through the bound; the first sandbox to expire is gone
//     by its exact names and IDs, every handed-out sandbox and every idle
//     one younger than four fifths of the bound is still there, and a
//     replacement fills the pool again.
//   - death: a child controller (the qualify binary's controller-child
//     subcommand with --pool) fills a pool and is killed with SIGKILL; a
//     fresh controller reconciles every record the child left in the
//     store and destroys what it owns, and nothing of the pooled
//     sandboxes is left.
//   - identity: the pool reaches the Engine through a fault proxy. While
//     Acquire re-checks the oldest idle sandbox, the proxy answers /info
//     with another daemon's ID: Acquire must refuse with a
//     *sandboxapi.StateError, hand nothing out, and destroy that sandbox;
//     once for each sandbox the full pool held (identityLie says how the
//     destroy still meets the real daemon).
//   - close: Close destroys every idle sandbox, and no goroutine runs
//     sandboxapi.Pool code once it returned.
type WarmPool struct {
	// Backend, when set, wraps the driver backend of the named case's
	// pool; nil runs the driver itself. Negative tests misdirect a
	// destroy, refuse starts or disable the readiness check.
	Backend func(caseName string, b sandboxapi.Backend) sandboxapi.Backend
	// Pool, when set, wraps the named case's pool. Negative tests hand a
	// sandbox out twice, carry a workspace over or return from Close
	// early.
	Pool func(caseName string, p PoolHandle) PoolHandle
	// AfterDeath, when set, runs in the death case once the child is
	// dead, before recovery, with the record directory. Negative tests
	// remove a record there: a store that lost it.
	AfterDeath func(recordDir string) error
}

// PoolHandle is what the warm-pool scenario uses of a *sandboxapi.Pool.
type PoolHandle interface {
	Idle() []sandboxapi.SandboxID
	Acquire(ctx context.Context) (sandboxapi.Sandbox, error)
	Close(ctx context.Context) error
}

var _ PoolHandle = (*sandboxapi.Pool)(nil)

// WarmPoolParams are the warm-pool params.
type WarmPoolParams struct {
	// Size is each case's pool size, 2..16; default 4.
	Size int `json:"size,omitempty"`
	// IdleMs is the expiry case's maxIdle in milliseconds, 1000..600000;
	// default 5000. Half of it should exceed the time a start takes.
	IdleMs int64 `json:"idleMs,omitempty"`
	// Cases selects cases (WarmPoolCases); default all, in that order.
	Cases []string `json:"cases,omitempty"`
}

// WarmPoolCases are the warm-pool scenario's cases, in run order.
var WarmPoolCases = []string{"distinct", "expiry", "death", "identity", "close"}

// OtherDaemonID is the daemon ID the identity case's proxy answers /info
// with: no Engine has it.
const OtherDaemonID = "qualbox-warm-pool:another-daemon"

// longIdle is maxIdle of every case but expiry: nothing expires while one
// of them runs.
const longIdle = time.Hour

// poolMarker is the file each acquisition of the distinct case looks for
// and then writes in its workspace.
const poolMarker = "warm-pool-marker"

// Name returns "warm-pool".
func (WarmPool) Name() string { return "warm-pool" }

func (WarmPool) params(raw map[string]any) (WarmPoolParams, error) {
	var p WarmPoolParams
	if err := DecodeParams(raw, &p); err != nil {
		return p, err
	}
	if p.Size == 0 {
		p.Size = 4
	}
	if p.IdleMs == 0 {
		p.IdleMs = 5000
	}
	if p.Cases == nil {
		p.Cases = WarmPoolCases
	}
	if p.Size < 2 || p.Size > 16 {
		return p, fmt.Errorf("params.size: want 2..16, got %d", p.Size)
	}
	if p.IdleMs < 1000 || p.IdleMs > 600000 {
		return p, fmt.Errorf("params.idleMs: want 1000..600000, got %d", p.IdleMs)
	}
	return p, oneOf("cases", p.Cases, WarmPoolCases)
}

// Validate checks params: size, idleMs, cases.
func (s WarmPool) Validate(params map[string]any) error {
	_, err := s.params(params)
	return err
}

// Run runs the selected cases, each with its own pool; a case that cannot
// go on ends with its failure, and the next one runs.
func (s WarmPool) Run(ctx context.Context, env *Env, params map[string]any, rec *Record) error {
	p, err := s.params(params)
	if err != nil {
		return err
	}
	rec.Request("size", p.Size)
	rec.Request("idleMs", p.IdleMs)
	rec.Request("cases", p.Cases)
	rec.Request("policy", env.Policy)
	var errs []error
	for _, name := range p.Cases {
		env.Log("case %s", name)
		c, err := newPoolCase(s, env, rec, p, name)
		if err == nil {
			switch name {
			case "distinct":
				err = c.distinct(ctx)
			case "expiry":
				err = c.expiry(ctx)
			case "death":
				err = c.death(ctx)
			case "identity":
				err = c.identity(ctx)
			case "close":
				err = c.close(ctx)
			}
		}
		if c != nil {
			rec.Observe(name+": duration", time.Since(c.started).Round(time.Millisecond).String())
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// poolCase is the state of one warm-pool case as its steps fill it.
type poolCase struct {
	s    WarmPool
	env  *Env
	rec  *Record
	p    WarmPoolParams
	name string
	// dir is <Dir>/<case>: the record directory, spill directories and
	// the death case's marker.
	dir     string
	store   *recordStore
	events  poolEvents
	started time.Time

	// done closes the backend (and the identity case's proxy).
	done  func()
	proxy *faultproxy.Proxy
	pool  PoolHandle
	// closed: the case closed the pool itself.
	closed bool
	// held are the sandboxes the case acquired; finish destroys them.
	held []sandboxapi.Sandbox
}

func newPoolCase(s WarmPool, env *Env, rec *Record, p WarmPoolParams, name string) (*poolCase, error) {
	c := &poolCase{s: s, env: env, rec: rec, p: p, name: name, dir: filepath.Join(env.Dir, name), started: time.Now()}
	records := filepath.Join(c.dir, "records")
	if err := os.MkdirAll(records, 0o700); err != nil {
		return nil, err
	}
	c.store = &recordStore{dir: records, track: rec.Track}
	return c, nil
}

// check records a check named "<case>: name".
func (c *poolCase) check(name string, want, got any, ok bool) bool {
	return c.rec.Check(c.name+": "+name, want, got, ok)
}

// fillBound bounds each wait for the pool to fill or refill: the startup
// deadline plus 30 s.
func (c *poolCase) fillBound() time.Duration {
	return sandboxapi.Milliseconds(c.env.Policy.Deadlines.StartupMs) + 30*time.Second
}

// open builds the case's pool over a fresh driver backend (through a
// fault proxy when proxied), wrapped by the seams when set, with
// StartParallelism size and the case's store.
func (c *poolCase) open(maxIdle, retry time.Duration, proxied bool) error {
	var b *driver.Backend
	var err error
	if proxied {
		b, c.proxy, c.done, err = proxiedBackend(c.env, c.name)
	} else {
		spill := filepath.Join(c.dir, "spill")
		if err = os.MkdirAll(spill, 0o700); err != nil {
			return err
		}
		env := c.env
		b, err = driver.New(driver.Config{
			Profile: env.Profile, Endpoint: env.Endpoint, Namespace: env.Namespace,
			SpillDirectory: spill, ImageID: env.ImageID, User: env.User,
		})
		if err == nil {
			c.done = func() { b.Close() }
		}
	}
	if err != nil {
		return fmt.Errorf("driver backend: %w", err)
	}
	var backend sandboxapi.Backend = b
	if c.s.Backend != nil {
		backend = c.s.Backend(c.name, backend)
	}
	opts := sandboxapi.PoolOptions{
		Size: c.p.Size, MaxIdle: maxIdle, StartParallelism: c.p.Size, RetryDelay: retry,
		Recovery: sandboxapi.Persisted(c.store.persist), OnEvent: c.events.add,
	}
	c.rec.Request(c.name+": pool", map[string]any{"size": opts.Size, "maxIdleMs": maxIdle.Milliseconds(),
		"startParallelism": opts.StartParallelism, "retryDelayMs": retry.Milliseconds(), "recovery": "persisted: one file per sandbox", "proxied": proxied})
	p, err := sandboxapi.NewPool(backend, c.env.Request(), opts)
	if err != nil {
		return fmt.Errorf("pool: %w", err)
	}
	c.pool = p
	if c.s.Pool != nil {
		c.pool = c.s.Pool(c.name, p)
	}
	return nil
}

// proxiedBackend is proxied (faults.go) for the pool of case name.
func proxiedBackend(env *Env, name string) (*driver.Backend, *faultproxy.Proxy, func(), error) {
	b, p, done, err := proxied(env, "warm-pool-"+name)
	if err != nil && done != nil {
		done()
		done = nil
	}
	return b, p, done, err
}

// waitFull waits (fillBound) until the pool holds size idle sandboxes and
// returns them, oldest first.
func (c *poolCase) waitFull(ctx context.Context) ([]sandboxapi.SandboxID, error) {
	if !waitUntil(ctx, c.fillBound(), func() bool { return len(c.pool.Idle()) >= c.p.Size }) {
		return nil, fmt.Errorf("the pool holds %d of %d sandboxes after %s; events: %v", len(c.pool.Idle()), c.p.Size, c.fillBound(), c.events.list(c.started))
	}
	return c.pool.Idle(), nil
}

// acquire takes a sandbox from the pool (bounded by fillBound); a sandbox
// handed out is the case's to destroy.
func (c *poolCase) acquire(ctx context.Context) (sandboxapi.Sandbox, error) {
	actx, cancel := context.WithTimeout(ctx, c.fillBound())
	defer cancel()
	sb, err := c.pool.Acquire(actx)
	if sb != nil {
		c.held = append(c.held, sb)
	}
	return sb, err
}

// finish destroys the sandboxes the case acquired, closes the pool unless
// the case did, closes the backend and records the pool's events.
func (c *poolCase) finish(ctx context.Context) {
	for _, sb := range c.held {
		stopErr, destroyErr := stopAndDestroy(ctx, c.env.Policy, sb)
		c.rec.CleanupError(c.name+": stop acquired "+string(sb.ID()), stopErr)
		c.rec.CleanupError(c.name+": destroy acquired "+string(sb.ID()), destroyErr)
	}
	if c.pool != nil && !c.closed {
		c.rec.CleanupError(c.name+": close the pool", c.pool.Close(context.WithoutCancel(ctx)))
	}
	if c.done != nil {
		c.done()
	}
	c.rec.Observe(c.name+": pool events", c.events.list(c.started))
}

// distinct runs the distinct case (WarmPool):
//
//  1. open a pool (maxIdle longIdle) and wait until it is full;
//  2. acquire size+1 sandboxes one after the other, the last one a refill;
//     in each, one process reports whether poolMarker is in the
//     workspace and then writes it;
//  3. check that none found the file, and that the acquisitions are
//     distinct sandboxes, compute containers and volumes;
//  4. finish: destroy the acquired sandboxes, close the pool.
func (c *poolCase) distinct(ctx context.Context) error {
	defer c.finish(ctx)
	if err := c.open(longIdle, time.Second, false); err != nil {
		return err
	}
	if _, err := c.waitFull(ctx); err != nil {
		return err
	}
	type acquisition struct {
		Sandbox      string `json:"sandbox"`
		Compute      string `json:"compute"`
		ComputeState string `json:"computeState"`
		Volume       string `json:"volume"`
		Workspace    string `json:"workspace"`
	}
	var got []acquisition
	defer func() { c.rec.Observe(c.name+": acquisitions", got) }()
	n := c.p.Size + 1
	for i := 1; i <= n; i++ {
		sb, err := c.acquire(ctx)
		if err != nil {
			return fmt.Errorf("acquisition %d: %w", i, err)
		}
		a := acquisition{Sandbox: string(sb.ID()), Compute: resourceID(sb, sandboxapi.RoleCompute), Volume: resourceID(sb, sandboxapi.RoleStorage), ComputeState: "absent"}
		if _, state, ok, err := inspectRef(ctx, c.env.Engine, sandboxapi.RoleCompute, a.Compute); err != nil {
			a.ComputeState = "error: " + err.Error()
		} else if ok {
			a.ComputeState = state
		}
		a.Workspace = c.marker(ctx, sb, i)
		got = append(got, a)
		c.check(fmt.Sprintf("acquisition %d finds its workspace without an earlier acquisition's file", i), "absent", a.Workspace, a.Workspace == "absent")
	}
	count := func(field func(acquisition) string) int {
		seen := map[string]bool{}
		for _, a := range got {
			if v := field(a); v != "" {
				seen[v] = true
			}
		}
		return len(seen)
	}
	ids := count(func(a acquisition) string { return a.Sandbox })
	computes := count(func(a acquisition) string { return a.Compute })
	volumes := count(func(a acquisition) string { return a.Volume })
	c.check("the acquisitions are distinct sandboxes with distinct compute containers and volumes",
		fmt.Sprintf("%d sandboxes, %d compute containers, %d volumes", n, n, n),
		fmt.Sprintf("%d sandboxes, %d compute containers, %d volumes", ids, computes, volumes),
		ids == n && computes == n && volumes == n)
	return nil
}

// marker runs acquisition i's one process in sb: it prints "found
// <content>" when poolMarker is in the workspace, else writes the sandbox
// ID there and prints "absent". It returns that line, or what went wrong.
func (c *poolCase) marker(ctx context.Context, sb sandboxapi.Sandbox, i int) string {
	script := fmt.Sprintf(`if [ -e %[1]s ]; then printf 'found %%s\n' "$(cat %[1]s)"; else printf '%%s\n' %[2]s > %[1]s && echo absent; fi`,
		poolMarker, shellQuote(string(sb.ID())))
	o := &observed{name: fmt.Sprintf("%s: acquisition %d", c.name, i), env: c.env, rec: c.rec, policy: c.env.Policy, sb: sb}
	exit, stdout, stderr, err := o.run(ctx, shellSpec(script))
	switch {
	case err != nil:
		return "error: " + err.Error()
	case exit != sandboxapi.Exited(0):
		return fmt.Sprintf("%s, stderr %q", exit, stderr)
	}
	return strings.TrimSpace(string(stdout))
}

// expiry runs the expiry case (WarmPool):
//
//  1. open a pool with maxIdle idleMs and wait until it is full;
//  2. wait half of idleMs, then acquire size-1 sandboxes and hold them:
//     their refills start then, so at the first expiry the idle
//     sandboxes besides the expiring one are half a bound younger;
//  3. wait for the first expiry (idleMs plus the startup and cleanup
//     deadlines);
//  4. check the expired sandbox gone, every held sandbox and every idle
//     one younger than four fifths of idleMs present, by exact names and
//     IDs on the Engine;
//  5. wait for a replacement: a sandbox started after the expiry, and
//     size idle again;
//  6. finish.
func (c *poolCase) expiry(ctx context.Context) error {
	defer c.finish(ctx)
	bound := time.Duration(c.p.IdleMs) * time.Millisecond
	if err := c.open(bound, time.Second, false); err != nil {
		return err
	}
	if _, err := c.waitFull(ctx); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(bound / 2):
	}
	held, err := c.holdAllButOne(ctx)
	if err != nil {
		return err
	}
	exp, err := c.awaitExpiry(ctx, bound)
	if err != nil {
		return err
	}
	now := time.Now()
	idle := c.pool.Idle()
	cctx, cancel := cleanupContext(ctx, c.env.Policy)
	defer cancel()
	if err := c.checkExpiredGone(cctx, exp); err != nil {
		return err
	}
	others := append(slices.Clone(held), c.youngIdle(idle, exp, now, bound)...)
	if err := c.checkStillPresent(cctx, len(held), others); err != nil {
		return err
	}
	c.checkReplaced(ctx, exp)
	return nil
}

// holdAllButOne acquires size-1 sandboxes, one after the other, and
// returns their IDs (observed as "held").
func (c *poolCase) holdAllButOne(ctx context.Context) ([]sandboxapi.SandboxID, error) {
	var held []sandboxapi.SandboxID
	for i := 1; i < c.p.Size; i++ {
		sb, err := c.acquire(ctx)
		if err != nil {
			return nil, fmt.Errorf("acquisition %d: %w", i, err)
		}
		held = append(held, sb.ID())
	}
	c.rec.Observe(c.name+": held", held)
	return held, nil
}

// awaitExpiry waits for the pool's first expiry event: bound (maxIdle)
// plus fillBound plus the cleanup deadline.
func (c *poolCase) awaitExpiry(ctx context.Context, bound time.Duration) (poolEvent, error) {
	var exp poolEvent
	wait := bound + c.fillBound() + sandboxapi.Milliseconds(c.env.Policy.Deadlines.CleanupMs)
	if !waitUntil(ctx, wait, func() bool {
		var ok bool
		exp, ok = c.events.first(sandboxapi.PoolExpired, time.Time{})
		return ok
	}) {
		return exp, fmt.Errorf("no idle sandbox expired within %s; events: %v", wait, c.events.list(c.started))
	}
	return exp, nil
}

// checkExpiredGone checks that every resource of the expired sandbox is
// absent, by exact names and IDs, and that its expiry cleanup succeeded.
func (c *poolCase) checkExpiredGone(cctx context.Context, exp poolEvent) error {
	xrec, _ := c.store.latest(exp.SandboxID)
	present, probes, err := presence(cctx, c.env.Engine, xrec)
	if err != nil {
		return err
	}
	c.check("the expired sandbox is gone (exact names and IDs)", "every resource 404; expiry cleanup nil",
		fmt.Sprintf("%s: %s; expiry cleanup %s", exp.SandboxID, strings.Join(probes, "; "), errText(exp.Err)),
		len(probes) > 0 && present == 0 && exp.Err == nil)
	return nil
}

// youngIdle returns the sandboxes of idle, other than the expired one,
// started less than four fifths of bound before now: none of them can
// expire while they are inspected. They are observed with their idle
// times.
func (c *poolCase) youngIdle(idle []sandboxapi.SandboxID, exp poolEvent, now time.Time, bound time.Duration) []sandboxapi.SandboxID {
	var ids []sandboxapi.SandboxID
	var young []string
	for _, id := range idle {
		if at, ok := c.events.first(sandboxapi.PoolStarted, time.Time{}, id); ok && id != exp.SandboxID && now.Sub(at.At) < bound*4/5 {
			ids = append(ids, id)
			young = append(young, fmt.Sprintf("%s (idle %s)", id, now.Sub(at.At).Round(time.Millisecond)))
		}
	}
	c.rec.Observe(c.name+": idle sandboxes younger than 4/5 of maxIdle at the expiry", young)
	return ids
}

// checkStillPresent checks that every sandbox of others (the held ones
// first, then the young idle ones) is wholly present, by exact names and
// IDs.
func (c *poolCase) checkStillPresent(cctx context.Context, held int, others []sandboxapi.SandboxID) error {
	var missing []string
	for _, id := range others {
		r, _ := c.store.latest(id)
		present, probes, err := presence(cctx, c.env.Engine, r)
		if err != nil {
			return err
		}
		if present == 0 || present < len(probes) {
			missing = append(missing, fmt.Sprintf("%s: %s", id, strings.Join(probes, "; ")))
		}
	}
	c.check("every handed-out sandbox and every younger idle one is still present (exact names and IDs)",
		fmt.Sprintf("%d held and %d idle sandboxes present", held, len(others)-held),
		strings.Join(append([]string{"all present"}, missing...)[min(len(missing), 1):], ", "), len(missing) == 0)
	return nil
}

// checkReplaced waits (fillBound) for a sandbox started after the expiry
// and the pool full again, and checks it.
func (c *poolCase) checkReplaced(ctx context.Context, exp poolEvent) {
	var repl poolEvent
	replaced := waitUntil(ctx, c.fillBound(), func() bool {
		var ok bool
		repl, ok = c.events.first(sandboxapi.PoolStarted, exp.At)
		return ok && len(c.pool.Idle()) >= c.p.Size
	})
	got := fmt.Sprintf("no sandbox started after the expiry within %s; %d idle", c.fillBound(), len(c.pool.Idle()))
	if replaced {
		got = fmt.Sprintf("%s started %s after the expiry; %d idle", repl.SandboxID, repl.At.Sub(exp.At).Round(time.Millisecond), len(c.pool.Idle()))
	}
	c.check("a replacement started and the pool is full again", fmt.Sprintf("a sandbox started after the expiry; %d idle", c.p.Size), got, replaced)
}

// death runs the death case (WarmPool):
//
//  1. configure the child: the case's record directory, spill directory
//     and marker file;
//  2. start the child controller: it fills a pool of size and blocks;
//  3. wait for its marker (its own account of the pooled sandboxes'
//     records) or its early end, and track those records;
//  4. kill it with SIGKILL and check that ended it;
//  5. run the AfterDeath seam;
//  6. read the store: a record of each pooled sandbox;
//  7. a fresh controller reconciles every stored record and destroys
//     what it owns, persisting an advanced owner record first;
//  8. nothing of the pooled sandboxes is left (exact names and IDs).
func (c *poolCase) death(ctx context.Context) error {
	c.rec.Request(c.name+": controller death", "the child controller process is killed with SIGKILL (not a pool abandoned in-process)")
	bin, err := qualifyBinary()
	if err != nil {
		return err
	}
	cfg, err := c.childConfig()
	if err != nil {
		return err
	}
	c.rec.Request(c.name+": child controller", fmt.Sprintf("%s %s --pool %d --records %s", bin, ChildCommand, c.p.Size, c.store.dir))
	child, err := startChildProc(bin, cfg)
	if err != nil {
		return err
	}
	defer child.reap()
	marker, exitedEarly, early := awaitPoolMarker(ctx, child, cfg.MarkerFile, c.fillBound())
	for _, r := range marker.Pooled {
		c.rec.Track(recordOwner{r: r})
	}
	cctx, cancel := cleanupContext(ctx, c.env.Policy)
	defer cancel()
	if err := c.killChild(child, marker.Pooled, exitedEarly, early); err != nil {
		return err
	}
	if err := c.afterKill(cctx, marker.Pooled); err != nil {
		return err
	}
	stored, err := readRecordDir(c.store.dir)
	if err != nil {
		return err
	}
	c.checkStored(marker.Pooled, stored)
	outcome, err := c.recoverStored(cctx, stored)
	if err != nil {
		return err
	}
	c.checkRecovered(marker.Pooled, outcome)
	return c.checkPoolGone(cctx, marker.Pooled)
}

// childConfig makes the death case's spill directories and returns the
// child controller's configuration: the case's record directory, spill
// directory and marker file, and a pool of size.
func (c *poolCase) childConfig() (ChildConfig, error) {
	spill := filepath.Join(c.dir, "spill")
	for _, d := range []string{spill, filepath.Join(c.dir, "spill-recovery")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return ChildConfig{}, err
		}
	}
	env := c.env
	return ChildConfig{
		Profile: env.Profile, Endpoint: env.Endpoint, ImageID: env.ImageID, Namespace: env.Namespace,
		User: env.User, Policy: env.Policy, SpillDir: spill, MarkerFile: filepath.Join(c.dir, "marker.json"),
		PoolSize: c.p.Size, RecordDir: c.store.dir,
	}, nil
}

// killChild kills the child with SIGKILL (unless its end was taken,
// exitedEarly) and returns an error, with the child's output observed,
// unless it blocked with a full pool (pooled, early nil) and died of it.
func (c *poolCase) killChild(child *childProc, pooled []sandboxapi.RecoveryRecord, exitedEarly bool, early error) error {
	killed := child.kill(exitedEarly)
	if early != nil || !killed || len(pooled) != c.p.Size {
		c.rec.Observe(c.name+": child output", child.out.String())
		return fmt.Errorf("the child controller did not block with a full pool and die of SIGKILL: %d pooled, %s, %v", len(pooled), child.cmd.ProcessState, early)
	}
	return nil
}

// afterKill observes the pooled sandboxes' compute containers after the
// kill, then runs the AfterDeath seam.
func (c *poolCase) afterKill(cctx context.Context, pooled []sandboxapi.RecoveryRecord) error {
	var states []string
	for _, r := range pooled {
		_, state, err := computeState(cctx, c.env.Engine, r)
		if err != nil {
			return err
		}
		states = append(states, string(r.SandboxID)+" "+state)
	}
	c.rec.Observe(c.name+": compute after the kill", states)
	if c.s.AfterDeath != nil {
		if err := c.s.AfterDeath(c.store.dir); err != nil {
			return fmt.Errorf("after death: %w", err)
		}
	}
	return nil
}

// checkStored checks that stored holds a running record of each pooled
// sandbox the child reported.
func (c *poolCase) checkStored(pooled, stored []sandboxapi.RecoveryRecord) {
	byID := map[sandboxapi.SandboxID]sandboxapi.RecoveryRecord{}
	for _, r := range stored {
		byID[r.SandboxID] = r
	}
	var missing []string
	for _, r := range pooled {
		switch s, ok := byID[r.SandboxID]; {
		case !ok:
			missing = append(missing, fmt.Sprintf("%s (no record)", r.SandboxID))
		case s.Phase != sandboxapi.PhaseRunning:
			missing = append(missing, fmt.Sprintf("%s (phase %s)", r.SandboxID, s.Phase))
		}
	}
	c.check("the store holds a running record of each pooled sandbox the child reported", fmt.Sprintf("%d of %d", c.p.Size, c.p.Size),
		fmt.Sprintf("%d of %d%s", c.p.Size-len(missing), c.p.Size, strings.Join(append([]string{""}, missing...), "; missing ")), len(missing) == 0)
}

// checkRecovered observes recoverStored's outcome and checks that each
// pooled sandbox was matched and destroyed.
func (c *poolCase) checkRecovered(pooled []sandboxapi.RecoveryRecord, outcome map[sandboxapi.SandboxID]string) {
	var wrong []string
	for _, r := range pooled {
		switch o, ok := outcome[r.SandboxID]; {
		case !ok:
			wrong = append(wrong, fmt.Sprintf("%s: no record to reconcile", r.SandboxID))
		case o != "matched; destroyed":
			wrong = append(wrong, fmt.Sprintf("%s: %s", r.SandboxID, o))
		}
	}
	c.rec.Observe(c.name+": recovery", outcome)
	c.check("a fresh controller reconciled and destroyed each pooled sandbox", "matched; destroyed, for each",
		strings.Join(append([]string{"matched; destroyed, for each"}, wrong...)[min(len(wrong), 1):], ", "), len(wrong) == 0)
}

// checkPoolGone checks that nothing of the pooled sandboxes remains, by
// exact names and IDs.
func (c *poolCase) checkPoolGone(cctx context.Context, pooled []sandboxapi.RecoveryRecord) error {
	left, err := leftovers(cctx, c.env.Engine, pooled...)
	if err != nil {
		return err
	}
	c.check("nothing of the pooled sandboxes remains (exact names and IDs)", "none",
		strings.Join(append([]string{"none"}, left...)[min(len(left), 1):], ", "), len(left) == 0)
	return nil
}

// awaitPoolMarker waits for a pool child's marker, its early end, bound or
// ctx. exitedEarly says the child's end was taken; err says why no marker
// came.
func awaitPoolMarker(ctx context.Context, child *childProc, path string, bound time.Duration) (m ChildMarker, exitedEarly bool, err error) {
	deadline := time.After(bound)
	for {
		select {
		case err := <-child.exited:
			return m, true, fmt.Errorf("child exited before its pool was full: %v", err)
		case <-deadline:
			return m, false, fmt.Errorf("child's pool not full within %s", bound)
		case <-ctx.Done():
			return m, false, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if data, err := os.ReadFile(path); err == nil && json.Unmarshal(data, &m) == nil {
			return m, false, nil
		}
	}
}

// recoverStored has a fresh controller reconcile every stored record,
// persist an owner's record when reconciliation advanced it, and destroy
// what it owns. It returns each sandbox's outcome: "<reconciliation>;
// destroyed" or what failed.
func (c *poolCase) recoverStored(cctx context.Context, stored []sandboxapi.RecoveryRecord) (map[sandboxapi.SandboxID]string, error) {
	env := c.env
	fresh, err := driver.New(driver.Config{
		Profile: env.Profile, Endpoint: env.Endpoint, Namespace: env.Namespace,
		SpillDirectory: filepath.Join(c.dir, "spill-recovery"), ImageID: env.ImageID, User: env.User,
	})
	if err != nil {
		return nil, err
	}
	defer fresh.Close()
	out := map[sandboxapi.SandboxID]string{}
	for _, r := range stored {
		rc, err := fresh.Reconcile(cctx, r)
		if err != nil {
			out[r.SandboxID] = "reconcile: " + err.Error()
			continue
		}
		o := string(rc.Kind)
		if rc.Kind == sandboxapi.ReconciliationConflict {
			o += ": " + rc.Reason
		}
		if rc.Owner == nil {
			out[r.SandboxID] = o + "; no owner"
			continue
		}
		c.rec.Track(rc.Owner)
		if adv := rc.Owner.RecoveryRecord(); !sameRecord(adv, r) {
			if err := c.store.persist(cctx, adv); err != nil {
				out[r.SandboxID] = o + "; persist the advanced record: " + err.Error()
				continue
			}
		}
		if err := rc.Owner.Destroy(cctx); err != nil {
			out[r.SandboxID] = o + "; destroy: " + err.Error()
			continue
		}
		out[r.SandboxID] = o + "; destroyed"
	}
	return out, nil
}

// sameRecord reports whether a and b encode alike.
func sameRecord(a, b sandboxapi.RecoveryRecord) bool {
	x, errX := json.Marshal(a)
	y, errY := json.Marshal(b)
	return errX == nil && errY == nil && bytes.Equal(x, y)
}

// identityLie is the identity case's fault. Armed, the case's proxy
// answers GET /info with OtherDaemonID: the readiness check of Acquire
// meets another daemon. The lie ends when the target's first cleanup
// record (phase stopping) reaches the store, before that cleanup's own
// admission: the driver repeats daemon admission before it removes
// anything and never removes on a daemon other than the record's
// (docs/contract.md#profiles-and-admission), so a destroy that met the other daemon
// would refuse, and the refused sandbox is destroyed only on the real one.
// No record naming OtherDaemonID is ever stored: a refill admitted while
// the lie is on fails at its first checkpoint, before any effect.
type identityLie struct {
	mu     sync.Mutex
	proxy  *faultproxy.Proxy
	target sandboxapi.SandboxID
	armed  bool
}

func (l *identityLie) arm(target sandboxapi.SandboxID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.target, l.armed = target, true
	l.proxy.SetRules(faultproxy.RewriteReply(faultproxy.Request("GET", `/info`), withDaemonID(OtherDaemonID)))
}

func (l *identityLie) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.armed {
		l.proxy.SetRules()
		l.armed = false
	}
}

// gate is the store's gate: it refuses records of the other daemon and
// ends the lie at the target's first cleanup record.
func (l *identityLie) gate(r sandboxapi.RecoveryRecord) error {
	if r.Authority.BackendIdentity == OtherDaemonID {
		return fmt.Errorf("the record names daemon %q, which only the scenario's proxy claims to be", OtherDaemonID)
	}
	l.mu.Lock()
	target := l.armed && r.SandboxID == l.target && r.Phase == sandboxapi.PhaseStopping
	l.mu.Unlock()
	if target {
		l.end()
	}
	return nil
}

// withDaemonID rewrites an /info reply's "ID" (numbers kept as they are).
func withDaemonID(id string) func([]byte) ([]byte, error) {
	return func(body []byte) ([]byte, error) {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		var v map[string]any
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		v["ID"] = id
		return json.Marshal(v)
	}
}

// identity runs the identity case (WarmPool):
//
//  1. open a pool whose backend reaches the Engine through a fault proxy,
//     its store gated by identityLie; wait until it is full;
//  2. for each sandbox the full pool held, oldest first: arm the lie for
//     it, Acquire, end the lie; check that Acquire refused with a
//     *sandboxapi.StateError naming the other daemon and handed nothing
//     out, and that the sandbox is gone by its exact names and IDs;
//  3. finish.
func (c *poolCase) identity(ctx context.Context) error {
	defer c.finish(ctx)
	lie := &identityLie{}
	c.store.gate = lie.gate
	if err := c.open(longIdle, 250*time.Millisecond, true); err != nil {
		return err
	}
	lie.proxy = c.proxy
	defer lie.end()
	full, err := c.waitFull(ctx)
	if err != nil {
		return err
	}
	want := fmt.Sprintf("*sandboxapi.StateError naming daemon %q; nothing handed out", OtherDaemonID)
	for i, target := range full {
		n := i + 1
		if idle := c.pool.Idle(); len(idle) == 0 || idle[0] != target {
			return fmt.Errorf("acquisition %d: the oldest idle sandbox is not %s of the full pool: idle %v", n, target, idle)
		}
		r, ok := c.store.latest(target)
		if !ok || r.Phase != sandboxapi.PhaseRunning {
			return fmt.Errorf("acquisition %d: no running record of %s in the store", n, target)
		}
		lie.arm(target)
		sb, err := c.acquire(ctx)
		lie.end()
		var se *sandboxapi.StateError
		got := fmt.Sprintf("%T: %s", err, errText(err))
		if sb != nil {
			got = "handed out " + string(sb.ID())
		}
		c.check(fmt.Sprintf("acquisition %d is refused with *sandboxapi.StateError naming the other daemon, nothing handed out", n), want, got,
			sb == nil && errors.As(err, &se) && strings.Contains(err.Error(), OtherDaemonID))

		cctx, cancel := cleanupContext(ctx, c.env.Policy)
		present, probes, perr := presence(cctx, c.env.Engine, r)
		cancel()
		if perr != nil {
			return perr
		}
		c.check(fmt.Sprintf("acquisition %d: the refused sandbox is gone (exact names and IDs)", n), "every resource 404",
			fmt.Sprintf("%s: %s", target, strings.Join(probes, "; ")), len(probes) > 0 && present == 0)
	}
	c.rec.Observe(c.name+": /info replies rewritten", len(c.proxy.Fired()))
	return nil
}

// close runs the close case (WarmPool):
//
//  1. open a pool and wait until it is full; note its idle sandboxes;
//  2. Close it;
//  3. check that no goroutine runs sandboxapi.Pool code (looked for over
//     200 ms: a goroutine may still be returning from its last call);
//  4. check that Close returned nil and every idle sandbox is gone, by
//     exact names and IDs;
//  5. Acquire after Close (observed: ErrPoolClosed).
func (c *poolCase) close(ctx context.Context) error {
	defer c.finish(ctx)
	if err := c.open(longIdle, time.Second, false); err != nil {
		return err
	}
	idle, err := c.waitFull(ctx)
	if err != nil {
		return err
	}
	cerr := c.pool.Close(context.WithoutCancel(ctx))
	c.closed = true
	var running []string
	gone := waitUntil(ctx, 200*time.Millisecond, func() bool {
		running = poolGoroutines()
		return len(running) == 0
	})
	c.check("no goroutine runs sandboxapi.Pool code once Close returned", "none",
		strings.Join(append([]string{"none"}, running...)[min(len(running), 1):], "; "), gone)

	cctx, cancel := cleanupContext(ctx, c.env.Policy)
	defer cancel()
	var left []string
	for _, id := range idle {
		r, _ := c.store.latest(id)
		present, probes, err := presence(cctx, c.env.Engine, r)
		if err != nil {
			return err
		}
		if present > 0 || len(probes) == 0 {
			left = append(left, fmt.Sprintf("%s: %s", id, strings.Join(probes, "; ")))
		}
	}
	c.check("Close returned nil and every idle sandbox is gone (exact names and IDs)", fmt.Sprintf("nil; %d sandboxes gone", len(idle)),
		fmt.Sprintf("%s; %s", errText(cerr), strings.Join(append([]string{fmt.Sprintf("%d sandboxes gone", len(idle))}, left...)[min(len(left), 1):], ", ")),
		cerr == nil && len(left) == 0)
	_, aerr := c.pool.Acquire(ctx)
	c.rec.Observe(c.name+": Acquire after Close", fmt.Sprintf("%T: %s (ErrPoolClosed: %t)", aerr, errText(aerr), errors.Is(aerr, sandboxapi.ErrPoolClosed)))
	return nil
}

// poolFrame marks a stack frame of a sandboxapi.Pool method.
const poolFrame = "/sandboxapi.(*Pool)."

// poolGoroutines returns, for each goroutine whose stack holds a
// sandboxapi.Pool frame, its header and that frame. The whole dump is
// read (up to 64 MiB).
func poolGoroutines() []string {
	buf := make([]byte, 256<<10)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) || len(buf) >= 64<<20 {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		i := strings.Index(g, poolFrame)
		if i < 0 {
			continue
		}
		head, _, _ := strings.Cut(g, "\n")
		start := strings.LastIndexByte(g[:i], '\n') + 1
		frame, _, _ := strings.Cut(g[start:], "\n")
		out = append(out, head+" in "+strings.TrimSpace(frame))
	}
	return out
}

// waitUntil polls cond every 20 ms until it holds, bound passed or ctx
// ended, and reports whether it held.
func waitUntil(ctx context.Context, bound time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(bound)
	for !cond() {
		if !time.Now().Before(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
	return true
}

// presence inspects, read-only, every resource of r by exact name and,
// once identified, exact ID (CheckAbsent), and returns how many are
// present and each one's probe.
func presence(ctx context.Context, cli *client.Client, r sandboxapi.RecoveryRecord) (present int, probes []string, err error) {
	for _, res := range Resources(recordOwner{r: r}) {
		absent, probe, err := CheckAbsent(ctx, cli, res)
		if err != nil {
			return present, probes, err
		}
		if !absent {
			present++
		}
		probes = append(probes, probe)
	}
	return present, probes, nil
}

// poolEvent is a sandboxapi.PoolEvent and when the pool emitted it.
type poolEvent struct {
	sandboxapi.PoolEvent
	At time.Time
}

// poolEvents collects a pool's events (PoolOptions.OnEvent).
type poolEvents struct {
	mu  sync.Mutex
	evs []poolEvent
}

func (l *poolEvents) add(ev sandboxapi.PoolEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evs = append(l.evs, poolEvent{PoolEvent: ev, At: time.Now()})
}

// first returns the first event of kind after since (and of sandbox id,
// when given).
func (l *poolEvents) first(kind sandboxapi.PoolEventKind, since time.Time, id ...sandboxapi.SandboxID) (poolEvent, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ev := range l.evs {
		if ev.Kind == kind && ev.At.After(since) && (len(id) == 0 || ev.SandboxID == id[0]) {
			return ev, true
		}
	}
	return poolEvent{}, false
}

// list renders the events as "+<offset from start> <kind> <sandbox>
// [error]".
func (l *poolEvents) list(start time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.evs))
	for _, ev := range l.evs {
		s := fmt.Sprintf("+%s %s %s", ev.At.Sub(start).Round(time.Millisecond), ev.Kind, ev.SandboxID)
		if ev.Err != nil {
			s += ": " + ev.Err.Error()
		}
		out = append(out, s)
	}
	return out
}

// recordStore is a recovery store of one file per sandbox,
// <dir>/<sandbox ID>.json, each replaced atomically by
// sandboxapi.PersistToFile. It also keeps each sandbox's latest record in
// memory.
type recordStore struct {
	dir string
	// gate, when set, runs before a record is written; its error refuses
	// the record (the persist fails, and so does the effect it precedes).
	gate func(sandboxapi.RecoveryRecord) error
	// track, when set, receives at a sandbox's first record an owner that
	// reports its latest record (Record.Track).
	track func(sandboxapi.CleanupOwner)

	mu      sync.Mutex
	records map[sandboxapi.SandboxID]sandboxapi.RecoveryRecord
	n       int
}

// persist is the store's sandboxapi.PersistFunc.
func (s *recordStore) persist(ctx context.Context, r sandboxapi.RecoveryRecord) error {
	if s.gate != nil {
		if err := s.gate(r); err != nil {
			return err
		}
	}
	name := string(r.SandboxID)
	if name == "" || filepath.Base(name) != name || strings.HasPrefix(name, ".") {
		return fmt.Errorf("sandbox ID %q is not a file name", r.SandboxID)
	}
	if err := sandboxapi.PersistToFile(filepath.Join(s.dir, name+".json"))(ctx, r); err != nil {
		return err
	}
	s.mu.Lock()
	if s.records == nil {
		s.records = map[sandboxapi.SandboxID]sandboxapi.RecoveryRecord{}
	}
	_, seen := s.records[r.SandboxID]
	s.records[r.SandboxID] = r.Clone()
	s.n++
	s.mu.Unlock()
	if !seen && s.track != nil {
		s.track(storedOwner{s: s, id: r.SandboxID})
	}
	return nil
}

// latest returns the latest record persisted for id.
func (s *recordStore) latest(id sandboxapi.SandboxID) (sandboxapi.RecoveryRecord, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[id]
	return r.Clone(), ok
}

// count is the number of records persisted.
func (s *recordStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// readRecordDir reads every record file of a recordStore directory, in
// name order, as a controller restarted after a crash would.
func readRecordDir(dir string) ([]sandboxapi.RecoveryRecord, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []sandboxapi.RecoveryRecord
	for _, n := range names {
		if strings.HasPrefix(filepath.Base(n), ".") {
			continue
		}
		r, err := sandboxapi.ReadRecoveryRecordFile(n)
		if err != nil {
			return nil, fmt.Errorf("read recovery record %s: %w", n, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// storedOwner reports the latest record of one sandbox of a recordStore;
// it only reports (the runner's absence check reads it).
type storedOwner struct {
	s  *recordStore
	id sandboxapi.SandboxID
}

func (o storedOwner) RecoveryRecord() sandboxapi.RecoveryRecord {
	r, _ := o.s.latest(o.id)
	return r
}
func (o storedOwner) Stop(context.Context) error {
	return errors.New("record only: the pool owns the sandbox")
}
func (o storedOwner) Destroy(context.Context) error {
	return errors.New("record only: the pool owns the sandbox")
}
