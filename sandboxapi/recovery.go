package sandboxapi

import "context"

// RecoveryFormat is the only recovery record format (docs/contract.md#recovery).
const RecoveryFormat = "agenai.sandbox-recovery.v2"

// Phase is a recovery record's lifecycle phase.
type Phase string

// Recovery phases.
const (
	PhaseReserved   Phase = "reserved"
	PhaseStarting   Phase = "starting"
	PhaseRunning    Phase = "running"
	PhaseStopping   Phase = "stopping"
	PhaseStopped    Phase = "stopped"
	PhaseDestroying Phase = "destroying"
	PhaseDestroyed  Phase = "destroyed"
	PhaseUncertain  Phase = "uncertain"
)

// Role names a resource's part in a sandbox.
type Role string

// Resource roles.
const (
	RoleCompute Role = "compute"
	RoleStorage Role = "storage"
	RoleExport  Role = "export"
	RoleNetwork Role = "network"
)

// IdentityKind says how far a resource's acquisition went.
type IdentityKind string

// Identity kinds.
const (
	// IdentityPlanned: no create was dispatched.
	IdentityPlanned IdentityKind = "planned"
	// IdentityCreating: a create may have been dispatched; outcome unknown.
	IdentityCreating IdentityKind = "creating"
	// IdentityIdentified: the resource was inspected; ID and Fingerprint set.
	IdentityIdentified IdentityKind = "identified"
)

// ResourceIdentity is {"kind":"planned"}, {"kind":"creating"} or
// {"kind":"identified","id":...,"fingerprint":"sha256:<64 hex>"}.
type ResourceIdentity struct {
	Kind        IdentityKind `json:"kind"`
	ID          string       `json:"id,omitempty"`
	Fingerprint string       `json:"fingerprint,omitempty"`
}

// RecoveryResource is one owned resource of a recovery record.
type RecoveryResource struct {
	Role     Role             `json:"role"`
	Name     string           `json:"name"`
	Identity ResourceIdentity `json:"identity"`
}

// AuthorityKind says whether the backend's daemon identity was verified.
type AuthorityKind string

// Authority kinds.
const (
	AuthorityUnverified AuthorityKind = "unverified"
	AuthorityVerified   AuthorityKind = "verified"
)

// Authority is {"kind":"unverified"} or
// {"kind":"verified","backendIdentity":...}.
type Authority struct {
	Kind            AuthorityKind `json:"kind"`
	BackendIdentity string        `json:"backendIdentity,omitempty"`
}

// RecoveryRecord is the durable, non-secret ownership record of one sandbox
// (format agenai.sandbox-recovery.v2; docs/contract.md#recovery), field for
// field. Invariants (checked by ParseRecoveryRecord): 1..4 resources with
// unique roles and unique names; an unverified authority only in phase
// reserved with every resource planned; serialized size at most
// MaxRecoveryBytes.
type RecoveryRecord struct {
	Format              string             `json:"format"`
	BackendID           string             `json:"backendId"`
	BackendRevision     string             `json:"backendRevision"`
	Namespace           Namespace          `json:"namespace"`
	OperationID         string             `json:"operationId"`
	SandboxID           SandboxID          `json:"sandboxId"`
	ImageDigest         string             `json:"imageDigest"`
	PolicyDigest        string             `json:"policyDigest"`
	ConfigurationDigest string             `json:"configurationDigest"`
	Phase               Phase              `json:"phase"`
	Authority           Authority          `json:"authority"`
	Resources           []RecoveryResource `json:"resources"`
}

// PersistFunc durably stores a recovery record. The backend calls it before
// each resource effect and waits for it; an error aborts the effect.
type PersistFunc func(ctx context.Context, record RecoveryRecord) error

// RecoveryPolicy is the contract's recovery policy (docs/contract.md#recovery):
// in-process (Persist is nil, records live only in memory) or persisted through
// Persist.
type RecoveryPolicy struct {
	Persist PersistFunc
}

// InProcess returns the in-process recovery policy.
func InProcess() RecoveryPolicy { return RecoveryPolicy{} }

// Persisted returns a recovery policy that stores every checkpoint through
// persist before the effect it precedes.
func Persisted(persist PersistFunc) RecoveryPolicy { return RecoveryPolicy{Persist: persist} }

// CleanupOwner can stop and destroy a sandbox's exact resources
// (docs/contract.md#recovery). It never runs a process.
type CleanupOwner interface {
	// RecoveryRecord returns the latest record of the owned resources.
	RecoveryRecord() RecoveryRecord
	// Stop force-removes the exact compute container; files are retained.
	Stop(ctx context.Context) error
	// Destroy removes every owned resource; it can be retried.
	Destroy(ctx context.Context) error
}

// ReconciliationKind classifies a Reconciliation.
type ReconciliationKind string

// Reconciliation kinds.
const (
	ReconciliationMatched   ReconciliationKind = "matched"
	ReconciliationUncertain ReconciliationKind = "uncertain"
	ReconciliationConflict  ReconciliationKind = "conflict"
	ReconciliationAbsent    ReconciliationKind = "absent"
)

// Reconciliation is the outcome of reconciling a recovery record with the
// Engine (docs/contract.md#recovery): matched or uncertain carry Owner;
// conflict carries Reason; absent carries Record. The caller persists
// Owner.RecoveryRecord() before cleanup when it differs from its input.
type Reconciliation struct {
	Kind   ReconciliationKind
	Owner  CleanupOwner
	Reason string
	Record RecoveryRecord
}
