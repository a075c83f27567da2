package scenario

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/qualify/guest/facts"
	"github.com/qualbox/qualbox/qualify/observer"
	"github.com/qualbox/qualbox/sandboxapi"
)

// observed is one started sandbox under the cgroup observer: the keeper PID
// is resolved once through the Engine, then only the host's /proc and
// /sys/fs/cgroup are read. Every snapshot is recorded under
// observed["observer:<name>"].
type observed struct {
	name      string
	env       *Env
	rec       *Record
	policy    sandboxapi.Policy
	backend   *driver.Backend
	res       sandboxapi.Reservation
	sb        sandboxapi.Sandbox
	computeID string
	scope     observer.Scope
	mu        sync.Mutex
	snaps     []observer.Snapshot
	absence   *observer.Absence
	cleaned   bool
}

// startObserved reserves and starts a sandbox with policy, records what
// was requested and what the Engine read back, resolves the keeper and
// takes the "before" snapshot. The caller must call cleanup (also on
// error: it is safe on a partial start).
func startObserved(ctx context.Context, env *Env, rec *Record, name string, policy sandboxapi.Policy) (*observed, error) {
	b, err := env.Backend(env.Profile)
	if err != nil {
		return &observed{name: name, env: env, rec: rec, policy: policy}, fmt.Errorf("driver backend: %w", err)
	}
	return startObservedWith(ctx, env, rec, name, policy, b)
}

// startObservedWith is startObserved on backend b, which the observed
// sandbox owns from here on (cleanup closes it).
func startObservedWith(ctx context.Context, env *Env, rec *Record, name string, policy sandboxapi.Policy, b *driver.Backend) (*observed, error) {
	o := &observed{name: name, env: env, rec: rec, policy: policy, backend: b}
	if env.Host == nil {
		if err := observer.Supported("/"); err != nil {
			return o, fmt.Errorf("%s: %w", name, err)
		}
	}
	rec.Request("policy:"+name, policy)
	var err error
	o.res, err = b.Reserve(sandboxapi.Request{Policy: policy}, sandboxapi.InProcess())
	if err != nil {
		return o, fmt.Errorf("reserve %s: %w", name, err)
	}
	rec.Track(o.res)
	env.Log("%s: starting sandbox %s", name, o.res.ID())
	o.sb, err = o.res.Start(ctx)
	if err != nil {
		return o, fmt.Errorf("start %s: %w", name, err)
	}
	rec.Observe("effective:"+name, o.sb.Effective())
	o.computeID = resourceID(o.res, sandboxapi.RoleCompute)
	pid, err := observer.KeeperPID(ctx, env.Engine, o.computeID)
	if err != nil {
		return o, err
	}
	if o.scope, err = observer.Resolve(env.HostFS(), pid); err != nil {
		return o, err
	}
	checkReadable(rec, name+": observer: \"before\" snapshot", o.snap("before"))
	return o, nil
}

// checkReadable records a check that snap read every interface file: the
// limits and counters a scenario compares against must be there, never
// taken as unlimited because they were unreadable.
func checkReadable(rec *Record, name string, snap observer.Snapshot) bool {
	got := "no read errors"
	if len(snap.Errors) > 0 {
		got = fmt.Sprintf("%d read errors: %s", len(snap.Errors), strings.Join(snap.Errors, "; "))
	}
	return rec.Check(name+" read every file", "no read errors", got, len(snap.Errors) == 0)
}

// resourceID returns the identified Engine ID of owner's resource role.
func resourceID(owner sandboxapi.CleanupOwner, role sandboxapi.Role) string {
	for _, r := range owner.RecoveryRecord().Resources {
		if r.Role == role && r.Identity.Kind == sandboxapi.IdentityIdentified {
			return r.Identity.ID
		}
	}
	return ""
}

// snap takes and records a snapshot labelled label.
func (o *observed) snap(label string) observer.Snapshot {
	s := o.scope.Read(o.env.HostFS(), label)
	o.mu.Lock()
	o.snaps = append(o.snaps, s)
	o.mu.Unlock()
	o.record()
	return s
}

func (o *observed) record() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.rec.Observe("observer:"+o.name, map[string]any{
		"computeId": o.computeID, "scope": o.scope, "snapshots": o.snaps, "absence": o.absence,
	})
}

// stop stops compute only (the exact container ID), keeping the sandbox's
// retained resources for destroy.
func (o *observed) stop(ctx context.Context) error {
	sctx, cancel := cleanupContext(ctx, o.policy)
	defer cancel()
	return o.res.Stop(sctx)
}

// cleanup stops and destroys the sandbox (recording failures as cleanup
// errors), then records whether the observer saw the scope gone or empty
// as a check. It runs once.
func (o *observed) cleanup(ctx context.Context) {
	if o.cleaned || o.res == nil {
		if o.backend != nil {
			o.backend.Close()
		}
		return
	}
	o.cleaned = true
	stopErr, destroyErr := stopAndDestroy(ctx, o.policy, o.res)
	o.rec.CleanupError(o.name+": stop", stopErr)
	o.rec.CleanupError(o.name+": destroy", destroyErr)
	o.backend.Close()
	if o.scope.PID == 0 {
		return
	}
	wctx, cancel := cleanupContext(ctx, o.policy)
	a := o.scope.WaitAbsent(wctx, o.env.HostFS(), 50*time.Millisecond)
	cancel()
	o.mu.Lock()
	o.absence = &a
	o.mu.Unlock()
	o.record()
	o.rec.Check(o.name+": observer: scope gone or empty after destroy", "gone|empty", a.String(), a.OK())
}

