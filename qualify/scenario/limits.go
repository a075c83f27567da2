package scenario

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/moby/moby/client"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/sandboxapi"
)

// PIDExhaustion spawns far more descendants than the policy's pids limit
// (a fork bomb that stops at its first failure): spawning must fail with
// EAGAIN inside below the cap, and the observer must show pids.current
// within the cap and pids.events max counted. (A host fork+exec timed here
// could not fail: a cgroup's pids cap of a few dozen never slows the host.)
type PIDExhaustion struct{}

// PIDParams are the pid-exhaustion params.
type PIDParams struct {
	// PIDs overrides the policy's pids limit; default 32.
	PIDs int64 `json:"pids,omitempty"`
	// Spawn is how many descendants the probe tries to start; default 8x pids.
	Spawn int64 `json:"spawn,omitempty"`
}

// Name returns "pid-exhaustion".
func (PIDExhaustion) Name() string { return "pid-exhaustion" }

func (PIDExhaustion) params(raw map[string]any) (PIDParams, error) {
	var p PIDParams
	if err := DecodeParams(raw, &p); err != nil {
		return p, err
	}
	if p.PIDs == 0 {
		p.PIDs = 32
	}
	if p.PIDs < 8 || p.PIDs > 4096 {
		return p, fmt.Errorf("params.pids: want 8..4096, got %d", p.PIDs)
	}
	if p.Spawn == 0 {
		p.Spawn = 8 * p.PIDs
	}
	if p.Spawn <= p.PIDs || p.Spawn > 65536 {
		return p, fmt.Errorf("params.spawn: want pids+1..65536, got %d", p.Spawn)
	}
	return p, nil
}

// Validate checks params: pids, spawn.
func (s PIDExhaustion) Validate(params map[string]any) error {
	_, err := s.params(params)
	return err
}

// Run executes the fork bomb.
func (s PIDExhaustion) Run(ctx context.Context, env *Env, params map[string]any, rec *Record) error {
	p, err := s.params(params)
	if err != nil {
		return err
	}
	rec.Request("pids", p.PIDs)
	rec.Request("spawn", p.Spawn)
	o, err := startObserved(ctx, env, rec, "bomb", withResources(env.Policy, 0, p.PIDs))
	defer o.cleanup(ctx)
	if err != nil {
		return err
	}
	rec.Equal("observer pids.max", p.PIDs, val(o.snaps[0].PidsMax))
	series := o.series(ctx)
	defer series()
	exit, stdout, _, err := o.run(ctx, probeSpec("spawn", strconv.FormatInt(p.Spawn, 10), "30"))
	if err != nil {
		return err
	}
	ser := series()
	rs, err := results(stdout)
	if err != nil || len(rs) != 1 {
		return fmt.Errorf("probe spawn result: %v (%d results)", err, len(rs))
	}
	r := rs[0]
	rec.Observe("spawn", r)
	rec.Equal("exit receipt", sandboxapi.Exited(0).String(), exit.String())
	rec.Equal("spawn fails inside with", "EAGAIN", r.Errno)
	rec.Check("descendants started below the cap", fmt.Sprintf("0 < n < %d", p.PIDs), r.Done, r.Done > 0 && r.Done < p.PIDs)
	checkSeriesPids(rec, "bomb", ser, r.Done)

	during := o.snap("during")
	// The cap was hit with the probe's own threads counted; once it
	// exited its descendants remain.
	cur := num(during.PidsCurrent)
	rec.Check("observer pids.current: the descendants, within the cap", fmt.Sprintf("%d..%d", r.Done, p.PIDs), cur, cur >= r.Done && cur <= p.PIDs)
	// The sandbox's own limit refused the forks: read where the kernel
	// counts exactly that from Linux 6.11 (pids.events.local; pids.events
	// is hierarchical there), and before it pids.events, which counts the
	// refusals to the scope's tasks; that they were the scope's own limit
	// is shown by pids.current at the cap, checked above.
	ev, source := during.PidsLimitRefusals()
	rec.Check("observer "+source+" counted the refusals", ">= 1", ev, ev >= 1)
	if during.PidsMaxEventsLocal != nil {
		// Hierarchical counts include the local ones.
		hier := num(during.PidsMaxEvents)
		rec.Check("observer pids.events max (hierarchical) includes the local refusals", fmt.Sprintf(">= %d", ev), hier, hier >= ev)
	}
	return nil
}

// TmpfsBounds fills both tmpfs mounts beyond their sizes: writes must fail
// with ENOSPC at about the size, and the written pages must be charged to
// the sandbox's memory (observer shmem and usage), since tmpfs lives in
// memory.
type TmpfsBounds struct{}

// Name returns "tmpfs-bounds".
func (TmpfsBounds) Name() string { return "tmpfs-bounds" }

// Validate accepts no params.
func (TmpfsBounds) Validate(params map[string]any) error {
	return DecodeParams(params, &struct{}{})
}

// Run fills /tmp and /home/sandbox.
func (s TmpfsBounds) Run(ctx context.Context, env *Env, params map[string]any, rec *Record) error {
	if err := s.Validate(params); err != nil {
		return err
	}
	ts := env.Policy.TemporaryStorage
	rec.Request("temporaryStorage", ts)
	o, err := startObserved(ctx, env, rec, "fill", env.Policy)
	defer o.cleanup(ctx)
	if err != nil {
		return err
	}
	before := o.snaps[0]
	script := fmt.Sprintf("%[1]s fill %[2]s/fill %[3]d && %[1]s fill %[4]s/fill %[5]d",
		ProbePath, driver.TempPath, 2*ts.TempBytes, driver.HomePath, 2*ts.HomeBytes)
	series := o.series(ctx)
	defer series()
	exit, stdout, _, err := o.run(ctx, shellSpec(script))
	if err != nil {
		return err
	}
	ser := series()
	rec.Equal("exit receipt", sandboxapi.Exited(0).String(), exit.String())
	rs, err := results(stdout)
	if err != nil || len(rs) != 2 {
		return fmt.Errorf("probe fill results: %v (%d results)", err, len(rs))
	}
	rec.Observe("fill", rs)
	for i, want := range []struct {
		path string
		size int64
	}{{driver.TempPath, ts.TempBytes}, {driver.HomePath, ts.HomeBytes}} {
		r := rs[i]
		rec.Equal(want.path+": write beyond the size fails with", "ENOSPC", r.Errno)
		rec.Check(want.path+": bytes written", fmt.Sprintf("(%d/2, %d]", want.size, want.size), r.Done, r.Done > want.size/2 && r.Done <= want.size)
	}
	written := rs[0].Done + rs[1].Done
	info, err := env.Engine.Info(ctx, client.InfoOptions{})
	if err != nil {
		return fmt.Errorf("fill: Engine /info for its CPU count: %w", err)
	}
	checkSeriesRiseBatched(rec, "fill", "memory usage (bytes, tmpfs pages charged)", ser, memoryUsage, written,
		chargeSlack(int64(info.Info.NCPU), int64(os.Getpagesize())))
	during := o.snap("during")
	shmem := num(during.ShmemBytes) - num(before.ShmemBytes)
	rec.Check("observer: tmpfs pages charged as shmem", fmt.Sprintf(">= %d (bytes written)", written), shmem, shmem >= written)
	use := num(during.MemoryUsageBytes)
	rec.Check("observer: memory usage includes them", fmt.Sprintf(">= %d", written), use, use >= written)
	return nil
}
