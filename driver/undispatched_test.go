package driver_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/driver/internal/enginetest"
	"github.com/qualbox/qualbox/sandboxapi"
)

// Start is cancelled right after the storage "creating" checkpoint, before
// the create is sent, and the revert of that checkpoint to "planned" fails
// to persist. The owner knows nothing was dispatched: its cleanup (Start's
// own) reverts the record and ends destroyed instead of keeping the
// resource uncertain forever (docs/contract.md#cleanup). Nothing is created
// on the Engine; the test reads it (admission, one volume inspect by name).
func TestUndispatchedCreateWithFailedRevertIsCleanedUp(t *testing.T) {
	b := newBackend(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu              sync.Mutex
		cancelled, fail bool
		last            sandboxapi.RecoveryRecord
	)
	storageKind := func(r sandboxapi.RecoveryRecord) sandboxapi.IdentityKind {
		for _, res := range r.Resources {
			if res.Role == sandboxapi.RoleStorage {
				return res.Identity.Kind
			}
		}
		return ""
	}
	errStore := errors.New("record store unavailable")
	persist := func(_ context.Context, r sandboxapi.RecoveryRecord) error {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case !cancelled && storageKind(r) == sandboxapi.IdentityCreating:
			cancelled = true
			cancel() // the caller gives up between the checkpoint and the create
		case cancelled && !fail:
			fail = true // the revert to planned
			return errStore
		}
		last = r
		return nil
	}
	res, err := b.Reserve(sandboxapi.Request{Policy: enginetest.Policy()}, sandboxapi.Persisted(persist))
	assert.NilError(t, err)
	_, err = res.Start(ctx)
	var cerr *sandboxapi.CleanupError
	assert.Check(t, !errors.As(err, &cerr), "Start's own cleanup failed: %v", err)
	assert.Check(t, errors.Is(err, sandboxapi.ErrCancelled), "%v", err)
	assert.Check(t, errors.Is(err, errStore), "%v", err)
	mu.Lock()
	assert.Check(t, fail, "the revert was never persisted")
	assert.Check(t, last.Phase == sandboxapi.PhaseDestroyed, "last persisted phase %s", last.Phase)
	assert.Check(t, storageKind(last) == sandboxapi.IdentityPlanned, "last persisted storage identity %s", storageKind(last))
	mu.Unlock()
	assert.NilError(t, res.Destroy(context.Background()))
	assertGone(t, res.RecoveryRecord())
	var uncertain *driver.UncertainError
	assert.Check(t, !errors.As(res.Destroy(context.Background()), &uncertain))
}
