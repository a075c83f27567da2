package driver_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"sync"
	"testing"

	"github.com/moby/moby/client"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/driver/internal/enginetest"
	"github.com/qualbox/qualbox/sandboxapi"
)

// store is an in-memory durable store: it keeps every persisted record.
type store struct {
	mu      sync.Mutex
	records []sandboxapi.RecoveryRecord
}

func (s *store) persist(_ context.Context, r sandboxapi.RecoveryRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records = append(s.records, r.Clone())
	return nil
}

func (s *store) latest() sandboxapi.RecoveryRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.records[len(s.records)-1].Clone()
}

func TestCheckpointsPrecedeEffects(t *testing.T) {
	var st store
	sb := startedWith(t, newBackend(t), enginetest.Policy(), sandboxapi.Persisted(st.persist))
	assert.NilError(t, sb.Destroy(context.Background()))
	// Every resource passes planned -> creating -> identified, and creating
	// is persisted before identified (the create is dispatched in between).
	for _, role := range []sandboxapi.Role{sandboxapi.RoleStorage, sandboxapi.RoleCompute, sandboxapi.RoleExport} {
		var kinds []sandboxapi.IdentityKind
		for _, r := range st.records {
			for _, res := range r.Resources {
				if res.Role == role && (len(kinds) == 0 || kinds[len(kinds)-1] != res.Identity.Kind) {
					kinds = append(kinds, res.Identity.Kind)
				}
			}
		}
		assert.Check(t, is.DeepEqual(kinds, []sandboxapi.IdentityKind{sandboxapi.IdentityPlanned, sandboxapi.IdentityCreating, sandboxapi.IdentityIdentified}), "%s", role)
	}
	var phases []sandboxapi.Phase
	for _, r := range st.records {
		if len(phases) == 0 || phases[len(phases)-1] != r.Phase {
			phases = append(phases, r.Phase)
		}
	}
	assert.Check(t, is.DeepEqual(phases, []sandboxapi.Phase{
		sandboxapi.PhaseStarting, sandboxapi.PhaseRunning, sandboxapi.PhaseStopping,
		sandboxapi.PhaseStopped, sandboxapi.PhaseDestroying, sandboxapi.PhaseDestroyed,
	}))
}

func TestReconcileFromAFreshBackend(t *testing.T) {
	var st store
	startedWith(t, newBackend(t), enginetest.Policy(), sandboxapi.Persisted(st.persist))
	running := st.latest()

	// A fresh controller: a new Backend with the same configuration.
	fresh := newBackend(t, func(c *driver.Config) {})
	rec, err := fresh.Reconcile(context.Background(), running)
	assert.NilError(t, err)
	assert.Equal(t, rec.Kind, sandboxapi.ReconciliationMatched, rec.Reason)
	_, isSandbox := rec.Owner.(sandboxapi.Sandbox)
	assert.Check(t, !isSandbox, "reconciliation never adopts a runnable sandbox")
	assert.NilError(t, rec.Owner.Destroy(context.Background()))
	assertGone(t, running)

	again, err := fresh.Reconcile(context.Background(), running)
	assert.NilError(t, err)
	assert.Equal(t, again.Kind, sandboxapi.ReconciliationAbsent)
}

func TestReconcileAdvancesCreatingByExactName(t *testing.T) {
	b := newBackend(t)
	res, err := b.Reserve(sandboxapi.Request{Policy: enginetest.Policy()}, sandboxapi.InProcess())
	assert.NilError(t, err)
	t.Cleanup(func() { destroyAndCheck(t, res) })
	_, err = res.Start(context.Background())
	assert.NilError(t, err)
	rec := res.RecoveryRecord()
	var exportID string
	for i, r := range rec.Resources {
		if r.Role == sandboxapi.RoleExport {
			exportID = r.Identity.ID
			rec.Resources[i].Identity = sandboxapi.ResourceIdentity{Kind: sandboxapi.IdentityCreating}
		}
	}
	out, err := b.Reconcile(context.Background(), rec)
	assert.NilError(t, err)
	assert.Equal(t, out.Kind, sandboxapi.ReconciliationMatched, out.Reason)
	for _, r := range out.Owner.RecoveryRecord().Resources {
		if r.Role == sandboxapi.RoleExport {
			assert.Check(t, is.Equal(r.Identity.Kind, sandboxapi.IdentityIdentified))
			assert.Check(t, is.Equal(r.Identity.ID, exportID))
		}
	}
}

