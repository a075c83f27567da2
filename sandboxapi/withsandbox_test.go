package sandboxapi

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"gotest.tools/v3/assert"
)

// fakeBackend is a fake Backend for WithSandbox tests: it runs nothing, and
// records lifecycle calls and the contexts cleanup received. Its errors are
// injected through its fields.
type fakeBackend struct {
	reserveErr, startErr, stopErr, destroyErr error
	// blockDestroy makes Destroy wait until its context ends.
	blockDestroy bool

	mu    sync.Mutex
	calls []string
	// cleanupCtx holds, per Stop/Destroy call, whether the context was
	// already done and how long until its deadline.
	cleanupCtx []cleanupCall
}

type cleanupCall struct {
	done      bool
	remaining time.Duration
}

func (b *fakeBackend) record(call string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, call)
}

func (b *fakeBackend) recordCleanup(ctx context.Context, call string) {
	b.record(call)
	deadline, _ := ctx.Deadline()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cleanupCtx = append(b.cleanupCtx, cleanupCall{done: ctx.Err() != nil, remaining: time.Until(deadline)})
}

func (b *fakeBackend) Calls() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.calls...)
}

func (b *fakeBackend) Support() Support {
	return Support{BackendID: "fake", BackendRevision: "1", NetworkModes: []NetworkKind{NetworkIsolated}}
}

func (b *fakeBackend) Reserve(req Request, _ RecoveryPolicy) (Reservation, error) {
	b.record("reserve")
	if b.reserveErr != nil {
		return nil, b.reserveErr
	}
	return &fakeOwner{b: b, role: "reservation"}, nil
}

// fakeOwner is the fake reservation and, once started, the fake sandbox.
type fakeOwner struct {
	b    *fakeBackend
	role string
}

func (o *fakeOwner) ID() SandboxID                  { return "fake-sandbox" }
func (o *fakeOwner) RecoveryRecord() RecoveryRecord { return RecoveryRecord{} }
func (o *fakeOwner) Effective() EffectivePolicy     { return EffectivePolicy{} }
func (o *fakeOwner) Workspace() string              { return "/workspace" }

func (o *fakeOwner) ReserveProcess(ProcessSpec) (ProcessReservation, error) {
	return nil, &UnsupportedError{Message: "the fake backend runs no process"}
}

func (o *fakeOwner) Start(ctx context.Context) (Sandbox, error) {
	o.b.record("start")
	if o.b.startErr != nil {
		return nil, o.b.startErr
	}
	return &fakeOwner{b: o.b, role: "sandbox"}, nil
}

func (o *fakeOwner) Stop(ctx context.Context) error {
	o.b.recordCleanup(ctx, "stop:"+o.role)
	return o.b.stopErr
}

func (o *fakeOwner) Destroy(ctx context.Context) error {
	o.b.recordCleanup(ctx, "destroy:"+o.role)
	if o.b.blockDestroy {
		<-ctx.Done()
		return ctx.Err()
	}
	return o.b.destroyErr
}

func testRequest() Request {
	p := validPolicy()
	p.Deadlines.CleanupMs = 2000
	return Request{Policy: p}
}

var sandboxCleanup = []string{"stop:sandbox", "destroy:sandbox"}

func TestWithSandboxSuccess(t *testing.T) {
	b := &fakeBackend{}
	got, err := WithSandbox(context.Background(), b, testRequest(), InProcess(), func(ctx context.Context, sb Sandbox) (string, error) {
		b.record("use")
		return string(sb.ID()), nil
	})
	assert.NilError(t, err)
	assert.Equal(t, got, "fake-sandbox")
	assert.DeepEqual(t, b.Calls(), append([]string{"reserve", "start", "use"}, sandboxCleanup...))
}

func TestWithSandboxUseError(t *testing.T) {
	b := &fakeBackend{}
	useErr := errors.New("agent failed")
	_, err := WithSandbox(context.Background(), b, testRequest(), InProcess(), func(context.Context, Sandbox) (int, error) {
		return 0, useErr
	})
	assert.Equal(t, err, useErr, "the original error is returned as is")
	assert.DeepEqual(t, b.Calls(), append([]string{"reserve", "start"}, sandboxCleanup...))
}

