package driver

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"

	"github.com/qualbox/qualbox/sandboxapi"
)

// RecoveryCleanupMs is the cleanup deadline of an owner returned by
// Reconcile, in milliseconds: the record binds the policy by digest only, so
// the original deadlines.cleanupMs is not known. Callers bound cleanup
// further with their context.
const RecoveryCleanupMs = 120_000

var operationIDPattern = regexp.MustCompile(`^[a-f0-9]{8}-[a-f0-9]{4}-4[a-f0-9]{3}-[89ab][a-f0-9]{3}-[a-f0-9]{12}$`)

var _ sandboxapi.Reconciler = (*Backend)(nil)

// recordConflict returns why record cannot belong to this backend's
// configuration, or "" when it can (docs/contract.md#recovery). It needs no
// Engine.
func (b *Backend) recordConflict(r sandboxapi.RecoveryRecord) string {
	switch {
	case r.BackendID != BackendID:
		return fmt.Sprintf("record backend %q is not %q", r.BackendID, BackendID)
	case r.BackendRevision != b.profile.BackendRevision:
		return fmt.Sprintf("record revision %q differs from profile %s's %q", r.BackendRevision, b.profile.Name, b.profile.BackendRevision)
	case r.Namespace != b.ns:
		return fmt.Sprintf("record namespace %q is not %q", r.Namespace, b.ns)
	case r.ImageDigest != b.cfg.ImageID:
		return fmt.Sprintf("record image %s is not %s", r.ImageDigest, b.cfg.ImageID)
	case r.ConfigurationDigest != configurationDigest(&b.cfg):
		return "record configuration digest differs from this backend's profile, user, image and datasets"
	case !operationIDPattern.MatchString(r.OperationID):
		return fmt.Sprintf("record operation ID %q is not a version 4 UUID", r.OperationID)
	case string(r.SandboxID) != "docker-"+r.OperationID:
		return fmt.Sprintf("record sandbox ID %q does not derive from its operation ID", r.SandboxID)
	}
	roles := make([]sandboxapi.Role, 0, len(r.Resources))
	for _, res := range r.Resources {
		roles = append(roles, res.Role)
		if res.Name != resourceName(r.Namespace, r.OperationID, res.Role) {
			return fmt.Sprintf("record %s resource name %q does not derive from namespace and operation", res.Role, res.Name)
		}
	}
	for _, need := range []sandboxapi.Role{sandboxapi.RoleCompute, sandboxapi.RoleStorage, sandboxapi.RoleExport} {
		if !slices.Contains(roles, need) {
			return fmt.Sprintf("record lacks its %s resource", need)
		}
	}
	return ""
}

// Reconcile compares a recovery record with the Engine and returns cleanup
// ownership only, never a runnable process (docs/contract.md#recovery):
//
//   - conflict, before any Engine access, for a record of another backend,
//     profile revision, namespace, image or configuration;
//   - conflict for a record of another daemon, or when a planned resource's
//     exact name is present (even a foreign resource), or when a present
//     resource's name, binding labels, ID or fingerprint differ;
//   - absent{record} when none of its resources exists;
//   - matched{owner} when resources exist; a "creating" identity found by
//     exact name advances to "identified" in owner.RecoveryRecord(), which
//     the caller must persist before cleanup;
//   - uncertain{owner} when a "creating" resource's name is absent: its
//     create may still land, so ownership is retained for a later retry.
//
// Call it only after the previous controller and its operations are
// quiescent. The call is bounded by StandaloneDeadlineMs: an Engine that
// does not answer in time fails it with a deadline_exceeded
// *sandboxapi.OperationError naming the request. An invalid record is a *sandboxapi.ValidationError; an Engine
// failure is an *sandboxapi.OperationError.
func (b *Backend) Reconcile(ctx context.Context, record sandboxapi.RecoveryRecord) (sandboxapi.Reconciliation, error) {
	if err := record.Validate(); err != nil {
		return sandboxapi.Reconciliation{}, err
	}
	record = record.Clone()
	if reason := b.recordConflict(record); reason != "" {
		return sandboxapi.Reconciliation{Kind: sandboxapi.ReconciliationConflict, Reason: reason}, nil
	}
	eng, err := b.engine()
	if err != nil {
		return sandboxapi.Reconciliation{}, err
	}
	ctx, cancel := b.standaloneContext(ctx)
	defer cancel()
	daemonID, err := b.admitDaemon(ctx, eng)
	if err != nil {
		return sandboxapi.Reconciliation{}, err
	}
	if record.Authority.Kind == sandboxapi.AuthorityVerified && record.Authority.BackendIdentity != daemonID {
		return sandboxapi.Reconciliation{Kind: sandboxapi.ReconciliationConflict,
			Reason: fmt.Sprintf("record belongs to daemon %q, the Engine at %s is %q", record.Authority.BackendIdentity, b.socket, daemonID)}, nil
	}
	// Then each resource is looked for (find), and the outcome judged
	// (outcome).
	r := &reconciling{record: record, current: record.Clone()}
	for _, res := range record.Resources {
		reason, conflict, err := r.find(ctx, eng, res)
		if err != nil {
			return sandboxapi.Reconciliation{}, err
		}
		if conflict {
			return sandboxapi.Reconciliation{Kind: sandboxapi.ReconciliationConflict, Reason: reason}, nil
		}
	}
	return b.outcome(r)
}

