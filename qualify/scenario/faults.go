package scenario

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/qualify/faultproxy"
	"github.com/qualbox/qualbox/sandboxapi"
)

// LostEngineReplies puts a scenario-owned Unix socket proxy between the
// driver and the Engine that forwards a request and drops the Engine's
// reply (docs/contract.md#recovery). Case "create": the compute create
// lands but its reply is lost, so Start fails and the record keeps the
// compute in "creating"; destroy must still find it by its exact planned
// name and remove it. Case "remove": the reply to the compute removal is
// lost, so stop fails; a retried stop and destroy must succeed. Afterwards
// every resource is absent (the runner checks by exact ID or name).
type LostEngineReplies struct {
	// CreateFault is the fault put on the compute create; nil is
	// faultproxy.DropReply. Negative tests give faultproxy.DropRequest (the
	// Engine never handled the request), which the scenario must fail.
	CreateFault func(faultproxy.Match) faultproxy.Rule
}

// Name returns "lost-engine-replies".
func (LostEngineReplies) Name() string { return "lost-engine-replies" }

// Validate accepts no params.
func (LostEngineReplies) Validate(params map[string]any) error { return noParams(params) }

// proxied returns a backend whose Engine endpoint is a fresh fault proxy
// in a short directory (Unix socket paths are limited to 107 bytes).
func proxied(env *Env, name string, rules ...faultproxy.Rule) (*driver.Backend, *faultproxy.Proxy, func(), error) {
	dir, err := os.MkdirTemp("", "qualbox-proxy-")
	if err != nil {
		return nil, nil, nil, err
	}
	p, err := faultproxy.New(dir, env.Endpoint, rules...)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, nil, err
	}
	spill := filepath.Join(env.Dir, "spill-"+name)
	if err := os.MkdirAll(spill, 0o700); err != nil {
		p.Close()
		os.RemoveAll(dir)
		return nil, nil, nil, err
	}
	b, err := driver.New(driver.Config{
		Profile: env.Profile, Endpoint: p.Endpoint(), Namespace: env.Namespace,
		SpillDirectory: spill, ImageID: env.ImageID, User: env.User,
	})
	done := func() {
		if b != nil {
			b.Close()
		}
		p.Close()
		os.RemoveAll(dir)
	}
	return b, p, done, err
}

// Run executes both cases.
func (s LostEngineReplies) Run(ctx context.Context, env *Env, params map[string]any, rec *Record) error {
	if err := func() error {
		fault := s.CreateFault
		if fault == nil {
			fault = faultproxy.DropReply
		}
		b, p, done, err := proxied(env, "create", fault(faultproxy.Request("POST", `/containers/create`).Nth(1)))
		if err != nil {
			return err
		}
		defer done()
		res, err := b.Reserve(env.Request(), sandboxapi.InProcess())
		if err != nil {
			return err
		}
		rec.Track(res)
		_, serr := res.Start(ctx)
		rec.Check("create: start fails when the create reply is lost", "error", errText(serr), serr != nil)
		rec.Observe("create: fired", p.Fired())
		var compute sandboxapi.RecoveryResource
		for _, r := range res.RecoveryRecord().Resources {
			if r.Role == sandboxapi.RoleCompute {
				compute = r
			}
		}
		// The create was dispatched: the record must never say planned; the
		// driver may already have identified the landed container by name.
		rec.Check("create: compute identity after the lost reply", "creating|identified", string(compute.Identity.Kind),
			compute.Identity.Kind == sandboxapi.IdentityCreating || compute.Identity.Kind == sandboxapi.IdentityIdentified)
		rec.Equal("create: the fault fired once", 1, len(p.Fired()))
		// The reply was lost, not the request: the proxy read the Engine's
		// answer to the create before dropping it. (The compute itself may
		// already be gone: a failed start removes what it identified.)
		status := 0
		if fired := p.Fired(); len(fired) == 1 {
			status = fired[0].Status
		}
		rec.Check("create: the Engine answered the create whose reply was lost (status the proxy read)", "201", status, status == 201)
		stopErr, destroyErr := stopAndDestroy(ctx, env.Policy, res)
		rec.Check("create: stop", "nil", errText(stopErr), stopErr == nil)
		rec.Check("create: destroy removes the created compute by its exact name", "nil", errText(destroyErr), destroyErr == nil)
		return nil
	}(); err != nil {
		return err
	}

	b, p, done, err := proxied(env, "remove")
	if err != nil {
		return err
	}
	defer done()
	res, err := b.Reserve(env.Request(), sandboxapi.InProcess())
	if err != nil {
		return err
	}
	rec.Track(res)
	if _, err := res.Start(ctx); err != nil {
		stopErr, destroyErr := stopAndDestroy(ctx, env.Policy, res)
		rec.CleanupError("remove: stop after the failed start", stopErr)
		rec.CleanupError("remove: destroy after the failed start", destroyErr)
		return fmt.Errorf("remove: start: %w", err)
	}
	computeID := resourceID(res, sandboxapi.RoleCompute)
	p.SetRules(faultproxy.DropReply(faultproxy.Request("DELETE", `/containers/`+computeID).Nth(1)))
	sctx, cancel := cleanupContext(ctx, env.Policy)
	firstStop := res.Stop(sctx)
	cancel()
	rec.Observe("remove: first stop", errText(firstStop))
	rec.Observe("remove: fired", p.Fired())
	rec.Equal("remove: the fault fired once", 1, len(p.Fired()))
	rec.Check("remove: first stop reports the lost reply", "error", errText(firstStop), firstStop != nil)
	stopErr, destroyErr := stopAndDestroy(ctx, env.Policy, res)
	rec.Check("remove: retried stop", "nil", errText(stopErr), stopErr == nil)
	rec.Check("remove: destroy", "nil", errText(destroyErr), destroyErr == nil)
	return nil
}
