package sandboxapi

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ReadinessChecker is implemented by sandboxes whose backend can repeat,
// on demand, the checks it makes before any exec: daemon admission with
// the record's daemon identity, and an inspection of the owned compute
// requiring it running (docs/contract.md#pool). A Pool hands out only
// sandboxes that implement it and pass it.
type ReadinessChecker interface {
	// CheckReady returns nil when the sandbox is started, has no process
	// reserved, its daemon is the one its record names and its compute is
	// the owned, running one. Otherwise it returns a *StateError (identity
	// changed, compute gone or stopped), an *UnsupportedError (admission
	// failed) or an *OperationError.
	CheckReady(ctx context.Context) error
}

// PoolOptions configures a Pool (docs/contract.md#pool). Every field is
// explicit; NewPool names each invalid one in a *ValidationError.
type PoolOptions struct {
	// Size is the number of idle, started sandboxes the pool keeps: 1..1024.
	Size int
	// MaxIdle bounds how long one sandbox may wait idle after its start
	// returned; then it is destroyed and replaced. Positive.
	MaxIdle time.Duration
	// StartParallelism is the number of starts the pool runs at once while
	// refilling: 1..Size.
	StartParallelism int
	// RetryDelay is the pause after a failed start before the next one.
	// Positive.
	RetryDelay time.Duration
	// Recovery is the recovery policy of every pooled sandbox: with a
	// persisted policy each one's record goes through the caller's store
	// like any other sandbox's (docs/contract.md#recovery).
	Recovery RecoveryPolicy
	// OnEvent, if set, is called for every event in the pool's life, from
	// the pool's own goroutines and Acquire's, never after Close returned;
	// a sandbox's "started" comes before any other event of it. It is
	// never called under the pool's lock, but it delays the goroutine
	// that emits (a refill, an Acquire), so it should return quickly; it
	// must not call Close.
	OnEvent func(PoolEvent)
}

// MaxPoolSize is the largest PoolOptions.Size.
const MaxPoolSize = 1024

// PoolEventKind classifies a PoolEvent.
type PoolEventKind string

// Pool event kinds.
const (
	// PoolStarted: a sandbox started and is idle in the pool.
	PoolStarted PoolEventKind = "started"
	// PoolStartFailed: a start failed; what it acquired was cleaned up.
	PoolStartFailed PoolEventKind = "start_failed"
	// PoolExpired: an idle sandbox reached MaxIdle and was destroyed.
	PoolExpired PoolEventKind = "expired"
	// PoolAcquired: a sandbox passed CheckReady and was handed out.
	PoolAcquired PoolEventKind = "acquired"
	// PoolRefused: a sandbox failed CheckReady and was destroyed.
	PoolRefused PoolEventKind = "refused"
	// PoolClosed: Close destroyed an idle sandbox.
	PoolClosed PoolEventKind = "closed"
)

// PoolEvent is one event of a Pool. Err is the failure (start, check or
// cleanup) where there is one.
type PoolEvent struct {
	Kind      PoolEventKind
	SandboxID SandboxID
	Err       error
}

// ErrPoolClosed is returned by Acquire after Close.
var ErrPoolClosed = &StateError{Message: "pool is closed"}

// Pool keeps up to Size sandboxes for one request started and idle
// (compute running, no process reserved) and hands each out at most once
// (docs/contract.md#pool). It refills in the background, destroys a
// sandbox idle longer than MaxIdle and replaces it, and destroys every
// idle sandbox on Close. Nothing goes back into a pool: the caller owns an
// acquired sandbox and stops and destroys it as any other.
type Pool struct {
	backend Backend
	req     Request
	opts    PoolOptions
	cleanup time.Duration

	ctx    context.Context // cancelled by Close: starts in progress return
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	idle     []*pooled
	starting int
	closed   bool
	first    Reservation // validated by NewPool, started by the first refill
	lastErr  error
	changed  chan struct{} // closed and replaced whenever idle or lastErr changes
}

type pooled struct {
	sb    Sandbox
	timer *time.Timer
}