func TestReconcileConflicts(t *testing.T) {
	b := newBackend(t)
	adm, err := b.Admit(context.Background())
	assert.NilError(t, err)
	res, err := b.Reserve(sandboxapi.Request{Policy: enginetest.Policy()}, sandboxapi.InProcess())
	assert.NilError(t, err)
	reserved := res.RecoveryRecord()

	t.Run("other namespace, before Engine access", func(t *testing.T) {
		other, err := driver.New(driver.Config{
			Profile: "linux-x64-cgroupv1", Endpoint: "unix:///nonexistent/engine.sock", Namespace: "someone-else",
			SpillDirectory: t.TempDir(), ImageID: enginetest.Image(t), User: driver.User{UID: 65534, GID: 65534},
		})
		assert.NilError(t, err)
		out, err := other.Reconcile(context.Background(), reserved)
		assert.NilError(t, err)
		assert.Check(t, is.Equal(out.Kind, sandboxapi.ReconciliationConflict))
		assert.Check(t, is.Contains(out.Reason, "namespace"))
	})
	t.Run("other profile revision", func(t *testing.T) {
		other := newBackend(t, func(c *driver.Config) { c.Profile = "linux-x64" })
		out, err := other.Reconcile(context.Background(), reserved)
		assert.NilError(t, err)
		assert.Check(t, is.Equal(out.Kind, sandboxapi.ReconciliationConflict))
		assert.Check(t, is.Contains(out.Reason, "revision"))
	})
	t.Run("other daemon", func(t *testing.T) {
		rec := reserved.Clone()
		rec.Phase = sandboxapi.PhaseStarting
		rec.Authority = sandboxapi.Authority{Kind: sandboxapi.AuthorityVerified, BackendIdentity: "AAAA:BBBB"}
		out, err := b.Reconcile(context.Background(), rec)
		assert.NilError(t, err)
		assert.Check(t, is.Equal(out.Kind, sandboxapi.ReconciliationConflict))
		assert.Check(t, is.Contains(out.Reason, "daemon"))
	})
	t.Run("planned name held by a foreign resource", func(t *testing.T) {
		cli := enginetest.Client(t)
		var storageName string
		for _, r := range reserved.Resources {
			if r.Role == sandboxapi.RoleStorage {
				storageName = r.Name
			}
		}
		created, err := cli.VolumeCreate(context.Background(), client.VolumeCreateOptions{Name: storageName})
		assert.NilError(t, err)
		t.Cleanup(func() {
			_, err := cli.VolumeRemove(context.Background(), created.Volume.Name, client.VolumeRemoveOptions{})
			assert.Check(t, err)
		})
		out, err := b.Reconcile(context.Background(), reserved)
		assert.NilError(t, err)
		assert.Check(t, is.Equal(out.Kind, sandboxapi.ReconciliationConflict))
		assert.Check(t, is.Contains(out.Reason, "already present"))
	})
	t.Run("creating and absent is uncertain", func(t *testing.T) {
		rec := reserved.Clone()
		rec.Phase = sandboxapi.PhaseStarting
		rec.Authority = sandboxapi.Authority{Kind: sandboxapi.AuthorityVerified, BackendIdentity: adm.Engine.DaemonID}
		for i := range rec.Resources {
			if rec.Resources[i].Role == sandboxapi.RoleCompute {
				rec.Resources[i].Identity = sandboxapi.ResourceIdentity{Kind: sandboxapi.IdentityCreating}
			}
		}
		out, err := b.Reconcile(context.Background(), rec)
		assert.NilError(t, err)
		assert.Assert(t, is.Equal(out.Kind, sandboxapi.ReconciliationUncertain))
		err = out.Owner.Destroy(context.Background())
		var uncertain *driver.UncertainError
		assert.Check(t, errors.As(err, &uncertain), "got %v", err)
	})
	t.Run("invalid record", func(t *testing.T) {
		rec := reserved.Clone()
		rec.Resources = append(rec.Resources, rec.Resources[0])
		_, err := b.Reconcile(context.Background(), rec)
		var invalid *sandboxapi.ValidationError
		assert.Check(t, errors.As(err, &invalid), "got %v", err)
	})
}

// A daemon restart (an upgrade, a host reboot) is the fault a sandbox host
// sees most: records saved before it still match their resources after
// it, so a fresh controller's Reconcile finds them matched and destroys
// them, with nothing left on the Engine. It needs an Engine the test may
// restart: $QUALBOX_ENGINE_RESTART is the command that restarts it
// (lane B's `make test-lane-b` sets it to its own daemon's restart; lane A
// restarts no daemon it did not start and leaves it unset).
func TestReconcileAfterEngineRestart(t *testing.T) {
	restart := os.Getenv("QUALBOX_ENGINE_RESTART")
	if restart == "" {
		t.Skip("QUALBOX_ENGINE_RESTART is unset: no Engine this test may restart (make test-lane-b sets it)")
	}
	var idle, busy store
	startedWith(t, newBackend(t), enginetest.Policy(), sandboxapi.Persisted(idle.persist))
	sb := startedWith(t, newBackend(t), enginetest.Policy(), sandboxapi.Persisted(busy.persist))
	// One sandbox idle, one with its process running when the daemon
	// goes down (live-restore off: the restart stops both).
	pr, err := sb.ReserveProcess(sandboxapi.ProcessSpec{Executable: "/bin/sleep", Args: []string{"600"}, Cwd: sb.Workspace()})
	assert.NilError(t, err)
	_, err = pr.Start(context.Background())
	assert.NilError(t, err)
	records := []sandboxapi.RecoveryRecord{idle.latest(), busy.latest()}

	out, err := exec.Command("/bin/sh", "-c", restart).CombinedOutput()
	assert.NilError(t, err, "%s: %s", restart, out)

	fresh := newBackend(t)
	for _, r := range records {
		rec, err := fresh.Reconcile(context.Background(), r)
		assert.NilError(t, err)
		assert.Equal(t, rec.Kind, sandboxapi.ReconciliationMatched, rec.Reason)
		assert.NilError(t, rec.Owner.Destroy(context.Background()))
		assertGone(t, r)
	}
}
