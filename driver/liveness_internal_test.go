package driver

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/driver/internal/enginetest"
	"github.com/qualbox/qualbox/qualify/faultproxy"
	"github.com/qualbox/qualbox/sandboxapi"
)

// silentEngine is a fake Engine, not a Docker Engine: a Unix socket that
// accepts every connection and never answers. No real Engine can be made to
// behave so on demand, and that behaviour is what the driver's own
// deadlines exist for. It returns the socket path and the number of
// connections accepted so far.
func silentEngine(t *testing.T) (string, func() int) {
	t.Helper()
	dir, err := os.MkdirTemp("", "qb-silent-")
	assert.NilError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "engine.sock")
	ln, err := net.Listen("unix", sock)
	assert.NilError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return sock, func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(conns)
	}
}

// Admit, AdmitAs and Reconcile with a context that never expires, against
// an Engine that accepts and never answers, return within their own bound
// (StandaloneDeadlineMs, shortened here) with a deadline_exceeded
// OperationError naming the request that was not answered
// (docs/contract.md#profiles-and-admission).
func TestStandaloneCallsBoundedAgainstSilentEngine(t *testing.T) {
	const profile = "linux-x64-cgroupv1"
	if !hostController().matches(mustProfile(t, profile)) {
		t.Skip("profile " + profile + " needs a linux/amd64 controller")
	}
	const bound = 300 * time.Millisecond
	calls := []struct {
		name string
		call func(ctx context.Context, b *Backend) error
	}{
		{"Admit", func(ctx context.Context, b *Backend) error { _, err := b.Admit(ctx); return err }},
		{"AdmitAs", func(ctx context.Context, b *Backend) error {
			_, err := b.AdmitAs(ctx, hostController().Platform)
			return err
		}},
		{"Reconcile", func(ctx context.Context, b *Backend) error {
			_, err := b.Reconcile(ctx, dispatchedRecord(t, b))
			return err
		}},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			sock, accepted := silentEngine(t)
			b, err := New(Config{
				Profile: profile, Endpoint: "unix://" + sock, Namespace: "silent",
				SpillDirectory: t.TempDir(), ImageID: "sha256:" + strings.Repeat("a", 64),
				User: User{UID: 65534, GID: 65534},
			})
			assert.NilError(t, err)
			t.Cleanup(func() { _ = b.Close() })
			b.standaloneBound = bound

			errc := make(chan error, 1)
			begin := time.Now()
			go func() { errc <- c.call(context.Background(), b) }()
			select {
			case err = <-errc:
			case <-time.After(20 * bound):
				t.Fatalf("%s still waiting for the silent Engine after %v (own bound %v)", c.name, 20*bound, bound)
			}
			elapsed := time.Since(begin)
			assert.Assert(t, accepted() > 0, "the fake Engine was never reached")
			assert.Check(t, elapsed >= bound, "returned after %v, before the bound %v", elapsed, bound)
			var op *sandboxapi.OperationError
			assert.Assert(t, errors.As(err, &op), "%v", err)
			assert.Check(t, op.Code == sandboxapi.CodeDeadlineExceeded, "%v", err)
			assert.Check(t, op.Message == "read Engine /version at "+sock, "%q", op.Message)
			assert.Check(t, errors.Is(err, sandboxapi.ErrDeadlineExceeded))
		})
	}
}

// Past admission too: with the lane's real Engine answering /version and
// /info through a fault proxy that holds every container inspect for an
// hour, Reconcile(context.Background()) of a record whose compute create
// was dispatched returns within its own bound, naming the held inspect
// (docs/contract.md#recovery). Nothing is created on the Engine.
func TestReconcileBoundedPastAdmission(t *testing.T) {
	daemon, err := enginetest.Client(t).Info(context.Background(), client.InfoOptions{})
	assert.NilError(t, err)
	dir, err := os.MkdirTemp("", "qb-hold-")
	assert.NilError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	p, err := faultproxy.New(dir, enginetest.Socket(), faultproxy.Delay(faultproxy.Request("GET", `/containers/[^/]+/json`), time.Hour))
	assert.NilError(t, err)
	t.Cleanup(func() { assert.Check(t, p.Close()) })
	b, err := New(Config{
		Profile: enginetest.Profile(), Endpoint: p.Endpoint(), Namespace: "held",
		SpillDirectory: t.TempDir(), ImageID: "sha256:" + strings.Repeat("a", 64),
		User: User{UID: 65534, GID: 65534},
	})
	assert.NilError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	const bound = 3 * time.Second
	b.standaloneBound = bound
	rec := dispatchedRecord(t, b)
	rec.Authority.BackendIdentity = daemon.Info.ID

	errc := make(chan error, 1)
	go func() { _, err := b.Reconcile(context.Background(), rec); errc <- err }()
	select {
	case err = <-errc:
	case <-time.After(10 * bound):
		t.Fatalf("Reconcile still waiting for the held inspect after %v (own bound %v)", 10*bound, bound)
	}
	var op *sandboxapi.OperationError
	assert.Assert(t, errors.As(err, &op), "%v", err)
	assert.Check(t, op.Code == sandboxapi.CodeDeadlineExceeded, "%v", err)
	assert.Check(t, strings.HasPrefix(op.Message, "inspect ") && strings.Contains(op.Message, " container "), "%q", op.Message)
	var held bool
	for _, x := range p.Seen() {
		held = held || x.Action == faultproxy.ActionDelay
	}
	assert.Check(t, held, "no container inspect was held: %+v", p.Seen())
}
