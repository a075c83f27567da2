package sandboxapi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"gotest.tools/v3/assert"
)

// fakePoolBackend is a fake Backend for the pool's own logic (hand-out,
// refill, expiry, refusal, Close): it has no Engine, and every sandbox is
// a struct that counts its Stop and Destroy calls. The real-Engine
// behaviour is tested through the driver (driver/pool_test.go).
type fakePoolBackend struct {
	mu        sync.Mutex
	n         int
	startErr  error         // every Start fails with it when set
	startWait time.Duration // each Start takes this long (or until ctx ends)
	checkErr  error         // every CheckReady fails with it when set
	noChecker bool          // sandboxes do not implement ReadinessChecker
	// checkGate, when set, makes CheckReady signal checkEntered and wait
	// for it to be closed.
	checkGate    chan struct{}
	checkEntered chan struct{}
	// checkHonoursCtx makes a gated CheckReady also end, with ctx's
	// error, when its ctx does.
	checkHonoursCtx bool
	all             []*fakePoolSandbox
}

func (b *fakePoolBackend) Support() Support { return Support{BackendID: "fake-pool"} }

func (b *fakePoolBackend) Reserve(req Request, recovery RecoveryPolicy) (Reservation, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n++
	s := &fakePoolSandbox{b: b, id: SandboxID(fmt.Sprintf("fake-%03d", b.n)), recovery: recovery}
	b.all = append(b.all, s)
	return &fakePoolReservation{s}, nil
}

func (b *fakePoolBackend) set(f func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f()
}

// live returns the IDs of sandboxes started and not destroyed.
func (b *fakePoolBackend) live() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var ids []string
	for _, s := range b.all {
		if s.started && s.destroyed == 0 {
			ids = append(ids, string(s.id))
		}
	}
	sort.Strings(ids)
	return ids
}

// counts returns how often sandbox id was stopped and destroyed.
func (b *fakePoolBackend) counts(id SandboxID) (stopped, destroyed int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.all {
		if s.id == id {
			return s.stopped, s.destroyed
		}
	}
	return -1, -1
}

func (b *fakePoolBackend) destroyed(id SandboxID) int {
	_, d := b.counts(id)
	return d
}

type fakePoolSandbox struct {
	b         *fakePoolBackend
	id        SandboxID
	recovery  RecoveryPolicy
	started   bool
	stopped   int
	destroyed int
}

type fakePoolReservation struct{ s *fakePoolSandbox }

func (r *fakePoolReservation) ID() SandboxID                     { return r.s.id }
func (r *fakePoolReservation) RecoveryRecord() RecoveryRecord    { return r.s.RecoveryRecord() }
func (r *fakePoolReservation) Stop(ctx context.Context) error    { return r.s.Stop(ctx) }
func (r *fakePoolReservation) Destroy(ctx context.Context) error { return r.s.Destroy(ctx) }
func (r *fakePoolReservation) Start(ctx context.Context) (Sandbox, error) {
	r.s.b.mu.Lock()
	wait, startErr, noChecker := r.s.b.startWait, r.s.b.startErr, r.s.b.noChecker
	r.s.b.mu.Unlock()
	if r.s.recovery.Persist != nil {
		if err := r.s.recovery.Persist(ctx, RecoveryRecord{SandboxID: r.s.id, Phase: PhaseStarting}); err != nil {
			return nil, err
		}
	}
	select {
	case <-time.After(wait):
	case <-ctx.Done():
		return nil, FromContext(ctx.Err(), "start")
	}
	if startErr != nil {
		return nil, startErr
	}
	r.s.b.set(func() { r.s.started = true })
	if noChecker {
		return struct{ Sandbox }{r.s}, nil
	}
	return r.s, nil
}

