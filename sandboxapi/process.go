package sandboxapi

import (
	"context"
	"io"
)

// ProcessSpec describes the one process a sandbox runs
// (docs/contract.md#processes-and-streams). Executable and Cwd are absolute,
// canonical guest paths; Args are literal (no shell); Env holds explicit entries
// only, the backend adds its fixed HOME, TMPDIR and PATH.
type ProcessSpec struct {
	Executable string            `json:"executable"`
	Args       []string          `json:"args"`
	Env        map[string]string `json:"env"`
	Cwd        string            `json:"cwd"`
}

// ExitKind classifies a process exit receipt.
type ExitKind string

// Exit kinds.
const (
	ExitExited      ExitKind = "exited"
	ExitSignaled    ExitKind = "signaled"
	ExitUnavailable ExitKind = "unavailable"
)

// ReasonSandboxStopped is the only reason an unavailable exit carries: the
// sandbox's compute was removed before the leader's status was observed.
const ReasonSandboxStopped = "sandbox_stopped"

// Exit is the leader's exit receipt (docs/contract.md#processes-and-streams),
// one of {"kind":"exited","code":0..255}, {"kind":"signaled","signal":"SIGKILL"}
// or {"kind":"unavailable","reason":"sandbox_stopped"}. It describes the leader
// only; descendants stay owned until the sandbox stops.
type Exit struct {
	Kind   ExitKind `json:"kind"`
	Code   int      `json:"code,omitempty"`
	Signal string   `json:"signal,omitempty"`
	Reason string   `json:"reason,omitempty"`
}

// Exited returns the receipt of a leader that exited with code.
func Exited(code int) Exit { return Exit{Kind: ExitExited, Code: code} }

// Unavailable returns the receipt of a leader whose sandbox stopped first.
func Unavailable() Exit { return Exit{Kind: ExitUnavailable, Reason: ReasonSandboxStopped} }

// Process is a started sandbox process with owned standard streams
// (docs/contract.md#processes-and-streams).
type Process interface {
	// Stdin accepts binary input with backpressure; Close half-closes it so
	// the process reads EOF.
	Stdin() io.WriteCloser
	// Stdout and Stderr deliver output separately. Closing one before EOF
	// abandons it, which stops the whole sandbox.
	Stdout() io.ReadCloser
	Stderr() io.ReadCloser
	// Wait blocks until the leader's exit receipt is observed or ctx ends.
	// An observed receipt never changes.
	Wait(ctx context.Context) (Exit, error)
}

// ProcessReservation is an inert reservation of the sandbox's one process
// (docs/contract.md#processes-and-streams). Stop's scope is the whole sandbox.
type ProcessReservation interface {
	ID() ProcessID
	// Start launches the process once; a second call is a *StateError.
	Start(ctx context.Context) (Process, error)
	// Stop stops the whole sandbox's compute (stopScope "sandbox").
	Stop(ctx context.Context) error
}
