package sandboxapi

// Bounds of the contract (docs/contract.md#policy). Where the contract names a
// bound without fixing its value, the value is qualbox's choice; the reasons are
// next to them. Byte bounds count UTF-8 bytes.
const (
	// MaxIdentityBytes bounds identities (backend IDs, revisions, operation,
	// sandbox and process IDs, resource names, environment variable names).
	// Docker object names are far longer in practice; 128 keeps labels and
	// recovery records small.
	MaxIdentityBytes = 128
	// MaxNamespaceBytes bounds a caller namespace. It is hashed into resource
	// names, so its length never reaches Docker.
	MaxNamespaceBytes = 64
	// MaxPathBytes bounds a guest path (Linux PATH_MAX).
	MaxPathBytes = 4096
	// MaxArgs bounds the number of process arguments.
	MaxArgs = 4096
	// MaxEnvEntries bounds explicit process environment entries.
	MaxEnvEntries = 256
	// MaxEnvValueBytes bounds one environment value.
	MaxEnvValueBytes = 32 * 1024
	// MaxRecipeBytes bounds one argument and the JSON encoding of the whole
	// process spec. Linux's ARG_MAX default is 2 MiB; 256 KiB leaves the
	// Engine's exec create body small.
	MaxRecipeBytes = 256 * 1024
	// MaxRecoveryBytes bounds a serialized recovery record. Four resources
	// with 128-byte identities and 71-byte digests stay under 4 KiB; the
	// bound leaves room without admitting arbitrary blobs.
	MaxRecoveryBytes = 16 * 1024
	// MaxTransferChunkBytes bounds transfers.chunkBytes.
	MaxTransferChunkBytes = 8 * 1024 * 1024
	// MinMetadataBatchBytes is the least transfers.metadataBatchBytes: one
	// batch must hold the metadata record of one entry whose path has
	// MaxPathBytes bytes. A record stores the path with every byte
	// possibly escaped to two (2*MaxPathBytes), then a terminator, a kind
	// and an 8-byte offset (10), and costs 24 bytes of bookkeeping in
	// memory; a smaller batch would leave a valid long path unsortable.
	MinMetadataBatchBytes = 2*MaxPathBytes + 10 + 24
	// MaxMetadataBatchBytes bounds transfers.metadataBatchBytes.
	MaxMetadataBatchBytes = 64 * 1024 * 1024
	// MaxMetadataMergeFanIn bounds transfers.metadataMergeFanIn.
	MaxMetadataMergeFanIn = 1024
	// MaxBufferedInputBytes bounds streams.maxBufferedInputBytes.
	MaxBufferedInputBytes = 64 * 1024 * 1024
	// MaxBufferedOutputBytes bounds streams.maxBufferedOutputBytes.
	MaxBufferedOutputBytes = 64 * 1024 * 1024
	// MaxHighWaterMarkBytes bounds streams.highWaterMarkBytes; the Docker
	// backend stages at most one such chunk per raw output channel (at most
	// 64 KiB each; docs/contract.md#processes-and-streams).
	MaxHighWaterMarkBytes = 64 * 1024
	// MaxStartupMs bounds deadlines.startupMs (one hour).
	MaxStartupMs = 60 * 60 * 1000
	// MaxCleanupMs bounds deadlines.cleanupMs (one hour).
	MaxCleanupMs = 60 * 60 * 1000
	// MaxSafeInteger is JavaScript's Number.MAX_SAFE_INTEGER, the contract's
	// ceiling for every positive integer field (docs/contract.md#policy).
	MaxSafeInteger = 1<<53 - 1
)
