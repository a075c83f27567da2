package driver

import (
	"context"
	"sync"

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
// the one in flight ends and serves every caller that arrived meanwhile.
// At most one read per engine is in flight, so a burst of N admissions
// (each /version and /info making a daemon such as Docker 20.10 run
// runc and docker-init to report their versions) costs about two reads
// instead of N.
type daemonReadGroup struct {
	mu      sync.Mutex
	running bool
	next    *sharedRead // the read the next callers share; nil when none waits
}

// sharedRead is one coalesced read. Its context ends when every caller
// waiting for it gave up, so a read nobody waits for stops.
type sharedRead struct {
	ctx     context.Context
	cancel  context.CancelFunc
	waiters int
	done    chan struct{}
	res     daemonReads
}

// read returns a /version and /info read of eng that began after this
// call, shared with the other callers waiting at the same time. It
// returns ctx's error when ctx ends first; the read then continues only
// for the callers still waiting.
func (g *daemonReadGroup) read(ctx context.Context, eng *engine) (daemonReads, error) {
	g.mu.Lock()
	c := g.next
	if c == nil {
		// The read keeps ctx's values, not its cancellation: it ends when
		// its last waiter leaves.
		rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		c = &sharedRead{ctx: rctx, cancel: cancel, done: make(chan struct{})}
		g.next = c
		if !g.running {
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
		if c.waiters == 0 {
			c.cancel()
			if g.next == c { // never started: nobody will start it
				g.next = nil
			}
		}
		g.mu.Unlock()
		return daemonReads{}, ctx.Err()
	}
}

// startLocked starts g.next. g.mu is held.
func (g *daemonReadGroup) startLocked(eng *engine) {
	c := g.next
	g.next = nil
	g.running = true
	go func() {
		c.res = readDaemon(c.ctx, eng)
		c.cancel()
		close(c.done)
		g.mu.Lock()
		defer g.mu.Unlock()
		g.running = false
		if g.next != nil {
			g.startLocked(eng)
		}
	}()
}