// NewPool validates opts and req, reserves one sandbox synchronously so an
// unsupported request fails here, and starts filling the pool in the
// background. Errors: a *ValidationError naming each invalid option
// ("size", "maxIdle", "startParallelism", "retryDelay") or request field
// ("policy. ..."), or Reserve's own error (*UnsupportedError, ...). A nil
// backend is a *ValidationError with path "backend".
func NewPool(backend Backend, req Request, opts PoolOptions) (*Pool, error) {
	var issues []Issue
	if backend == nil {
		issues = append(issues, Issue{Path: []string{"backend"}, Message: "must not be nil"})
	}
	if opts.Size < 1 || opts.Size > MaxPoolSize {
		issues = append(issues, Issue{Path: []string{"size"}, Message: "must be 1..1024"})
	}
	if opts.MaxIdle <= 0 {
		issues = append(issues, Issue{Path: []string{"maxIdle"}, Message: "must be a positive duration"})
	}
	if opts.StartParallelism < 1 || (opts.Size >= 1 && opts.StartParallelism > opts.Size) {
		issues = append(issues, Issue{Path: []string{"startParallelism"}, Message: "must be 1..size"})
	}
	if opts.RetryDelay <= 0 {
		issues = append(issues, Issue{Path: []string{"retryDelay"}, Message: "must be a positive duration"})
	}
	norm, err := req.Normalize()
	if err != nil {
		var v *ValidationError
		if !errors.As(err, &v) {
			return nil, err
		}
		issues = append(issues, v.Issues...)
	}
	if len(issues) > 0 {
		return nil, &ValidationError{Issues: issues}
	}
	first, err := backend.Reserve(norm, opts.Recovery)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{
		backend: backend,
		req:     norm,
		opts:    opts,
		cleanup: Milliseconds(norm.Policy.Deadlines.CleanupMs),
		ctx:     ctx,
		cancel:  cancel,
		first:   first,
		changed: make(chan struct{}),
	}
	p.mu.Lock()
	p.refillLocked()
	p.mu.Unlock()
	return p, nil
}

// Idle returns the IDs of the idle sandboxes, oldest first.
func (p *Pool) Idle() []SandboxID {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := make([]SandboxID, len(p.idle))
	for i, e := range p.idle {
		ids[i] = e.sb.ID()
	}
	return ids
}

// Acquire hands out the oldest idle sandbox, waiting for one while the
// pool refills, after re-checking it (ReadinessChecker) under ctx. The
// sandbox is the caller's from then on: the pool never sees it again.
//
// Errors: ErrPoolClosed (a *StateError) after Close; when ctx ends first,
// a cancelled or deadline_exceeded *OperationError wrapping the last
// start failure, if any; when the sandbox fails its check, the check's
// error (a *StateError for a changed daemon identity or stopped compute)
// after the sandbox was destroyed, or a *CleanupError when destroying it
// failed too; an *UnsupportedError, after destroying it, for a sandbox
// that does not implement ReadinessChecker. A Close during the check ends
// it: the sandbox is destroyed and the error wraps ErrPoolClosed.
func (p *Pool) Acquire(ctx context.Context) (Sandbox, error) {
	// A caller already cancelled takes nothing: its check would fail for
	// its own context and destroy a healthy idle sandbox.
	if err := ctx.Err(); err != nil {
		return nil, &OperationError{Code: fromContextCode(err), Message: "acquire cancelled before a pooled sandbox was taken", Err: err}
	}
	p.mu.Lock()
	for len(p.idle) == 0 {
		if p.closed {
			p.mu.Unlock()
			return nil, ErrPoolClosed
		}
		changed, last := p.changed, p.lastErr
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, &OperationError{Code: fromContextCode(ctx.Err()), Message: "no pooled sandbox became ready", Err: errors.Join(ctx.Err(), last)}
		case <-changed:
		}
		p.mu.Lock()
	}
	if p.closed {
		p.mu.Unlock()
		return nil, ErrPoolClosed
	}
	e := p.idle[0]
	p.idle = p.idle[1:]
	e.timer.Stop() // an expiry already running finds e gone and does nothing
	// Close waits for this acquisition: a refused sandbox's destroy and
	// its event never happen after Close returned.
	p.wg.Add(1)
	defer p.wg.Done()
	p.mu.Unlock()
	// The refill starts once the check returned, not before it: a start's
	// own admission and Engine work would otherwise compete with the
	// check the caller is waiting for (and, with a backend that coalesces
	// admission reads, make the check wait for the start's read).
	defer func() {
		p.mu.Lock()
		p.refillLocked()
		p.mu.Unlock()
	}()

	// The check ends when the caller's ctx does or the pool closes, so
	// that Close, which waits for it, is never held by a caller's
	// unbounded context.
	checkCtx, cancelCheck := context.WithCancel(ctx)
	defer cancelCheck()
	defer context.AfterFunc(p.ctx, cancelCheck)()
	checker, ok := e.sb.(ReadinessChecker)
	var checkErr error
	if !ok {
		checkErr = &UnsupportedError{Message: "the backend's sandbox does not implement sandboxapi.ReadinessChecker; a pool cannot re-check it before handing it out"}
	} else {
		checkErr = checker.CheckReady(checkCtx)
		if checkErr != nil && p.ctx.Err() != nil && ctx.Err() == nil {
			checkErr = errors.Join(ErrPoolClosed, checkErr)
		}
	}
	if checkErr != nil {
		cerr := cleanup(ctx, e.sb, p.cleanup)
		p.emit(PoolEvent{Kind: PoolRefused, SandboxID: e.sb.ID(), Err: errors.Join(checkErr, cerr)})
		if cerr != nil {
			return nil, &CleanupError{Original: checkErr, Err: cerr}
		}
		return nil, checkErr
	}
	p.emit(PoolEvent{Kind: PoolAcquired, SandboxID: e.sb.ID()})
	return e.sb, nil
}

