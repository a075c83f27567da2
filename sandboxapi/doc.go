// Package sandboxapi is the backend-neutral contract of a qualbox sandbox:
// the types a caller uses to run one untrusted process under an explicit
// isolation policy, and that every backend implements. It imports no
// Engine client; the Docker Engine backend is package driver. The
// behaviour behind these types is written down in docs/contract.md.
//
// # Lifecycle
//
// A Backend reserves a sandbox for a Request (Backend.Reserve); the
// Reservation is inert until Start, which admits the platform and acquires
// resources (docs/contract.md#profiles-and-admission). A started Sandbox
// reserves its one process (Sandbox.ReserveProcess), which exposes stdin
// as an io.WriteCloser and stdout and stderr as io.ReadClosers with
// backpressure, and whose Wait returns the leader's Exit receipt
// (docs/contract.md#processes-and-streams). Stop ends compute; Destroy
// removes every owned resource, exactly and retryably
// (docs/contract.md#cleanup). WithSandbox runs a callback between Start
// and cleanup and always cleans up, even when the caller's context is
// cancelled.
//
// # Policy and input
//
// ParsePolicy, ParseRequest and ParseProcessSpec parse JSON strictly:
// unknown fields, wrong types and out-of-range values are a
// *ValidationError whose Issues name each field's path
// ("policy.resources.cpus"). Policy.Normalize applies the same checks to a
// Policy built in Go. Every bound is a constant of this package
// (MaxIdentityBytes, MaxRecoveryBytes, ...), in bytes or milliseconds as
// named (docs/contract.md#policy).
//
// # Errors
//
// Failures are typed for errors.Is and errors.As: *ValidationError,
// *UnsupportedError, *StateError, *OperationError with a Code (sentinels
// ErrCancelled, ErrDeadlineExceeded, ErrOutputLimit, ...), and
// *CleanupError, which keeps an original failure apart from a later
// cleanup failure (docs/contract.md#errors).
//
// # Files and recovery
//
// A Sandbox that also implements Transferer imports and exports workspace
// trees through TreeSource and TreeSink; DirSource and DirSink adapt host
// directories (docs/contract.md#workspace-files). A RecoveryPolicy decides
// where each RecoveryRecord checkpoint goes before the effect it precedes
// (InProcess, or Persisted with a PersistFunc such as PersistToFile); a
// backend that implements Reconciler turns the last durable record into
// cleanup ownership after a controller crash (docs/contract.md#recovery).
//
// Package sandboxtest holds a conformance suite any Backend can run.
package sandboxapi
