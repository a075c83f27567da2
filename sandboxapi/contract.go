package sandboxapi

import "context"

// Support describes what a backend can admit (docs/contract.md#policy).
type Support struct {
	BackendID       string        `json:"backendId"`
	BackendRevision string        `json:"backendRevision"`
	NetworkModes    []NetworkKind `json:"networkModes"`
	// The three capabilities no current backend offers; always false.
	WorkspaceDiskQuota            bool `json:"workspaceDiskQuota"`
	NetworkAllowlist              bool `json:"networkAllowlist"`
	IndependentProcessTermination bool `json:"independentProcessTermination"`
}

// Isolation names the isolation boundary a backend provides.
type Isolation string

// Isolation kinds.
const (
	IsolationContainer      Isolation = "container"
	IsolationVirtualMachine Isolation = "virtual_machine"
)

// EffectivePolicy is what a started sandbox actually enforces, as read back
// from the backend (docs/contract.md#policy).
type EffectivePolicy struct {
	BackendIdentity    string             `json:"backendIdentity"`
	Isolation          Isolation          `json:"isolation"`
	Resources          Resources          `json:"resources"`
	TemporaryStorage   TemporaryStorage   `json:"temporaryStorage"`
	Network            Network            `json:"network"`
	NonRoot            bool               `json:"nonRoot"`
	ReadOnlyRoot       bool               `json:"readOnlyRoot"`
	WorkspaceDiskQuota WorkspaceDiskQuota `json:"workspaceDiskQuota"`
}

// Backend creates sandboxes (docs/contract.md#policy).
type Backend interface {
	// Support reports the backend's identity and admissible modes.
	Support() Support
	// Reserve validates req against the backend synchronously and returns an
	// inert reservation: no Engine or host effect happens until Start.
	// Unsupported requests fail here with *UnsupportedError.
	Reserve(req Request, recovery RecoveryPolicy) (Reservation, error)
}

// Reconciler is implemented by backends that support cleanup-only recovery.
type Reconciler interface {
	// Reconcile compares a recovery record with the Engine and returns
	// cleanup ownership, a conflict or absence. It never adopts a process.
	Reconcile(ctx context.Context, record RecoveryRecord) (Reconciliation, error)
}

// Reservation is an inert, reserved sandbox. It is also the CleanupOwner of
// whatever Start acquired, so a failed or cancelled Start can be cleaned up.
type Reservation interface {
	CleanupOwner
	ID() SandboxID
	// Start admits the Engine and acquires the sandbox's resources. Startup
	// is bounded by policy.deadlines.startupMs and by ctx; cancelling ctx
	// joins the acquisition in progress. Start is once-only.
	Start(ctx context.Context) (Sandbox, error)
}

// Sandbox is a started sandbox (docs/contract.md#policy).
type Sandbox interface {
	CleanupOwner
	ID() SandboxID
	// Effective reports the read-back policy the sandbox enforces.
	Effective() EffectivePolicy
	// Workspace is the guest path of the writable workspace directory.
	Workspace() string
	// ReserveProcess validates spec synchronously and reserves the
	// sandbox's one process; a second reservation is a *StateError.
	ReserveProcess(spec ProcessSpec) (ProcessReservation, error)
}
