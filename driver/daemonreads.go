package driver

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/moby/moby/client"
)

// daemonReads are one read of the Engine's /version and /info.
type daemonReads struct {
	ver             client.ServerVersionResult
	info            client.SystemInfoResult
	verErr, infoErr error
}

// readDaemon reads /version and /info at once. A /version failure cancels
// the /info read: it wins whatever /info returns (admission.apply).
func readDaemon(ctx context.Context, eng *engine) daemonReads {
	var r daemonReads
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		if r.ver, r.verErr = eng.cli.ServerVersion(ctx, client.ServerVersionOptions{}); r.verErr != nil {
			cancel()
		}
	})
	r.info, r.infoErr = eng.cli.Info(ctx, client.InfoOptions{})
	wg.Wait()
	return r
}

// daemonReadGroup coalesces the daemon reads of concurrent admissions on
// one engine (docs/contract.md#profiles-and-admission). It is our own
// rather than golang.org/x/sync/singleflight because freshness is the
// point: singleflight hands a caller the result of a read already in
// flight, which began before the caller asked and may predate the change
// the caller's admission exists to notice. Here a caller only ever shares
// a read that began after it called: with no read in flight one starts at
// once; otherwise the caller waits for the next read, which starts when
// the newest read in flight ends and serves every caller that arrived
// meanwhile. So a burst of N admissions (each /version and /info making a
// daemon such as Docker 20.10 run runc and docker-init to report their
// versions) costs about two reads instead of N. A read in flight longer
// than staleRead no longer holds the next one back: an Engine that stalls
// one read delays the admissions queued behind it by staleRead at most,
// not until their deadlines.
type daemonReadGroup struct {
	mu     sync.Mutex
	newest *sharedRead // the read started last; nil before the first
	next   *sharedRead // the read the next callers share; nil when none waits
}

// staleRead is how long a read may be in flight before the next read
// starts beside it.
const staleRead = time.Second

// sharedRead is one coalesced read. Its context ends when every caller
// waiting for it gave up, so a read nobody waits for stops.
type sharedRead struct {
	ctx     context.Context
	cancel  context.CancelFunc
	waiters int
	done    chan struct{}
	stale   bool // in flight for staleRead already
	res     daemonReads
}

// errReadNotBegun is returned to a caller whose context ended while it
// waited for a read to begin.
var errReadNotBegun = errors.New("waiting for a /version and /info read to begin")

// read returns a /version and /info read of eng that began after this
// call, shared with the other callers waiting at the same time. When ctx
// ends first it returns ctx's error (joined with errReadNotBegun when its
// read had not begun); the read then continues only for the callers still
// waiting.
func (g *daemonReadGroup) read(ctx context.Context, eng *engine) (daemonReads, error) {
	if err := ctx.Err(); err != nil {
		return daemonReads{}, err
	}
	g.mu.Lock()
	c := g.next
	if c == nil {
		// The read keeps ctx's values, not its cancellation: it ends when
		// its last waiter leaves.
		rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		c = &sharedRead{ctx: rctx, cancel: cancel, done: make(chan struct{})}
		g.next = c
		if g.newest == nil || g.newest.stale || isDone(g.newest.done) {
			g.startLocked(eng)
		}
	}
	c.waiters++
	g.mu.Unlock()
	select {
	case <-c.done:
		return c.res, nil
	case <-ctx.Done():
		g.mu.Lock()
		c.waiters--
		begun := g.next != c
		if c.waiters == 0 {
			c.cancel()
			if !begun { // nobody will start it
				g.next = nil
			}
		}
		g.mu.Unlock()
		if !begun {
			return daemonReads{}, errors.Join(errReadNotBegun, ctx.Err())
		}
		return daemonReads{}, ctx.Err()
	}
}

// startLocked starts g.next and, should it become stale, the read queued
// behind it then. g.mu is held.
func (g *daemonReadGroup) startLocked(eng *engine) {
	c := g.next
	g.next = nil
	g.newest = c
	stale := time.AfterFunc(staleRead, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		c.stale = true
		if g.newest == c && g.next != nil {
			g.startLocked(eng)
		}
	})
	go func() {
		c.res = readDaemon(c.ctx, eng)
		stale.Stop()
		c.cancel()
		g.mu.Lock()
		defer g.mu.Unlock()
		close(c.done)
		if g.newest == c && g.next != nil {
			g.startLocked(eng)
		}
	}()
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
