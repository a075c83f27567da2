package sandboxapi

// Namespace separates one application's sandboxes from another's. It is a
// non-empty identity of at most MaxNamespaceBytes with no whitespace,
// control characters, '/' or '\'.
type Namespace string

// SandboxID identifies one sandbox (at most MaxIdentityBytes, same alphabet).
type SandboxID string

// ProcessID identifies one sandbox process (at most MaxIdentityBytes).
type ProcessID string