// reconciling is the state of one Reconcile over the record's resources.
type reconciling struct {
	record sandboxapi.RecoveryRecord
	// current is record with each "creating" identity found by exact name
	// advanced to "identified".
	current sandboxapi.RecoveryRecord
	// present: some resource exists; uncertain: a "creating" resource's
	// name is absent.
	present, uncertain bool
}

// find inspects res by ID once identified, else by its exact name. It
// reports a conflict, with its reason, when res exists but is not the
// record's: planned yet present, or not owned (checkOwned or an Engine
// state inspectResource refuses).
func (r *reconciling) find(ctx context.Context, eng *engine, res sandboxapi.RecoveryResource) (string, bool, error) {
	ref := res.Name
	if res.Identity.Kind == sandboxapi.IdentityIdentified {
		ref = res.Identity.ID
	}
	in, err := inspectResource(ctx, eng, res.Role, ref)
	var state *sandboxapi.StateError
	if errors.As(err, &state) {
		return state.Message, true, nil
	}
	if err != nil {
		return "", false, err
	}
	if in == nil {
		if res.Identity.Kind == sandboxapi.IdentityCreating {
			r.uncertain = true
		}
		return "", false, nil
	}
	if res.Identity.Kind == sandboxapi.IdentityPlanned {
		return fmt.Sprintf("planned %s resource name %s is already present (%s); recover from the latest durable record after the previous controller is quiescent", res.Role, res.Name, in.id), true, nil
	}
	if err := checkOwned(in, r.record, res); err != nil {
		return err.Error(), true, nil
	}
	r.present = true
	if res.Identity.Kind == sandboxapi.IdentityCreating {
		setIdentity(res.Role, sandboxapi.ResourceIdentity{Kind: sandboxapi.IdentityIdentified, ID: in.id, Fingerprint: in.fingerprint})(&r.current)
	}
	return "", false, nil
}

// outcome is the reconciliation once every resource was looked for:
// absent when none exists and none is uncertain, else uncertain or
// matched with a cleanup owner of the advanced record.
func (b *Backend) outcome(r *reconciling) (sandboxapi.Reconciliation, error) {
	current := r.current
	if err := current.Validate(); err != nil {
		return sandboxapi.Reconciliation{}, fmt.Errorf("driver: advanced recovery record is invalid: %w", err)
	}
	if !r.present && !r.uncertain {
		return sandboxapi.Reconciliation{Kind: sandboxapi.ReconciliationAbsent, Record: current}, nil
	}
	kind := sandboxapi.ReconciliationMatched
	if r.uncertain {
		kind = sandboxapi.ReconciliationUncertain
	}
	return sandboxapi.Reconciliation{Kind: kind, Owner: b.cleanupOwner(current)}, nil
}

// cleanupOwner returns a cleanup-only owner of record's resources: it can
// stop and destroy, never start or run a process.
func (b *Backend) cleanupOwner(record sandboxapi.RecoveryRecord) sandboxapi.CleanupOwner {
	var policy sandboxapi.Policy
	policy.Deadlines = sandboxapi.Deadlines{StartupMs: RecoveryCleanupMs, CleanupMs: RecoveryCleanupMs}
	s := newSandbox(b, policy, nil, record)
	s.startCalled = true // never startable
	return &recoveredOwner{s: s}
}

// recoveredOwner narrows a recovered sandbox to sandboxapi.CleanupOwner so
// no process or start is reachable through it.
type recoveredOwner struct{ s *sandbox }

func (o *recoveredOwner) RecoveryRecord() sandboxapi.RecoveryRecord { return o.s.RecoveryRecord() }
func (o *recoveredOwner) Stop(ctx context.Context) error            { return o.s.Stop(ctx) }
func (o *recoveredOwner) Destroy(ctx context.Context) error         { return o.s.Destroy(ctx) }