func (s *fakePoolSandbox) ID() SandboxID                  { return s.id }
func (s *fakePoolSandbox) RecoveryRecord() RecoveryRecord { return RecoveryRecord{SandboxID: s.id} }
func (s *fakePoolSandbox) Effective() EffectivePolicy     { return EffectivePolicy{} }
func (s *fakePoolSandbox) Workspace() string              { return "/workspace/work" }
func (s *fakePoolSandbox) ReserveProcess(ProcessSpec) (ProcessReservation, error) {
	return nil, errors.New("fake: no processes")
}
func (s *fakePoolSandbox) Stop(context.Context) error {
	s.b.set(func() { s.stopped++ })
	return nil
}
func (s *fakePoolSandbox) Destroy(context.Context) error {
	s.b.set(func() { s.destroyed++ })
	return nil
}
func (s *fakePoolSandbox) CheckReady(ctx context.Context) error {
	s.b.mu.Lock()
	gate, entered, honour := s.b.checkGate, s.b.checkEntered, s.b.checkHonoursCtx
	s.b.mu.Unlock()
	if gate != nil {
		entered <- struct{}{}
		if !honour {
			<-gate
		} else {
			select {
			case <-gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	return s.b.checkErr
}

func poolRequest(t *testing.T) Request {
	t.Helper()
	return testRequest()
}

func poolOptions(size int) PoolOptions {
	return PoolOptions{Size: size, MaxIdle: time.Hour, StartParallelism: size, RetryDelay: 10 * time.Millisecond}
}

// waitFor polls cond every millisecond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func closePool(t *testing.T, p *Pool) {
	t.Helper()
	assert.NilError(t, p.Close(context.Background()))
}

func TestPoolOptionsAreValidatedByField(t *testing.T) {
	defer goleak.VerifyNone(t)
	b := &fakePoolBackend{}
	req := poolRequest(t)
	cases := []struct {
		name string
		mut  func(*PoolOptions)
		path string
	}{
		{"size zero", func(o *PoolOptions) { o.Size = 0 }, "size"},
		{"size too large", func(o *PoolOptions) { o.Size = MaxPoolSize + 1; o.StartParallelism = 1 }, "size"},
		{"idle bound zero", func(o *PoolOptions) { o.MaxIdle = 0 }, "maxIdle"},
		{"idle bound negative", func(o *PoolOptions) { o.MaxIdle = -time.Second }, "maxIdle"},
		{"parallelism zero", func(o *PoolOptions) { o.StartParallelism = 0 }, "startParallelism"},
		{"parallelism above size", func(o *PoolOptions) { o.StartParallelism = 5 }, "startParallelism"},
		{"retry delay zero", func(o *PoolOptions) { o.RetryDelay = 0 }, "retryDelay"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := poolOptions(4)
			tc.mut(&opts)
			_, err := NewPool(b, req, opts)
			var v *ValidationError
			assert.Assert(t, errors.As(err, &v), "got %v", err)
			assert.Equal(t, len(v.Issues), 1, "%v", err)
			assert.Equal(t, v.Issues[0].PathString(), tc.path)
		})
	}
	_, err := NewPool(nil, req, poolOptions(1))
	assert.ErrorContains(t, err, "backend: must not be nil")
	bad := req
	bad.Policy.Resources.CPUs = -1
	_, err = NewPool(b, bad, poolOptions(1))
	assert.ErrorContains(t, err, "policy.resources.cpus")
	assert.Equal(t, len(b.live()), 0, "bad options start nothing")
	assert.Equal(t, b.n, 0, "bad options reserve nothing")
}

func TestPoolHandsEachSandboxOutOnceAndRefills(t *testing.T) {
	defer goleak.VerifyNone(t)
	b := &fakePoolBackend{}
	p, err := NewPool(b, poolRequest(t), poolOptions(4))
	assert.NilError(t, err)
	defer closePool(t, p)
	waitFor(t, "4 idle", func() bool { return len(p.Idle()) == 4 })

	seen := map[SandboxID]bool{}
	for i := 0; i < 12; i++ {
		sb, err := p.Acquire(context.Background())
		assert.NilError(t, err)
		assert.Assert(t, !seen[sb.ID()], "sandbox %s handed out twice", sb.ID())
		seen[sb.ID()] = true
		for _, id := range p.Idle() {
			assert.Assert(t, !seen[id], "handed-out sandbox %s is still idle", id)
		}
	}
	waitFor(t, "refill to 4", func() bool { return len(p.Idle()) == 4 })
	assert.Equal(t, len(b.live()), 16)
	// acquired sandboxes are the caller's: Close leaves them alone
	closePool(t, p)
	for id := range seen {
		assert.Equal(t, b.destroyed(id), 0, "%s", id)
	}
	assert.Equal(t, len(b.live()), 12)
}

func TestPoolIdleExpiryDestroysExactlyTheExpiredSandbox(t *testing.T) {
	defer goleak.VerifyNone(t)
	b := &fakePoolBackend{}
	var mu sync.Mutex
	var expired []SandboxID
	opts := poolOptions(1)
	opts.MaxIdle = 150 * time.Millisecond
	opts.OnEvent = func(ev PoolEvent) {
		if ev.Kind == PoolExpired {
			mu.Lock()
			expired = append(expired, ev.SandboxID)
			mu.Unlock()
		}
	}
	p, err := NewPool(b, poolRequest(t), opts)
	assert.NilError(t, err)
	defer closePool(t, p)
	waitFor(t, "one idle", func() bool { return len(p.Idle()) == 1 })
	old := p.Idle()[0]
	waitFor(t, "replacement", func() bool {
		idle := p.Idle()
		return len(idle) == 1 && idle[0] != old
	})
	waitFor(t, "old destroyed", func() bool { return b.destroyed(old) == 1 })
	stopped, destroyed := b.counts(old)
	assert.Equal(t, stopped, 1)
	assert.Equal(t, destroyed, 1)
	mu.Lock()
	got := append([]SandboxID(nil), expired...)
	mu.Unlock()
	assert.Assert(t, len(got) >= 1 && got[0] == old, "%v", got)
	for _, id := range got {
		assert.Equal(t, b.destroyed(id), 1, "expired %s destroyed once", id)
	}
	// a sandbox acquired before its bound is not destroyed by the expiry
	sb, err := p.Acquire(context.Background())
	assert.NilError(t, err)
	time.Sleep(300 * time.Millisecond)
	assert.Equal(t, b.destroyed(sb.ID()), 0)
}

func TestPoolRefusesAndDestroysSandboxFailingItsCheck(t *testing.T) {
	defer goleak.VerifyNone(t)
	b := &fakePoolBackend{checkErr: &StateError{Message: "daemon identity changed"}}
	var refused []SandboxID
	var mu sync.Mutex
	opts := poolOptions(2)
	opts.OnEvent = func(ev PoolEvent) {
		if ev.Kind == PoolRefused {
			mu.Lock()
			refused = append(refused, ev.SandboxID)
			mu.Unlock()
		}
	}
	p, err := NewPool(b, poolRequest(t), opts)
	assert.NilError(t, err)
	defer closePool(t, p)
	waitFor(t, "2 idle", func() bool { return len(p.Idle()) == 2 })
	first := p.Idle()[0]
	sb, err := p.Acquire(context.Background())
	assert.Assert(t, sb == nil)
	var se *StateError
	assert.Assert(t, errors.As(err, &se), "got %v", err)
	assert.ErrorContains(t, err, "daemon identity changed")
	assert.Equal(t, b.destroyed(first), 1, "a refused sandbox is destroyed")
	mu.Lock()
	got := append([]SandboxID(nil), refused...)
	mu.Unlock()
	assert.DeepEqual(t, got, []SandboxID{first})
	for _, id := range p.Idle() {
		assert.Assert(t, id != first)
	}
	// once the check passes again, the next sandbox is handed out
	b.set(func() { b.checkErr = nil })
	sb, err = p.Acquire(context.Background())
	assert.NilError(t, err)
	assert.Assert(t, sb.ID() != first)
}

func TestPoolRefusesSandboxWithoutReadinessChecker(t *testing.T) {
	defer goleak.VerifyNone(t)
	b := &fakePoolBackend{noChecker: true}
	p, err := NewPool(b, poolRequest(t), poolOptions(1))
	assert.NilError(t, err)
	defer closePool(t, p)
	_, err = p.Acquire(context.Background())
	var ue *UnsupportedError
	assert.Assert(t, errors.As(err, &ue), "got %v", err)
	assert.Equal(t, b.destroyed("fake-001"), 1)
}

func TestPoolAcquireReportsStartFailuresWhenCtxEnds(t *testing.T) {
	defer goleak.VerifyNone(t)
	b := &fakePoolBackend{startErr: &UnsupportedError{Message: "engine admission failed"}}
	p, err := NewPool(b, poolRequest(t), poolOptions(2))
	assert.NilError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = p.Acquire(ctx)
	assert.Assert(t, errors.Is(err, ErrDeadlineExceeded), "got %v", err)
	assert.ErrorContains(t, err, "engine admission failed")
	closePool(t, p)
	b.mu.Lock()
	all := append([]*fakePoolSandbox(nil), b.all...)
	b.mu.Unlock()
	assert.Assert(t, len(all) >= 2, "retried: %d reservations", len(all))
	for _, s := range all {
		assert.Equal(t, b.destroyed(s.id), 1, "failed start %s cleaned up", s.id)
	}
}

func TestPoolCloseDestroysIdleCancelsStartsAndLeavesNoGoroutine(t *testing.T) {
	defer goleak.VerifyNone(t)
	b := &fakePoolBackend{}
	var persisted sync.Map
	opts := poolOptions(3)
	opts.Recovery = Persisted(func(_ context.Context, rec RecoveryRecord) error {
		persisted.Store(rec.SandboxID, true)
		return nil
	})
	p, err := NewPool(b, poolRequest(t), opts)
	assert.NilError(t, err)
	waitFor(t, "3 idle", func() bool { return len(p.Idle()) == 3 })
	idle := p.Idle()
	b.set(func() { b.startWait = time.Hour }) // the next refill hangs in Start
	_, err = p.Acquire(context.Background())
	assert.NilError(t, err)
	waitFor(t, "a start in progress", func() bool { b.mu.Lock(); defer b.mu.Unlock(); return b.n == 4 })
	closePool(t, p)
	for _, id := range idle[1:] {
		assert.Equal(t, b.destroyed(id), 1, "idle %s destroyed by Close", id)
	}
	assert.Equal(t, b.destroyed("fake-004"), 1, "cancelled start cleaned up")
	for _, id := range idle {
		_, ok := persisted.Load(id)
		assert.Assert(t, ok, "%s persisted its record through the caller's store", id)
	}
	_, err = p.Acquire(context.Background())
	var se *StateError
	assert.Assert(t, errors.As(err, &se), "got %v", err)
	assert.Assert(t, strings.Contains(fmt.Sprint(err), "pool is closed"))
	assert.NilError(t, p.Close(context.Background()), "second Close")
}

// An Acquire whose context already ended takes nothing: the idle
// sandboxes stay idle and none is destroyed, and the error is the
// cancellation's.
func TestPoolAcquireWithEndedContextTakesNothing(t *testing.T) {
	defer goleak.VerifyNone(t)
	b := &fakePoolBackend{}
	p, err := NewPool(b, poolRequest(t), poolOptions(2))
	assert.NilError(t, err)
	defer closePool(t, p)
	waitFor(t, "2 idle", func() bool { return len(p.Idle()) == 2 })
	idle := p.Idle()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = p.Acquire(ctx)
	var op *OperationError
	assert.Assert(t, errors.As(err, &op), "%v", err)
	assert.Equal(t, op.Code, CodeCancelled)
	assert.DeepEqual(t, p.Idle(), idle)
	for _, id := range idle {
		assert.Equal(t, b.destroyed(id), 0, "%s", id)
	}
}

// Close called while an Acquire is checking the sandbox it took waits for
// it: the refused sandbox is destroyed, and its event sent, before Close
// returns.
func TestPoolCloseWaitsForAnAcquisitionBeingChecked(t *testing.T) {
	defer goleak.VerifyNone(t)
	gate, entered := make(chan struct{}), make(chan struct{}, 1)
	b := &fakePoolBackend{checkErr: &StateError{Message: "daemon identity changed"}, checkGate: gate, checkEntered: entered}
	var mu sync.Mutex
	closed := false
	var late []PoolEvent
	opts := poolOptions(1)
	opts.OnEvent = func(ev PoolEvent) {
		mu.Lock()
		defer mu.Unlock()
		if closed {
			late = append(late, ev)
		}
	}
	p, err := NewPool(b, poolRequest(t), opts)
	assert.NilError(t, err)
	waitFor(t, "1 idle", func() bool { return len(p.Idle()) == 1 })
	id := p.Idle()[0]
	acquired := make(chan error, 1)
	go func() {
		_, err := p.Acquire(context.Background())
		acquired <- err
	}()
	<-entered
	done := make(chan error, 1)
	go func() { done <- p.Close(context.Background()) }()
	select {
	case err := <-done:
		t.Fatalf("Close returned (%v) while an Acquire was still checking %s", err, id)
	case <-time.After(50 * time.Millisecond):
	}
	close(gate)
	assert.NilError(t, <-done)
	mu.Lock()
	closed = true
	mu.Unlock()
	assert.Equal(t, b.destroyed(id), 1, "the refused sandbox is destroyed before Close returns")
	var se *StateError
	assert.Assert(t, errors.As(<-acquired, &se))
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, len(late), 0, "events after Close returned: %v", late)
}