func TestWithSandboxStartError(t *testing.T) {
	startErr := NewOperationError(CodeDriverFailure, nil, "engine refused")
	b := &fakeBackend{startErr: startErr}
	called := false
	_, err := WithSandbox(context.Background(), b, testRequest(), InProcess(), func(context.Context, Sandbox) (int, error) {
		called = true
		return 0, nil
	})
	assert.Equal(t, err, error(startErr))
	assert.Assert(t, !called)
	assert.DeepEqual(t, b.Calls(), []string{"reserve", "start", "stop:reservation", "destroy:reservation"})
}

func TestWithSandboxReserveErrorNeedsNoCleanup(t *testing.T) {
	reserveErr := &UnsupportedError{Message: "no outbound network"}
	b := &fakeBackend{reserveErr: reserveErr}
	_, err := WithSandbox(context.Background(), b, testRequest(), InProcess(), func(context.Context, Sandbox) (int, error) { return 0, nil })
	assert.Equal(t, err, error(reserveErr))
	assert.DeepEqual(t, b.Calls(), []string{"reserve"})
}

func TestWithSandboxInvalidRequest(t *testing.T) {
	b := &fakeBackend{}
	req := testRequest()
	req.Policy.Resources.MemoryBytes = -1
	_, err := WithSandbox(context.Background(), b, req, InProcess(), func(context.Context, Sandbox) (int, error) { return 0, nil })
	assertPaths(t, err, "policy.resources.memoryBytes")
	assert.Equal(t, len(b.Calls()), 0)
}

func TestWithSandboxPanic(t *testing.T) {
	b := &fakeBackend{}
	defer func() {
		assert.Equal(t, recover(), "boom")
		assert.DeepEqual(t, b.Calls(), append([]string{"reserve", "start"}, sandboxCleanup...))
	}()
	WithSandbox(context.Background(), b, testRequest(), InProcess(), func(context.Context, Sandbox) (int, error) {
		panic("boom")
	})
	t.Fatal("WithSandbox returned after a panic")
}

func TestWithSandboxCancelledContextStillCleansUp(t *testing.T) {
	b := &fakeBackend{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := WithSandbox(ctx, b, testRequest(), InProcess(), func(ctx context.Context, _ Sandbox) (int, error) {
		cancel()
		<-ctx.Done()
		return 0, FromContext(ctx.Err(), "use cancelled")
	})
	assert.Assert(t, errors.Is(err, ErrCancelled), "%v", err)
	assert.Assert(t, errors.Is(err, context.Canceled), "%v", err)
	assert.DeepEqual(t, b.Calls(), append([]string{"reserve", "start"}, sandboxCleanup...))
	for _, c := range b.cleanupCtx {
		assert.Assert(t, !c.done, "cleanup context was already cancelled")
		assert.Assert(t, c.remaining > 0 && c.remaining <= 2*time.Second, "cleanup deadline %v", c.remaining)
	}
}

func TestWithSandboxAlreadyCancelled(t *testing.T) {
	b := &fakeBackend{}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := WithSandbox(ctx, b, testRequest(), InProcess(), func(context.Context, Sandbox) (int, error) { return 0, nil })
	assert.Assert(t, errors.Is(err, ErrCancelled), "%v", err)
	assert.Equal(t, len(b.Calls()), 0)
}

func TestWithSandboxExecutionDeadline(t *testing.T) {
	b := &fakeBackend{}
	req := testRequest()
	req.Policy.Execution = Execution{Kind: ExecutionDeadline, TimeoutMs: 30}
	start := time.Now()
	_, err := WithSandbox(context.Background(), b, req, InProcess(), func(ctx context.Context, _ Sandbox) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	})
	assert.Assert(t, time.Since(start) < 5*time.Second)
	assert.Assert(t, errors.Is(err, ErrDeadlineExceeded), "%v", err)
	assert.Assert(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	assert.DeepEqual(t, b.Calls(), append([]string{"reserve", "start"}, sandboxCleanup...))

	// A caller deadline is not the execution deadline: the error stays use's.
	b = &fakeBackend{}
	req.Policy.Execution.TimeoutMs = 60_000
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err = WithSandbox(ctx, b, req, InProcess(), func(ctx context.Context, _ Sandbox) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	})
	assert.Equal(t, err, context.DeadlineExceeded)
}

