package sandboxapi

import (
	"context"
	"errors"
	"time"
)

// errExecutionDeadline is the cause of the context WithSandbox gives use
// when policy.execution is a deadline, so its expiry is told apart from a
// deadline of the caller's ctx.
var errExecutionDeadline = errors.New("sandbox execution deadline")

// WithSandbox runs use inside a fresh sandbox and always cleans up
// (docs/contract.md#cleanup).
//
// It normalizes req (a *ValidationError with "policy." paths), reserves a
// sandbox from backend with recovery, starts it under ctx and calls use.
// When req.Policy.Execution is a deadline, use's context has that timeout
// (timeoutMs milliseconds) and its expiry makes the returned error a
// deadline_exceeded *OperationError wrapping use's own error, if any.
//
// Once Reserve succeeded, WithSandbox always calls Stop and then Destroy: on
// the sandbox, or on the reservation when Start failed (it owns whatever
// Start acquired). Each cleanup call gets its own context, detached from
// ctx's cancellation (context.WithoutCancel) and bounded by
// deadlines.cleanupMs milliseconds, so cancelling ctx cannot skip cleanup.
// If use panics or calls runtime.Goexit, cleanup runs and the panic
// continues.
//
// It returns use's result and the original error (from Reserve, Start or
// use). When cleanup fails it returns a *CleanupError with that original
// error (nil after success) in Original and the joined Stop and Destroy
// errors in Err.
func WithSandbox[T any](ctx context.Context, backend Backend, req Request, recovery RecoveryPolicy, use func(ctx context.Context, sb Sandbox) (T, error)) (T, error) {
	var result T
	req, err := req.Normalize()
	if err != nil {
		return result, err
	}
	if err := ctx.Err(); err != nil {
		return result, FromContext(err, "sandbox not reserved")
	}
	reservation, err := backend.Reserve(req, recovery)
	if err != nil {
		return result, err
	}
	var owner CleanupOwner = reservation
	cleanupTimeout := Milliseconds(req.Policy.Deadlines.CleanupMs)

	completed := false
	defer func() {
		if !completed { // use panicked or called runtime.Goexit
			_ = cleanup(ctx, owner, cleanupTimeout)
		}
	}()

	var original error
	sb, err := reservation.Start(ctx)
	if err != nil {
		original = err
	} else {
		owner = sb
		result, original = runUse(ctx, sb, req.Policy.Execution, use)
	}
	completed = true
	if cerr := cleanup(ctx, owner, cleanupTimeout); cerr != nil {
		return result, &CleanupError{Original: original, Err: cerr}
	}
	return result, original
}

func runUse[T any](ctx context.Context, sb Sandbox, execution Execution, use func(ctx context.Context, sb Sandbox) (T, error)) (T, error) {
	if execution.Kind != ExecutionDeadline {
		return use(ctx, sb)
	}
	timeout := Milliseconds(execution.TimeoutMs)
	useCtx, cancel := context.WithTimeoutCause(ctx, timeout, errExecutionDeadline)
	defer cancel()
	result, err := use(useCtx, sb)
	if context.Cause(useCtx) == errExecutionDeadline {
		return result, &OperationError{Code: CodeDeadlineExceeded, Message: "sandbox execution deadline of " + timeout.String() + " expired", Err: err}
	}
	return result, err
}

// cleanup stops then destroys owner, each bounded by timeout and detached
// from ctx's cancellation.
func cleanup(ctx context.Context, owner CleanupOwner, timeout time.Duration) error {
	base := context.WithoutCancel(ctx)
	stopCtx, cancel := context.WithTimeout(base, timeout)
	stopErr := owner.Stop(stopCtx)
	cancel()
	destroyCtx, cancel := context.WithTimeout(base, timeout)
	destroyErr := owner.Destroy(destroyCtx)
	cancel()
	return errors.Join(stopErr, destroyErr)
}
