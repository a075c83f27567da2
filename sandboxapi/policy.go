package sandboxapi

// Resources are the workload's compute limits (docs/contract.md#policy).
type Resources struct {
	// CPUs is a positive, finite number of CPUs (Docker NanoCpus / 1e9).
	CPUs float64 `json:"cpus"`
	// MemoryBytes is the memory limit in bytes; memory+swap equals it.
	MemoryBytes int64 `json:"memoryBytes"`
	// PIDs is the maximum number of tasks in the workload's cgroup.
	PIDs int64 `json:"pids"`
}

// TemporaryStorage sizes the two tmpfs mounts, in bytes
// (docs/contract.md#policy): /home/sandbox and /tmp.
type TemporaryStorage struct {
	HomeBytes int64 `json:"homeBytes"`
	TempBytes int64 `json:"tempBytes"`
}

// NetworkKind selects the workload's network (docs/contract.md#policy).
type NetworkKind string

// Network kinds.
const (
	// NetworkIsolated gives the workload no interface but loopback.
	NetworkIsolated NetworkKind = "isolated"
	// NetworkOutbound gives the workload a private bridge with outbound access.
	NetworkOutbound NetworkKind = "outbound"
)

// Network is the network policy: {"kind": "isolated"} or {"kind": "outbound"}.
type Network struct {
	Kind NetworkKind `json:"kind"`
}

// QuotaKind selects whether a hard workspace disk quota is requested.
type QuotaKind string

// Workspace disk quota kinds.
const (
	QuotaNotRequested QuotaKind = "not_requested"
	QuotaRequired     QuotaKind = "required"
)

// AccountingAllocatedBlocks is the only accounting a required quota names:
// allocated filesystem blocks, not inodes or logical file sizes.
const AccountingAllocatedBlocks = "allocated_blocks"

// WorkspaceDiskQuota is {"kind": "not_requested"} (the default) or
// {"kind": "required", "bytes": N, "accounting": "allocated_blocks"}
// (docs/contract.md#policy). Bytes and Accounting are zero unless
// Kind is QuotaRequired.
type WorkspaceDiskQuota struct {
	Kind       QuotaKind `json:"kind"`
	Bytes      int64     `json:"bytes,omitempty"`
	Accounting string    `json:"accounting,omitempty"`
}

// ExecutionKind selects the process lifetime policy.
type ExecutionKind string

// Execution kinds.
const (
	ExecutionUntilStopped ExecutionKind = "until_stopped"
	ExecutionDeadline     ExecutionKind = "deadline"
)

// Execution is {"kind": "until_stopped"} (the default, no timer) or
// {"kind": "deadline", "timeoutMs": N} (docs/contract.md#policy). The
// deadline starts when the process starts; WithSandbox also bounds its
// callback by it. TimeoutMs is zero unless Kind is ExecutionDeadline.
type Execution struct {
	Kind      ExecutionKind `json:"kind"`
	TimeoutMs int64         `json:"timeoutMs,omitempty"`
}

// Deadlines bound infrastructure observations, in milliseconds
// (docs/contract.md#policy): startup covers admission and provisioning,
// cleanup covers each stop or destroy.
type Deadlines struct {
	StartupMs int64 `json:"startupMs"`
	CleanupMs int64 `json:"cleanupMs"`
}

// TransferBuffers size workspace transfer working memory
// (docs/contract.md#policy).
type TransferBuffers struct {
	// ChunkBytes is the transfer chunk size, 512..MaxTransferChunkBytes.
	ChunkBytes int64 `json:"chunkBytes"`
	// MetadataBatchBytes is the in-memory metadata batch before spilling,
	// MinMetadataBatchBytes..MaxMetadataBatchBytes.
	MetadataBatchBytes int64 `json:"metadataBatchBytes"`
	// MetadataMergeFanIn is the external merge fan-in, 2..MaxMetadataMergeFanIn.
	MetadataMergeFanIn int64 `json:"metadataMergeFanIn"`
}

// StreamLimits bound process streams, in bytes (docs/contract.md#policy).
type StreamLimits struct {
	// MaxStdinBytes, when set, is the lifetime stdin byte limit.
	MaxStdinBytes *int64 `json:"maxStdinBytes,omitempty"`
	// MaxOutputBytes, when set, is the combined stdout+stderr lifetime limit.
	MaxOutputBytes *int64 `json:"maxOutputBytes,omitempty"`
	// MaxBufferedInputBytes bounds stdin staging, including concurrent writes.
	MaxBufferedInputBytes int64 `json:"maxBufferedInputBytes"`
	// MaxBufferedOutputBytes bounds combined stdout/stderr staging.
	MaxBufferedOutputBytes int64 `json:"maxBufferedOutputBytes"`
	// HighWaterMarkBytes is the chunk size at which reads and writes apply
	// backpressure; it fits within both buffer bounds.
	HighWaterMarkBytes int64 `json:"highWaterMarkBytes"`
}

// Policy is a normalized sandbox policy (docs/contract.md#policy): every field is
// set and within the contract's bounds. Obtain one from ParsePolicy,
// ParseRequest or Policy.Normalize.
type Policy struct {
	Resources          Resources          `json:"resources"`
	TemporaryStorage   TemporaryStorage   `json:"temporaryStorage"`
	Network            Network            `json:"network"`
	WorkspaceDiskQuota WorkspaceDiskQuota `json:"workspaceDiskQuota"`
	Execution          Execution          `json:"execution"`
	Deadlines          Deadlines          `json:"deadlines"`
	Transfers          TransferBuffers    `json:"transfers"`
	Streams            StreamLimits       `json:"streams"`
}

// Request is a normalized sandbox request (docs/contract.md#policy).
type Request struct {
	Policy Policy `json:"policy"`
}
