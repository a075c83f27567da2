package scenario

import (
	"context"
	"errors"
	"fmt"

	"github.com/qualbox/qualbox/sandboxapi"
)

// ExactCleanup starts two sibling sandboxes in the same namespace and
// destroys one: every resource of the destroyed one is absent by exact ID,
// every resource of the sibling is still present and its keeper's scope
// still occupied (no prune, no label scan, no name fallback).
type ExactCleanup struct{}

// Name returns "exact-cleanup".
func (ExactCleanup) Name() string { return "exact-cleanup" }

// Validate accepts no params.
func (ExactCleanup) Validate(params map[string]any) error { return noParams(params) }

// Run destroys one of two siblings.
func (s ExactCleanup) Run(ctx context.Context, env *Env, params map[string]any, rec *Record) error {
	a, err := startObserved(ctx, env, rec, "destroyed", env.Policy)
	defer a.cleanup(ctx)
	if err != nil {
		return err
	}
	b, err := startObserved(ctx, env, rec, "sibling", env.Policy)
	defer b.cleanup(ctx)
	if err != nil {
		return err
	}
	a.cleanup(ctx)
	cctx, cancel := cleanupContext(ctx, env.Policy)
	defer cancel()
	for _, r := range Resources(a.res) {
		absent, probe, err := CheckAbsent(cctx, env.Engine, r)
		if err != nil {
			return err
		}
		rec.Check(fmt.Sprintf("destroyed: %s %s absent", r.Role, r.ID), "404", probe, absent)
	}
	sib := Resources(b.res)
	rec.Check("sibling: identified resources", ">= 3", len(sib), len(sib) >= 3)
	for _, r := range sib {
		absent, probe, err := CheckAbsent(cctx, env.Engine, r)
		if err != nil {
			return err
		}
		rec.Check(fmt.Sprintf("sibling: %s %s still present", r.Role, r.ID), "present", probe, !absent)
	}
	snap := b.snap("after sibling destroyed")
	rec.Check("sibling: observer scope still occupied", "keeper in cgroup.procs", snap.Procs, containsInt(snap.Procs, b.scope.PID))
	return nil
}

// UnsupportedQuota requests a workspace disk quota, which no Docker
// backend offers (docs/qualification.md#scenarios): Reserve must fail
// synchronously with *sandboxapi.UnsupportedError naming the field, before
// any Engine effect, and Support must say the quota is unsupported.
type UnsupportedQuota struct {
	// Wrap, when set, wraps the driver backend the scenario asks; nil asks
	// the driver itself. Negative tests wrap it in a backend that silently
	// drops the quota, which the scenario must fail.
	Wrap func(sandboxapi.Backend) sandboxapi.Backend
}

// Name returns "unsupported-quota".
func (UnsupportedQuota) Name() string { return "unsupported-quota" }

// Validate accepts no params.
func (UnsupportedQuota) Validate(params map[string]any) error { return noParams(params) }

// Run reserves with a required quota.
func (s UnsupportedQuota) Run(ctx context.Context, env *Env, params map[string]any, rec *Record) error {
	drv, err := env.Backend(env.Profile)
	if err != nil {
		return err
	}
	defer drv.Close()
	var b sandboxapi.Backend = drv
	if s.Wrap != nil {
		b = s.Wrap(b)
	}
	pol := env.Policy
	pol.WorkspaceDiskQuota = sandboxapi.WorkspaceDiskQuota{Kind: sandboxapi.QuotaRequired, Bytes: 64 << 20, Accounting: "allocated_blocks"}
	rec.Request("workspaceDiskQuota", pol.WorkspaceDiskQuota)
	sup := b.Support()
	rec.Observe("support", sup)
	rec.Equal("support: workspaceDiskQuota", false, sup.WorkspaceDiskQuota)
	res, err := b.Reserve(sandboxapi.Request{Policy: pol}, sandboxapi.InProcess())
	if res != nil {
		rec.Track(res)
		stopErr, destroyErr := stopAndDestroy(ctx, env.Policy, res)
		rec.CleanupError("stop", stopErr)
		rec.CleanupError("destroy", destroyErr)
	}
	rec.Observe("reserve error", errText(err))
	var ue *sandboxapi.UnsupportedError
	rec.Check("reserve fails with *sandboxapi.UnsupportedError", "*sandboxapi.UnsupportedError", fmt.Sprintf("%T: %s", err, errText(err)), errors.As(err, &ue))
	rec.Equal("no reservation returned", true, res == nil)
	return nil
}
