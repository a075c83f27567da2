package driver_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/driver/internal/enginetest"
	"github.com/qualbox/qualbox/sandboxapi"
)

// poolStore keeps the latest persisted record of each sandbox.
type poolStore struct {
	mu     sync.Mutex
	latest map[sandboxapi.SandboxID]sandboxapi.RecoveryRecord
}

func (s *poolStore) persist(_ context.Context, r sandboxapi.RecoveryRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.latest == nil {
		s.latest = map[sandboxapi.SandboxID]sandboxapi.RecoveryRecord{}
	}
	s.latest[r.SandboxID] = r.Clone()
	return nil
}

func (s *poolStore) record(id sandboxapi.SandboxID) sandboxapi.RecoveryRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.latest[id].Clone()
}

func newPool(t *testing.T, size int, st *poolStore) *sandboxapi.Pool {
	t.Helper()
	p, err := sandboxapi.NewPool(newBackend(t), sandboxapi.Request{Policy: enginetest.Policy()}, sandboxapi.PoolOptions{
		Size: size, MaxIdle: time.Hour, StartParallelism: min(2, size), RetryDelay: time.Second,
		Recovery: sandboxapi.Persisted(st.persist),
	})
	assert.NilError(t, err)
	t.Cleanup(func() { assert.Check(t, p.Close(context.Background())) })
	return p
}

func waitIdle(t *testing.T, p *sandboxapi.Pool, n int) []sandboxapi.SandboxID {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for len(p.Idle()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("pool did not reach %d idle sandboxes: %v", n, p.Idle())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return p.Idle()
}

// TestPoolAcquisitionsAreDistinctWithFreshWorkspaces: on the real Engine a
// file one acquired sandbox writes is absent in the next.
func TestPoolAcquisitionsAreDistinctWithFreshWorkspaces(t *testing.T) {
	var st poolStore
	p := newPool(t, 4, &st)
	waitIdle(t, p, 4)
	seen := map[sandboxapi.SandboxID]bool{}
	for i := 0; i < 3; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		sb, err := p.Acquire(ctx)
		cancel()
		assert.NilError(t, err)
		t.Cleanup(func() { destroyAndCheck(t, sb) })
		assert.Assert(t, !seen[sb.ID()], "sandbox %s handed out twice", sb.ID())
		seen[sb.ID()] = true
		res := run(t, sb, nil, "/bin/sh", "-c", "test ! -e marker && echo pooled > marker && cat marker")
		assert.Equal(t, res.exit.Code, 0, "stderr %q: a previous acquisition's file is visible", res.stderr)
		assert.Equal(t, string(res.stdout), "pooled\n")
	}
}

// TestPoolRefusesAndDestroysStoppedCompute: a pooled sandbox whose compute
// was killed behind the pool's back fails the pre-exec check and is
// destroyed, never handed out.
func TestPoolRefusesAndDestroysStoppedCompute(t *testing.T) {
	var st poolStore
	p := newPool(t, 1, &st)
	id := waitIdle(t, p, 1)[0]
	rec := st.record(id)
	var computeID string
	for _, r := range rec.Resources {
		if r.Role == sandboxapi.RoleCompute {
			computeID = r.Identity.ID
		}
	}
	assert.Assert(t, computeID != "")
	cli := enginetest.Client(t)
	_, err := cli.ContainerKill(context.Background(), computeID, client.ContainerKillOptions{Signal: "KILL"})
	assert.NilError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := p.Acquire(ctx)
	assert.Assert(t, sb == nil)
	var se *sandboxapi.StateError
	assert.Assert(t, errors.As(err, &se), "got %v", err)
	assertGone(t, rec)
}

// TestPoolRecordsLetAFreshControllerCleanUp: with the pool's controller
// gone (the pool abandoned, never closed), the persisted records of a full
// pool let a fresh Backend reconcile and destroy every pooled sandbox.
func TestPoolRecordsLetAFreshControllerCleanUp(t *testing.T) {
	var st poolStore
	p := newPool(t, 4, &st)
	ids := waitIdle(t, p, 4)
	fresh := newBackend(t)
	for _, id := range ids {
		rec := st.record(id)
		assert.Equal(t, rec.Phase, sandboxapi.PhaseRunning, "%s", id)
		got, err := fresh.Reconcile(context.Background(), rec)
		assert.NilError(t, err)
		assert.Equal(t, got.Kind, sandboxapi.ReconciliationMatched, got.Reason)
		assert.NilError(t, got.Owner.Stop(context.Background()))
		assert.NilError(t, got.Owner.Destroy(context.Background()))
		assertGone(t, rec)
	}
}

// TestHandOffAdmitsTheDaemonOnce: a process Start less than a second
// after a passed CheckReady (a pool's hand-out) reuses its daemon
// admission, reading neither /version nor /info, but still inspects the
// compute container before the exec create and the exec start; a Start
// without a CheckReady, or one more than a second after it, admits the
// daemon again (docs/contract.md#pool).
func TestHandOffAdmitsTheDaemonOnce(t *testing.T) {
	px := newProxy(t)
	be := newBackend(t, viaProxy(px))
	count := func(method, path string) int {
		n := 0
		for _, e := range px.Seen() {
			if e.Method == method && strings.HasPrefix(e.Path, path) {
				n++
			}
		}
		return n
	}
	execWith := func(sb sandboxapi.Sandbox, check bool, wait time.Duration) (versions, infos, inspects int) {
		t.Helper()
		if check {
			assert.NilError(t, sb.(sandboxapi.ReadinessChecker).CheckReady(context.Background()))
		}
		time.Sleep(wait)
		v, i, c := count("GET", "/version"), count("GET", "/info"), count("GET", "/containers/")
		res := run(t, sb, nil, "/bin/true")
		assert.Equal(t, res.exit.Code, 0)
		return count("GET", "/version") - v, count("GET", "/info") - i, count("GET", "/containers/") - c
	}

	sb := started(t, be, enginetest.Policy())
	v, i, c := execWith(sb, true, 0)
	assert.Check(t, v == 0 && i == 0, "a Start right after CheckReady read /version %d and /info %d times", v, i)
	assert.Check(t, c >= 2, "the compute container was inspected %d times, want before the exec create and the exec start", c)

	for _, tc := range []struct {
		name  string
		check bool
		wait  time.Duration
	}{{"without CheckReady", false, 0}, {"1.2 s after CheckReady", true, 1200 * time.Millisecond}} {
		sb := started(t, be, enginetest.Policy())
		v, i, _ := execWith(sb, tc.check, tc.wait)
		assert.Check(t, v >= 1 && i >= 1, "%s: Start read /version %d and /info %d times, want a fresh admission", tc.name, v, i)
	}
}
