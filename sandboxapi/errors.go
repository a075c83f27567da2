package sandboxapi

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Issue is one problem found while validating caller input.
//
// Path names the offending field as a list of object keys and array indexes
// rendered as strings, for example ["policy", "resources", "memoryBytes"] or
// ["args", "3"]. An empty Path means the value as a whole.
type Issue struct {
	Path    []string `json:"path"`
	Message string   `json:"message"`
}

// PathString renders Path with dots, for example "policy.resources.cpus".
// The whole value renders as "(root)".
func (i Issue) PathString() string {
	if len(i.Path) == 0 {
		return "(root)"
	}
	return strings.Join(i.Path, ".")
}

// ValidationError reports caller input that does not satisfy the contract.
// Every issue names the field path it concerns (docs/contract.md#errors).
type ValidationError struct {
	Issues []Issue
}

var _ error = (*ValidationError)(nil)

func (e *ValidationError) Error() string {
	if len(e.Issues) == 0 {
		return "sandbox: invalid input"
	}
	parts := make([]string, 0, len(e.Issues))
	for _, issue := range e.Issues {
		parts = append(parts, issue.PathString()+": "+issue.Message)
	}
	return "sandbox: invalid input: " + strings.Join(parts, "; ")
}

// UnsupportedError reports a request, host or Engine that the selected
// backend and profile cannot admit (docs/contract.md#errors). It is
// returned before any resource effect where the contract says so.
type UnsupportedError struct {
	Message string
	Err     error
}

var _ error = (*UnsupportedError)(nil)

func (e *UnsupportedError) Error() string {
	if e.Err != nil {
		return "sandbox: unsupported: " + e.Message + ": " + e.Err.Error()
	}
	return "sandbox: unsupported: " + e.Message
}

func (e *UnsupportedError) Unwrap() error { return e.Err }

// StateError reports an operation that the current lifecycle state forbids, or a
// resource whose identity no longer matches its owner (docs/contract.md#errors).
type StateError struct {
	Message string
	Err     error
}

var _ error = (*StateError)(nil)

func (e *StateError) Error() string {
	if e.Err != nil {
		return "sandbox: state: " + e.Message + ": " + e.Err.Error()
	}
	return "sandbox: state: " + e.Message
}

func (e *StateError) Unwrap() error { return e.Err }

// Code classifies an OperationError (docs/contract.md#errors).
type Code string

// Operation error codes.
const (
	CodeCancelled        Code = "cancelled"
	CodeDeadlineExceeded Code = "deadline_exceeded"
	CodeDriverFailure    Code = "driver_failure"
	CodeStreamFailure    Code = "stream_failure"
	CodeInputLimit       Code = "input_limit"
	CodeOutputLimit      Code = "output_limit"
	CodeTransferLimit    Code = "transfer_limit"
	CodeInvalidArchive   Code = "invalid_archive"
)

// OperationError reports a failed operation with a machine-readable Code.
//
// errors.Is(err, &OperationError{Code: c}) matches any OperationError with
// code c, so callers can test for a class without comparing messages. The
// sentinels ErrCancelled, ErrDeadlineExceeded, ... are such values.
// An OperationError with code cancelled or deadline_exceeded also matches
// context.Canceled or context.DeadlineExceeded respectively.
type OperationError struct {
	Code    Code
	Message string
	Err     error
}

var _ error = (*OperationError)(nil)

// Sentinels for errors.Is.
var (
	ErrCancelled        = &OperationError{Code: CodeCancelled}
	ErrDeadlineExceeded = &OperationError{Code: CodeDeadlineExceeded}
	ErrDriverFailure    = &OperationError{Code: CodeDriverFailure}
	ErrStreamFailure    = &OperationError{Code: CodeStreamFailure}
	ErrInputLimit       = &OperationError{Code: CodeInputLimit}
	ErrOutputLimit      = &OperationError{Code: CodeOutputLimit}
	ErrTransferLimit    = &OperationError{Code: CodeTransferLimit}
	ErrInvalidArchive   = &OperationError{Code: CodeInvalidArchive}
)

// NewOperationError returns an OperationError with a formatted message.
func NewOperationError(code Code, err error, format string, args ...any) *OperationError {
	return &OperationError{Code: code, Message: fmt.Sprintf(format, args...), Err: err}
}

func (e *OperationError) Error() string {
	msg := "sandbox: " + string(e.Code)
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *OperationError) Unwrap() error { return e.Err }

// Is matches another OperationError of the same code that carries no message
// (a sentinel), and the context package's errors for the matching codes.
func (e *OperationError) Is(target error) bool {
	var other *OperationError
	if errors.As(target, &other) {
		return other.Message == "" && other.Err == nil && other.Code == e.Code
	}
	switch target {
	case context.Canceled:
		return e.Code == CodeCancelled
	case context.DeadlineExceeded:
		return e.Code == CodeDeadlineExceeded
	}
	return false
}

// FromContext converts a context's error into the matching OperationError,
// keeping the cause. It returns nil when err is nil.
func FromContext(err error, message string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded):
		return &OperationError{Code: CodeDeadlineExceeded, Message: message, Err: err}
	case errors.Is(err, context.Canceled):
		return &OperationError{Code: CodeCancelled, Message: message, Err: err}
	}
	return err
}

// CleanupError reports that cleanup after an operation failed. Original is the
// operation's own failure (nil if it succeeded); Err is the cleanup failure.
// Reports keep the two apart: Unwrap returns both so errors.Is finds either.
type CleanupError struct {
	Original error
	Err      error
}

var _ error = (*CleanupError)(nil)

func (e *CleanupError) Error() string {
	if e.Original != nil {
		return e.Original.Error() + " (cleanup also failed: " + e.Err.Error() + ")"
	}
	return "sandbox: cleanup failed: " + e.Err.Error()
}

// Unwrap returns the original failure first, then the cleanup failure.
func (e *CleanupError) Unwrap() []error {
	if e.Original != nil {
		return []error{e.Original, e.Err}
	}
	return []error{e.Err}
}