// Close stops refilling, cancels starts in progress (each cleans up what
// it acquired), destroys every idle sandbox (Stop then Destroy, each
// bounded by deadlines.cleanupMs and detached from ctx's cancellation),
// and returns once none of the pool's goroutines remains and no Acquire
// is still checking a sandbox it took (so no event follows Close's
// return). Sandboxes already acquired are not touched. It returns the joined cleanup errors;
// a second Close returns nil.
func (p *Pool) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	idle := p.idle
	p.idle = nil
	first := p.first
	p.first = nil
	for _, e := range idle {
		e.timer.Stop()
	}
	p.signalLocked()
	p.mu.Unlock()
	p.cancel()

	var errs []error
	if first != nil { // never started: inert, but its record may be persisted
		if err := cleanup(ctx, first, p.cleanup); err != nil {
			errs = append(errs, err)
		}
	}
	for _, e := range idle {
		err := cleanup(ctx, e.sb, p.cleanup)
		p.emit(PoolEvent{Kind: PoolClosed, SandboxID: e.sb.ID(), Err: err})
		if err != nil {
			errs = append(errs, err)
		}
	}
	p.wg.Wait()
	return errors.Join(errs...)
}

// refillLocked starts sandboxes until idle plus starting reaches Size,
// at most StartParallelism at once. p.mu is held.
func (p *Pool) refillLocked() {
	for !p.closed && p.starting < p.opts.StartParallelism && len(p.idle)+p.starting < p.opts.Size {
		p.starting++
		res := p.first
		p.first = nil
		p.wg.Add(1)
		go p.startOne(res)
	}
}

// startOne reserves (unless res is given) and starts one sandbox, adds it
// to the idle list or cleans it up, then refills.
func (p *Pool) startOne(res Reservation) {
	defer p.wg.Done()
	sb, err := p.start(res)
	if err == nil {
		// Before sb is idle, so that no Acquire can take it and report it
		// acquired first; outside p.mu, so that a slow OnEvent holds up
		// this goroutine only.
		p.emit(PoolEvent{Kind: PoolStarted, SandboxID: sb.ID()})
	}
	p.mu.Lock()
	if err == nil && p.closed {
		p.mu.Unlock()
		cerr := cleanup(p.ctx, sb, p.cleanup)
		p.emit(PoolEvent{Kind: PoolClosed, SandboxID: sb.ID(), Err: cerr})
		p.mu.Lock()
	} else if err == nil {
		e := &pooled{sb: sb}
		e.timer = time.AfterFunc(p.opts.MaxIdle, func() { p.expire(e) })
		p.idle = append(p.idle, e)
		p.lastErr = nil
		p.signalLocked()
	} else if !p.closed {
		p.lastErr = err
		p.signalLocked()
		p.mu.Unlock()
		p.emit(PoolEvent{Kind: PoolStartFailed, Err: err})
		select {
		case <-p.ctx.Done():
		case <-time.After(p.opts.RetryDelay):
		}
		p.mu.Lock()
	}
	p.starting--
	p.refillLocked()
	p.mu.Unlock()
}

// start reserves and starts one sandbox under the pool's context; a
// failed start's reservation is cleaned up.
func (p *Pool) start(res Reservation) (Sandbox, error) {
	if res == nil {
		var err error
		res, err = p.backend.Reserve(p.req, p.opts.Recovery)
		if err != nil {
			return nil, err
		}
	}
	sb, err := res.Start(p.ctx)
	if err != nil {
		if cerr := cleanup(p.ctx, res, p.cleanup); cerr != nil {
			return nil, &CleanupError{Original: err, Err: cerr}
		}
		return nil, err
	}
	return sb, nil
}

// expire destroys e if it is still idle and refills.
func (p *Pool) expire(e *pooled) {
	p.mu.Lock()
	found := false
	for i, x := range p.idle {
		if x == e {
			p.idle = append(p.idle[:i:i], p.idle[i+1:]...)
			found = true
			break
		}
	}
	if !found || p.closed {
		p.mu.Unlock()
		return
	}
	p.wg.Add(1)
	p.signalLocked()
	p.mu.Unlock()
	defer p.wg.Done()
	err := cleanup(p.ctx, e.sb, p.cleanup)
	p.emit(PoolEvent{Kind: PoolExpired, SandboxID: e.sb.ID(), Err: err})
	p.mu.Lock()
	p.refillLocked()
	p.mu.Unlock()
}

func (p *Pool) signalLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *Pool) emit(ev PoolEvent) {
	if p.opts.OnEvent != nil {
		p.opts.OnEvent(ev)
	}
}

func fromContextCode(err error) Code {
	if errors.Is(err, context.DeadlineExceeded) {
		return CodeDeadlineExceeded
	}
	return CodeCancelled
}
