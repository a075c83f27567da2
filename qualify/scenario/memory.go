package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"strconv"
	"sync"
	"time"

	"github.com/qualbox/qualbox/qualify/guest/facts"
	"github.com/qualbox/qualbox/qualify/observer"
	"github.com/qualbox/qualbox/sandboxapi"
)

// MemoryExhaustion allocates beyond memoryBytes inside a sandbox
// (docs/qualification.md#scenarios). The probe must be killed (exit 137,
// SIGKILL), the kernel's counters must show it (oom_kill up, failcnt or max
// events up), and stop/destroy must still be clean with the scope gone. A
// control sandbox whose `sleep` the controller kills by stopping compute must
// NOT be classified as OOM: its oom_kill counter, read after the stop's exit
// receipt (or, when the scope went with the container, last polled across the
// stop), did not rise, and its receipt is unavailable{sandbox_stopped}.
type MemoryExhaustion struct{}

// MemoryParams are the memory-exhaustion params.
type MemoryParams struct {
	// MemoryBytes overrides the policy's memory (memory+swap); default
	// 64 MiB, which keeps the scenario fast.
	MemoryBytes int64 `json:"memoryBytes,omitempty"`
	// AllocMiB is how much the probe touches; default 2x memory.
	AllocMiB int64 `json:"allocMiB,omitempty"`
}

// Name returns "memory-exhaustion".
func (MemoryExhaustion) Name() string { return "memory-exhaustion" }

func (MemoryExhaustion) params(raw map[string]any) (MemoryParams, error) {
	var p MemoryParams
	if err := DecodeParams(raw, &p); err != nil {
		return p, err
	}
	if p.MemoryBytes == 0 {
		p.MemoryBytes = 64 << 20
	}
	if p.MemoryBytes < 16<<20 || p.MemoryBytes > 4<<30 {
		return p, fmt.Errorf("params.memoryBytes: want 16 MiB..4 GiB, got %d", p.MemoryBytes)
	}
	if p.AllocMiB == 0 {
		p.AllocMiB = 2 * p.MemoryBytes >> 20
	}
	if p.AllocMiB <= p.MemoryBytes>>20 {
		return p, fmt.Errorf("params.allocMiB: want more than memoryBytes (%d MiB), got %d", p.MemoryBytes>>20, p.AllocMiB)
	}
	return p, nil
}

// Validate checks params: memoryBytes, allocMiB.
func (s MemoryExhaustion) Validate(params map[string]any) error {
	_, err := s.params(params)
	return err
}

// KillCause classifies how a process died from its receipt and the
// observer's oom_kill delta over its lifetime: "oom" only when the kernel
// counted an OOM kill in the scope.
func KillCause(exit sandboxapi.Exit, oomKillDelta int64) string {
	switch {
	case oomKillDelta > 0 && exit == sandboxapi.Exited(137):
		return "oom"
	case exit.Kind == sandboxapi.ExitUnavailable:
		return "stopped by controller"
	case exit == sandboxapi.Exited(137):
		return "killed (not OOM)"
	}
	return "exited"
}