// proc is one running process of an observed sandbox.
type proc struct {
	p sandboxapi.Process
	// bound limits wait (waitBound).
	bound          time.Duration
	wg             sync.WaitGroup
	stdout, stderr bytes.Buffer
	outErr, errErr error
}

// start runs spec as the sandbox's one process, stdin closed unless
// keepStdin, capturing both streams (bounded).
func (o *observed) start(ctx context.Context, spec sandboxapi.ProcessSpec, keepStdin bool) (*proc, error) {
	o.rec.Request("process:"+o.name, spec)
	pr, err := o.sb.ReserveProcess(spec)
	if err != nil {
		return nil, fmt.Errorf("reserve process: %w", err)
	}
	p, err := pr.Start(ctx)
	if err != nil {
		return nil, fmt.Errorf("start process: %w", err)
	}
	r := &proc{p: p, bound: waitBound(o.policy)}
	r.wg.Add(2)
	go func() {
		defer r.wg.Done()
		_, r.outErr = io.Copy(&r.stdout, io.LimitReader(p.Stdout(), maxCapture))
	}()
	go func() {
		defer r.wg.Done()
		_, r.errErr = io.Copy(&r.stderr, io.LimitReader(p.Stderr(), maxCapture))
	}()
	if !keepStdin {
		if err := p.Stdin().Close(); err != nil {
			return r, fmt.Errorf("close stdin: %w", err)
		}
	}
	return r, nil
}

// waitBound is how long proc.wait waits for a receipt: the policy's startup
// deadline plus twice its cleanup deadline. Every probe the catalogue runs
// ends, or is stopped, well within that; a receipt that has not come by
// then may never come, because after a failed stop the driver settles it
// only on a retried stop, which the scenario's cleanup makes after the
// wait returns.
//
// Both deadlines are validated policy values (at most an hour each:
// sandboxapi.MaxStartupMs, sandboxapi.MaxCleanupMs), so the sum fits a
// time.Duration.
func waitBound(p sandboxapi.Policy) time.Duration {
	return time.Duration(p.Deadlines.StartupMs+2*p.Deadlines.CleanupMs) * time.Millisecond
}

// wait waits for the exit receipt and the streams' end, for at most
// r.bound; a wait past it fails with deadline_exceeded.
func (r *proc) wait(ctx context.Context) (sandboxapi.Exit, error) {
	ctx, cancel := context.WithTimeout(ctx, r.bound)
	defer cancel()
	exit, err := r.p.Wait(ctx)
	if err != nil {
		r.p.Stdout().Close()
		r.p.Stderr().Close()
	}
	r.wg.Wait()
	return exit, errors.Join(err, r.outErr, r.errErr)
}

// run starts spec, waits for it and records its streams and exit.
func (o *observed) run(ctx context.Context, spec sandboxapi.ProcessSpec) (sandboxapi.Exit, []byte, []byte, error) {
	p, err := o.start(ctx, spec, false)
	if err != nil {
		return sandboxapi.Exit{}, nil, nil, err
	}
	exit, err := p.wait(ctx)
	o.rec.Observe("stdout:"+o.name, p.stdout.String())
	o.rec.Observe("stderr:"+o.name, p.stderr.String())
	o.rec.Observe("exit:"+o.name, exit)
	return exit, p.stdout.Bytes(), p.stderr.Bytes(), err
}

// probeSpec runs the guest probe with args.
func probeSpec(args ...string) sandboxapi.ProcessSpec {
	return sandboxapi.ProcessSpec{Executable: ProbePath, Args: args, Env: map[string]string{}, Cwd: driver.WorkPath}
}

// shellSpec runs script with /bin/sh -c.
func shellSpec(script string) sandboxapi.ProcessSpec {
	return sandboxapi.ProcessSpec{Executable: "/bin/sh", Args: []string{"-c", script}, Env: map[string]string{}, Cwd: driver.WorkPath}
}

// results parses the probe's JSON result lines in out, in order.
func results(out []byte) ([]facts.Result, error) {
	var rs []facts.Result
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var r facts.Result
		if err := json.Unmarshal(line, &r); err != nil {
			return rs, fmt.Errorf("probe result %q: %w", line, err)
		}
		if r.Action != "" {
			rs = append(rs, r)
		}
	}
	return rs, nil
}

// val renders an optional counter for checks.
func val(v *int64) any {
	if v == nil {
		return "unlimited/unreadable"
	}
	return *v
}

func num(v *int64) int64 {
	if v == nil {
		return -1
	}
	return *v
}

// withResources returns p with resources changed by the non-zero fields.
func withResources(p sandboxapi.Policy, memory, pids int64) sandboxapi.Policy {
	if memory > 0 {
		p.Resources.MemoryBytes = memory
	}
	if pids > 0 {
		p.Resources.PIDs = pids
	}
	return p
}