// Close is not held by an Acquire whose caller's context never ends: the
// check it is running is cancelled by the Close, the sandbox destroyed,
// and the Acquire told the pool closed.
func TestPoolCloseCancelsACheckUnderAnUnboundedContext(t *testing.T) {
	defer goleak.VerifyNone(t)
	gate, entered := make(chan struct{}), make(chan struct{}, 1)
	defer close(gate)
	b := &fakePoolBackend{checkGate: gate, checkEntered: entered, checkHonoursCtx: true}
	p, err := NewPool(b, poolRequest(t), poolOptions(1))
	assert.NilError(t, err)
	waitFor(t, "1 idle", func() bool { return len(p.Idle()) == 1 })
	id := p.Idle()[0]
	acquired := make(chan error, 1)
	go func() {
		_, err := p.Acquire(context.Background())
		acquired <- err
	}()
	<-entered
	done := make(chan error, 1)
	go func() { done <- p.Close(context.Background()) }()
	select {
	case err := <-done:
		assert.NilError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Close still waiting after 5 s for a check under context.Background")
	}
	err = <-acquired
	assert.Assert(t, errors.Is(err, ErrPoolClosed), "Acquire: %v", err)
	assert.Assert(t, errors.Is(err, context.Canceled), "Acquire: %v", err)
	assert.Equal(t, b.destroyed(id), 1, "the sandbox whose check was cancelled is destroyed before Close returns")
}

