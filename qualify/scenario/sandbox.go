package scenario

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/qualbox/qualbox/sandboxapi"
)

// maxCapture bounds how much of one output stream a scenario keeps.
const maxCapture = 4 << 20

// execResult is the outcome of one process in a fresh sandbox.
type execResult struct {
	Stdout, Stderr []byte
	Exit           sandboxapi.Exit
	Effective      sandboxapi.EffectivePolicy
	SandboxID      string
}

// cleanupContext returns a context detached from ctx's cancellation and
// bounded by the policy's cleanup deadline, so a cancelled scenario still
// cleans up.
func cleanupContext(ctx context.Context, p sandboxapi.Policy) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), time.Duration(p.Deadlines.CleanupMs)*time.Millisecond)
}

// stopAndDestroy stops then destroys owner, each under its own detached
// cleanup context, and returns both errors.
func stopAndDestroy(ctx context.Context, p sandboxapi.Policy, owner sandboxapi.CleanupOwner) (stopErr, destroyErr error) {
	sctx, cancel := cleanupContext(ctx, p)
	stopErr = owner.Stop(sctx)
	cancel()
	dctx, cancel := cleanupContext(ctx, p)
	destroyErr = owner.Destroy(dctx)
	cancel()
	return stopErr, destroyErr
}

// execOnce reserves and starts a sandbox of env's profile, runs spec as
// its one process with stdin closed, captures stdout and stderr separately
// and waits for the exit receipt. Cleanup (stop, destroy) always runs;
// when explicit is false its failures are recorded as cleanup errors, when
// true the caller gets them through after (and records them as it likes).
func execOnce(ctx context.Context, env *Env, rec *Record, spec sandboxapi.ProcessSpec, after func(stopErr, destroyErr error)) (execResult, error) {
	backend, err := env.Backend(env.Profile)
	if err != nil {
		return execResult{}, fmt.Errorf("driver backend: %w", err)
	}
	defer backend.Close()
	return execOnceOn(ctx, env, rec, backend, spec, after)
}

// execOnceOn is execOnce on backend, which the caller closes.
func execOnceOn(ctx context.Context, env *Env, rec *Record, backend sandboxapi.Backend, spec sandboxapi.ProcessSpec, after func(stopErr, destroyErr error)) (execResult, error) {
	var res execResult
	rec.Request("policy", env.Policy)
	rec.Request("process", spec)
	reservation, err := backend.Reserve(env.Request(), sandboxapi.InProcess())
	if err != nil {
		return res, fmt.Errorf("reserve: %w", err)
	}
	rec.Track(reservation)
	res.SandboxID = string(reservation.ID())
	defer func() {
		stopErr, destroyErr := stopAndDestroy(ctx, env.Policy, reservation)
		if after != nil {
			after(stopErr, destroyErr)
			return
		}
		rec.CleanupError("stop", stopErr)
		rec.CleanupError("destroy", destroyErr)
	}()

	env.Log("starting sandbox %s", reservation.ID())
	sb, err := reservation.Start(ctx)
	if err != nil {
		return res, fmt.Errorf("start sandbox: %w", err)
	}
	res.Effective = sb.Effective()
	rec.Observe("effective", res.Effective)
	pr, err := sb.ReserveProcess(spec)
	if err != nil {
		return res, fmt.Errorf("reserve process: %w", err)
	}
	proc, err := pr.Start(ctx)
	if err != nil {
		return res, fmt.Errorf("start process: %w", err)
	}
	var wg sync.WaitGroup
	var outErr, errErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		res.Stdout, outErr = io.ReadAll(io.LimitReader(proc.Stdout(), maxCapture))
	}()
	go func() {
		defer wg.Done()
		res.Stderr, errErr = io.ReadAll(io.LimitReader(proc.Stderr(), maxCapture))
	}()
	closeErr := proc.Stdin().Close()
	exit, waitErr := proc.Wait(ctx)
	if waitErr != nil {
		// Cancelled or failed: abandon the streams (which stops the
		// sandbox) so the readers end.
		proc.Stdout().Close()
		proc.Stderr().Close()
	}
	wg.Wait()
	res.Exit = exit
	if err := errors.Join(waitErr, outErr, errErr, closeErr); err != nil {
		return res, fmt.Errorf("process: %w", err)
	}
	return res, nil
}
