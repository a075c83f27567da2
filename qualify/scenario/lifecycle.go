package scenario

import (
	"context"
	"fmt"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/sandboxapi"
)

// Lifecycle reserves and starts a sandbox, runs a shell that writes one
// line to each output stream and exits with a chosen code, checks the two
// streams are separate and exact and the exit receipt is "exited <code>",
// then stops and destroys the sandbox and checks with exact-ID inspection
// that every resource its recovery record identified is gone (404).
type Lifecycle struct{}

// LifecycleParams are the lifecycle scenario's manifest params.
type LifecycleParams struct {
	// ExitCode is the code the process exits with, 0..255; default 7.
	ExitCode *int `json:"exitCode,omitempty"`
}

// Name returns "lifecycle".
func (Lifecycle) Name() string { return "lifecycle" }

func (Lifecycle) params(raw map[string]any) (int, error) {
	var p LifecycleParams
	if err := DecodeParams(raw, &p); err != nil {
		return 0, err
	}
	if p.ExitCode == nil {
		return 7, nil
	}
	if *p.ExitCode < 0 || *p.ExitCode > 255 {
		return 0, fmt.Errorf("params.exitCode: want 0..255, got %d", *p.ExitCode)
	}
	return *p.ExitCode, nil
}

// Validate checks params: exitCode (0..255).
func (s Lifecycle) Validate(params map[string]any) error {
	_, err := s.params(params)
	return err
}

// Run executes the lifecycle.
func (s Lifecycle) Run(ctx context.Context, env *Env, params map[string]any, rec *Record) error {
	code, err := s.params(params)
	if err != nil {
		return err
	}
	spec := sandboxapi.ProcessSpec{
		Executable: "/bin/sh",
		Args:       []string{"-c", fmt.Sprintf("echo out; echo err >&2; exit %d", code)},
		Env:        map[string]string{}, Cwd: driver.WorkPath,
	}
	var owner sandboxapi.CleanupOwner
	var stopErr, destroyErr error
	cleaned := false
	res, err := execOnce(ctx, env, rec, spec, func(se, de error) {
		stopErr, destroyErr, cleaned = se, de, true
	})
	snap := rec.Snapshot()
	if len(snap.Owners) > 0 {
		owner = snap.Owners[len(snap.Owners)-1]
	}
	rec.Observe("stdout", string(res.Stdout))
	rec.Observe("stderr", string(res.Stderr))
	if res.Exit.Kind != "" {
		rec.Observe("exit", res.Exit)
	}
	if err == nil {
		rec.Equal("stdout", "out\n", string(res.Stdout))
		rec.Equal("stderr", "err\n", string(res.Stderr))
		rec.Equal("exit", sandboxapi.Exited(code).String(), res.Exit.String())
	}
	if cleaned {
		rec.Check("stop", "nil", errText(stopErr), stopErr == nil)
		rec.Check("destroy", "nil", errText(destroyErr), destroyErr == nil)
		rec.CleanupError("stop", stopErr)
		rec.CleanupError("destroy", destroyErr)
	}
	if owner != nil {
		rec.Observe("recoveryRecord", owner.RecoveryRecord())
		checkAbsence(ctx, env, rec, owner)
	}
	return err
}

// checkAbsence checks every identified resource of owner is absent by
// exact ID. Inspection uses a detached context so it also runs after a
// cancellation.
func checkAbsence(ctx context.Context, env *Env, rec *Record, owner sandboxapi.CleanupOwner) {
	cctx, cancel := cleanupContext(ctx, env.Policy)
	defer cancel()
	resources := Resources(owner)
	identified := 0
	for _, r := range resources {
		if r.Identity != string(sandboxapi.IdentityIdentified) {
			rec.Check(r.Role+" identified", "identified", r.Identity, false)
			continue
		}
		identified++
		absent, probe, err := CheckAbsent(cctx, env.Engine, r)
		if err != nil {
			rec.Check(fmt.Sprintf("%s %s absent after destroy", r.Role, r.ID), "404", err.Error(), false)
			continue
		}
		rec.Check(fmt.Sprintf("%s %s absent after destroy", r.Role, r.ID), "404", probe, absent)
	}
	// Isolated policy: compute, storage and export; outbound adds a network.
	want := 3
	if env.Policy.Network.Kind == sandboxapi.NetworkOutbound {
		want = 4
	}
	rec.Equal("identified resources", want, identified)
}