func TestWithSandboxCleanupError(t *testing.T) {
	destroyErr := errors.New("volume busy")
	useErr := errors.New("agent failed")
	b := &fakeBackend{destroyErr: destroyErr}
	_, err := WithSandbox(context.Background(), b, testRequest(), InProcess(), func(context.Context, Sandbox) (int, error) {
		return 0, useErr
	})
	var cerr *CleanupError
	assert.Assert(t, errors.As(err, &cerr), "%T %v", err, err)
	assert.Equal(t, cerr.Original, useErr)
	assert.Assert(t, errors.Is(cerr.Err, destroyErr))
	assert.Assert(t, errors.Is(err, useErr) && errors.Is(err, destroyErr))

	// After success the result survives and Original is nil.
	b = &fakeBackend{stopErr: errors.New("stop failed")}
	got, err := WithSandbox(context.Background(), b, testRequest(), InProcess(), func(context.Context, Sandbox) (int, error) {
		return 42, nil
	})
	assert.Equal(t, got, 42)
	assert.Assert(t, errors.As(err, &cerr))
	assert.NilError(t, cerr.Original)
	assert.ErrorContains(t, cerr.Err, "stop failed")
	assert.DeepEqual(t, b.Calls(), append([]string{"reserve", "start"}, sandboxCleanup...))
}

func TestWithSandboxCleanupIsBounded(t *testing.T) {
	b := &fakeBackend{blockDestroy: true}
	req := testRequest()
	req.Policy.Deadlines.CleanupMs = 20
	start := time.Now()
	_, err := WithSandbox(context.Background(), b, req, InProcess(), func(context.Context, Sandbox) (int, error) { return 0, nil })
	assert.Assert(t, time.Since(start) < 5*time.Second)
	var cerr *CleanupError
	assert.Assert(t, errors.As(err, &cerr), "%v", err)
	assert.Assert(t, errors.Is(cerr.Err, context.DeadlineExceeded))
}

func TestOperationErrorIs(t *testing.T) {
	cause := errors.New("socket closed")
	err := fmt.Errorf("reading: %w", NewOperationError(CodeStreamFailure, cause, "stdout failed"))
	assert.Assert(t, errors.Is(err, ErrStreamFailure))
	assert.Assert(t, errors.Is(err, cause))
	assert.Assert(t, !errors.Is(err, ErrOutputLimit))
	assert.Assert(t, !errors.Is(err, &OperationError{Code: CodeStreamFailure, Message: "other"}), "a target with a message is not a sentinel")
	assert.Assert(t, !errors.Is(err, context.Canceled))
	var op *OperationError
	assert.Assert(t, errors.As(err, &op))
	assert.Equal(t, op.Code, CodeStreamFailure)

	for _, tc := range []struct {
		ctxErr   error
		sentinel error
	}{{context.Canceled, ErrCancelled}, {context.DeadlineExceeded, ErrDeadlineExceeded}} {
		err := FromContext(fmt.Errorf("wrapped: %w", tc.ctxErr), "stopping")
		assert.Assert(t, errors.Is(err, tc.sentinel), "%v", err)
		assert.Assert(t, errors.Is(err, tc.ctxErr), "%v", err)
	}
	assert.NilError(t, FromContext(nil, "x"))
	other := errors.New("other")
	assert.Equal(t, FromContext(other, "x"), other)

	cleanup := &CleanupError{Original: ErrInputLimit, Err: cause}
	assert.Assert(t, errors.Is(cleanup, ErrInputLimit) && errors.Is(cleanup, cause))
	assert.Assert(t, errors.Is(&CleanupError{Err: cause}, cause))
}

// A contract deadline just past what time.Duration holds in nanoseconds
// (about 292 years) would wrap to a negative Duration and expire at once;
// it must clamp instead (docs/contract.md#policy).
func TestWithSandboxLargeDeadlinesClampNotWrap(t *testing.T) {
	const wraps = int64(math.MaxInt64/time.Millisecond) + 1 // wraps negative when multiplied
	assert.Assert(t, wraps <= MaxSafeInteger)
	b := &fakeBackend{}
	req := testRequest()
	req.Policy.Execution = Execution{Kind: ExecutionDeadline, TimeoutMs: wraps}
	_, err := WithSandbox(context.Background(), b, req, InProcess(), func(ctx context.Context, _ Sandbox) (int, error) {
		deadline, ok := ctx.Deadline()
		assert.Assert(t, ok)
		assert.Assert(t, time.Until(deadline) > 200*365*24*time.Hour, "execution deadline %v", deadline)
		return 0, ctx.Err()
	})
	assert.NilError(t, err)
	assert.Equal(t, Milliseconds(wraps), time.Duration(math.MaxInt64))
	assert.Equal(t, Milliseconds(1500), 1500*time.Millisecond)
}