// Run executes the OOM case and the controller-kill control case.
func (s MemoryExhaustion) Run(ctx context.Context, env *Env, params map[string]any, rec *Record) error {
	p, err := s.params(params)
	if err != nil {
		return err
	}
	rec.Request("memoryBytes", p.MemoryBytes)
	rec.Request("allocMiB", p.AllocMiB)
	pol := withResources(env.Policy, p.MemoryBytes, 0)

	if err := func() error {
		o, err := startObserved(ctx, env, rec, "oom", pol)
		defer o.cleanup(ctx)
		if err != nil {
			return err
		}
		before := o.snaps[0]
		rec.Equal("oom: observer memory limit", p.MemoryBytes, val(before.MemoryLimitBytes))
		if before.Version == 1 {
			rec.Equal("oom: observer memory+swap limit (v1 memsw)", p.MemoryBytes, val(before.MemorySwapLimitBytes))
		} else {
			rec.Equal("oom: observer swap max (v2)", int64(0), val(before.MemorySwapLimitBytes))
		}
		series := o.series(ctx)
		defer series()
		exit, _, stderr, err := o.run(ctx, probeSpec("alloc", strconv.FormatInt(p.AllocMiB, 10)))
		if err != nil {
			return err
		}
		checkSeriesOOM(rec, "oom", series(), p.MemoryBytes)
		during := o.snap("during")
		delta := num(during.OOMKills) - num(before.OOMKills)
		rec.Equal("oom: exit receipt (SIGKILL)", sandboxapi.Exited(137).String(), exit.String())
		last := lastProgress(stderr)
		rec.Observe("oom: last progress MiB", last)
		rec.Check("oom: probe got part way before the kill", fmt.Sprintf("0 < MiB < %d", p.AllocMiB), last, last > 0 && last < p.AllocMiB)
		rec.Check("oom: observer oom_kill counter rose", ">= 1", delta, delta >= 1)
		// Kernel 6.x v1 leaves failcnt at 0 when the OOM killer resolves
		// the charge; the hits are recorded, the peak is checked.
		rec.Observe("oom: observer limit hits (v1 failcnt/memsw.failcnt, v2 max events)", during.LimitHits())
		peak := num(during.PeakUsageBytes)
		rec.Check("oom: observer peak usage reached the limit", fmt.Sprintf(">= 90%% of %d", p.MemoryBytes), peak, peak >= p.MemoryBytes*9/10)
		rec.Equal("oom: classified", "oom", KillCause(exit, delta))
		return nil
	}(); err != nil {
		return err
	}

	o, err := startObserved(ctx, env, rec, "control", pol)
	defer o.cleanup(ctx)
	if err != nil {
		return err
	}
	pr, err := o.start(ctx, probeSpec("sleep", "30"), false)
	if err != nil {
		return err
	}
	time.Sleep(300 * time.Millisecond)
	o.snap("during")
	// The stop removes compute and with it the scope directory, possibly
	// before the exit receipt: poll oom_kill across the stop and read it
	// once more after the receipt, before destroy.
	w := watchOOMKills(env.HostFS(), o.scope, 5*time.Millisecond)
	stopErr := o.stop(ctx)
	rec.Check("control: stop compute", "nil", errText(stopErr), stopErr == nil)
	if stopErr != nil {
		// No receipt comes until a stop succeeds: o.cleanup retries it.
		w.finish()
		return fmt.Errorf("control: stop: %w", stopErr)
	}
	exit, err := pr.wait(ctx)
	kills := w.finish()
	if err != nil {
		return fmt.Errorf("control: wait: %w", err)
	}
	rec.Observe("exit:control", exit)
	rec.Observe("control: oom_kill across the stop", kills)
	before := o.snaps[0].OOMKills
	rec.Check("control: observer oom_kill read across the stop", "a value read after the stop began", kills.Source, kills.Value != nil && before != nil)
	delta := int64(-1)
	if kills.Value != nil && before != nil {
		delta = *kills.Value - *before
	}
	rec.Equal("control: exit receipt", sandboxapi.Unavailable().String(), exit.String())
	rec.Equal("control: observer oom_kill delta over the stop", int64(0), delta)
	cause := KillCause(exit, delta)
	rec.Check("control: controller kill of sleep is not classified OOM", "stopped by controller", cause, kills.Value != nil && cause == "stopped by controller")
	return nil
}

// oomKills is the oom_kill counter as last read across a stop.
type oomKills struct {
	// Value is the last value read; nil when no read succeeded.
	Value *int64 `json:"value"`
	// Source is "read after the exit receipt" or "last of <n> polls at
	// <time> (then: <error>)" when the scope was gone by the receipt.
	Source string `json:"source"`
	// Reads counts successful polls.
	Reads int `json:"reads"`
}

// oomWatch polls a scope's oom_kill counter until finish.
type oomWatch struct {
	fsys  fs.FS
	scope observer.Scope
	stop  chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	last  *int64
	at    time.Time
	reads int
	err   error
}

// watchOOMKills starts polling scope's oom_kill every interval (the first
// read is immediate).
func watchOOMKills(fsys fs.FS, scope observer.Scope, interval time.Duration) *oomWatch {
	w := &oomWatch{fsys: fsys, scope: scope, stop: make(chan struct{}), done: make(chan struct{})}
	w.poll()
	go func() {
		defer close(w.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
				w.poll()
			}
		}
	}()
	return w
}

func (w *oomWatch) poll() {
	v, err := w.scope.OOMKills(w.fsys)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.err = err
		return
	}
	w.last, w.at, w.reads, w.err = &v, time.Now().UTC(), w.reads+1, nil
}

// finish stops polling and reads once more: that read wins when the scope
// is still there, otherwise the last polled value stands.
func (w *oomWatch) finish() oomKills {
	close(w.stop)
	<-w.done
	v, err := w.scope.OOMKills(w.fsys)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil {
		return oomKills{Value: &v, Source: "read after the exit receipt", Reads: w.reads}
	}
	w.err = err
	if w.last == nil {
		return oomKills{Source: fmt.Sprintf("no successful read: %v", w.err), Reads: w.reads}
	}
	return oomKills{Value: w.last, Source: fmt.Sprintf("last of %d polls at %s (then: %v)", w.reads, w.at.Format(time.RFC3339Nano), w.err), Reads: w.reads}
}

// lastProgress returns the Done of the probe's last alloc progress line.
func lastProgress(stderr []byte) int64 {
	var last int64
	for _, line := range bytes.Split(stderr, []byte("\n")) {
		var p facts.Progress
		if json.Unmarshal(line, &p) == nil && p.Action == "alloc" {
			last = p.Done
		}
	}
	return last
}
