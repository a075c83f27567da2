package driver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// gatedEngine is a fake Engine (not a Docker Engine): it answers /version
// and /info only when the test releases them, numbering each /info it
// received in its ID. Which read a caller got, relative to when it asked,
// is what daemonReadGroup's freshness is about, and no real Engine can be
// held mid-reply on demand.
type gatedEngine struct {
	mu       sync.Mutex
	infos    int
	versions int
	release  chan struct{} // one value releases one /version or /info
	gone     chan string   // paths whose request context ended unanswered
}

func newGatedEngine(t *testing.T) (*gatedEngine, *engine) {
	t.Helper()
	g := &gatedEngine{release: make(chan struct{}, 64), gone: make(chan string, 64)}
	sock := fakeEngine(t, func(w http.ResponseWriter, r *http.Request) {
		var body string
		g.mu.Lock()
		switch {
		case strings.HasSuffix(r.URL.Path, "/info"):
			g.infos++
			body = fmt.Sprintf(`{"ID":"read-%d"}`, g.infos)
		case strings.HasSuffix(r.URL.Path, "/version"):
			g.versions++
			body = `{"Version":"20.10.24","ApiVersion":"1.41"}`
		default:
			g.mu.Unlock()
			http.NotFound(w, r)
			return
		}
		g.mu.Unlock()
		select {
		case <-g.release:
		case <-r.Context().Done():
			g.gone <- r.URL.Path
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	})
	eng, err := newEngine(sock, "1.41")
	assert.NilError(t, err)
	t.Cleanup(func() { eng.close() })
	return g, eng
}

func (g *gatedEngine) counts() (versions, infos int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.versions, g.infos
}

// waitCounts waits until the engine received want /version and /info
// requests each.
func (g *gatedEngine) waitCounts(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, i := g.counts()
		if v == want && i == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("engine received %d /version and %d /info requests, want %d each", v, i, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type readResult struct {
	id  string
	err error
}

func startRead(ctx context.Context, eng *engine) <-chan readResult {
	out := make(chan readResult, 1)
	go func() {
		d, err := eng.reads.read(ctx, eng)
		if err == nil {
			err = errors.Join(d.verErr, d.infoErr)
		}
		out <- readResult{id: d.info.Info.ID, err: err}
	}()
	return out
}

// Callers that ask while a read is in flight never get that read, which
// began before they asked: they share the next one, which starts when
// the first ends. Four admissions cost two reads, not four.
func TestDaemonReadsAreFreshAndCoalesced(t *testing.T) {
	g, eng := newGatedEngine(t)
	ctx := context.Background()
	first := startRead(ctx, eng)
	g.waitCounts(t, 1)

	var later []<-chan readResult
	for range 3 {
		later = append(later, startRead(ctx, eng))
	}
	// Nothing new is read while the first read is in flight.
	time.Sleep(100 * time.Millisecond)
	v, i := g.counts()
	assert.Check(t, is.Equal(v, 1))
	assert.Check(t, is.Equal(i, 1))

	g.release <- struct{}{}
	g.release <- struct{}{}
	r := <-first
	assert.NilError(t, r.err)
	assert.Check(t, is.Equal(r.id, "read-1"))

	g.waitCounts(t, 2) // the shared second read began after the first ended
	g.release <- struct{}{}
	g.release <- struct{}{}
	for _, c := range later {
		r := <-c
		assert.NilError(t, r.err)
		assert.Check(t, is.Equal(r.id, "read-2"), "a caller that asked during read 1 got a read that began before it asked")
	}
	v, i = g.counts()
	assert.Check(t, is.Equal(v, 2))
	assert.Check(t, is.Equal(i, 2))
}

// A caller whose context ends returns its context's error at once; a read
// nobody waits for any more is cancelled (the Engine sees its requests
// go), and one another caller still waits for goes on for that caller.
func TestDaemonReadsEndWithTheirLastWaiter(t *testing.T) {
	g, eng := newGatedEngine(t)
	alone, cancelAlone := context.WithCancel(context.Background())
	r := startRead(alone, eng)
	g.waitCounts(t, 1)
	cancelAlone()
	res := <-r
	assert.Check(t, errors.Is(res.err, context.Canceled), "got %v", res.err)
	for range 2 {
		select {
		case <-g.gone:
		case <-time.After(10 * time.Second):
			t.Fatal("the read nobody waited for was not cancelled")
		}
	}

	// Two callers share the next read; one leaves, the other still gets it.
	leaving, cancelLeaving := context.WithCancel(context.Background())
	a := startRead(leaving, eng)
	b := startRead(context.Background(), eng)
	g.waitCounts(t, 2)
	cancelLeaving()
	assert.Check(t, errors.Is((<-a).err, context.Canceled))
	g.release <- struct{}{}
	g.release <- struct{}{}
	got := <-b
	assert.NilError(t, got.err)
	assert.Check(t, is.Equal(got.id, "read-2"))
}

// An Engine that stalls one read holds the admissions queued behind it
// for staleRead at most: the next read then starts beside the stalled one
// and serves them.
func TestDaemonReadsDoNotQueueBehindAStalledRead(t *testing.T) {
	g, eng := newGatedEngine(t)
	stalled, cancelStalled := context.WithCancel(context.Background())
	defer cancelStalled()
	startRead(stalled, eng)
	g.waitCounts(t, 1)
	began := time.Now()
	queued := startRead(context.Background(), eng)
	g.waitCounts(t, 2)
	waited := time.Since(began)
	assert.Check(t, waited >= staleRead-50*time.Millisecond && waited < staleRead+2*time.Second,
		"the queued read began after %v, want about staleRead (%v)", waited, staleRead)
	for range 4 { // both reads' /version and /info, in whatever order
		g.release <- struct{}{}
	}
	r := <-queued
	assert.NilError(t, r.err)
	assert.Check(t, is.Equal(r.id, "read-2"))
}

// A caller whose context ends before its read began is told so.
func TestDaemonReadsNameAWaitThatNeverBegan(t *testing.T) {
	g, eng := newGatedEngine(t)
	first, cancelFirst := context.WithCancel(context.Background())
	defer cancelFirst()
	startRead(first, eng)
	g.waitCounts(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := eng.reads.read(ctx, eng)
	assert.Check(t, errors.Is(err, errReadNotBegun), "got %v", err)
	assert.Check(t, errors.Is(err, context.DeadlineExceeded), "got %v", err)
}