// A sandbox is reported started before anything else of it, even when the
// event handler is slow and an Acquire is waiting for that very sandbox.
func TestPoolReportsStartedBeforeAcquired(t *testing.T) {
	defer goleak.VerifyNone(t)
	var mu sync.Mutex
	var events []string
	opts := poolOptions(1)
	opts.OnEvent = func(ev PoolEvent) {
		if ev.Kind == PoolStarted {
			time.Sleep(20 * time.Millisecond)
		}
		mu.Lock()
		events = append(events, string(ev.Kind)+" "+string(ev.SandboxID))
		mu.Unlock()
	}
	b := &fakePoolBackend{}
	p, err := NewPool(b, poolRequest(t), opts)
	assert.NilError(t, err)
	sb, err := p.Acquire(context.Background())
	assert.NilError(t, err)
	closePool(t, p)
	mu.Lock()
	defer mu.Unlock()
	first := slices.Index(events, "started "+string(sb.ID()))
	acq := slices.Index(events, "acquired "+string(sb.ID()))
	assert.Assert(t, first >= 0 && acq > first, "events %v", events)
}

// The refill a hand-out causes starts once the hand-out's check returned:
// a start's own Engine work must not compete with the check the caller
// waits for (docs/contract.md#pool).
func TestPoolRefillsAfterTheHandOutCheck(t *testing.T) {
	defer goleak.VerifyNone(t)
	b := &fakePoolBackend{}
	p, err := NewPool(b, poolRequest(t), poolOptions(1))
	assert.NilError(t, err)
	defer closePool(t, p)
	waitFor(t, "1 idle", func() bool { return len(p.Idle()) == 1 })
	gate := make(chan struct{})
	b.set(func() { b.checkGate, b.checkEntered = gate, make(chan struct{}, 1) })
	acquired := make(chan error, 1)
	go func() {
		_, err := p.Acquire(context.Background())
		acquired <- err
	}()
	<-b.checkEntered
	time.Sleep(50 * time.Millisecond)
	b.mu.Lock()
	reserved := b.n
	b.mu.Unlock()
	assert.Check(t, reserved == 1, "a refill reserved a sandbox while the hand-out check ran (%d reservations)", reserved)
	close(gate)
	assert.NilError(t, <-acquired)
	waitFor(t, "refill to 1", func() bool { return len(p.Idle()) == 1 })
}
