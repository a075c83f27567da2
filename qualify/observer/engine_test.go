package observer_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"gotest.tools/v3/assert"
	"gotest.tools/v3/skip"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/internal/testengine"
	"github.com/qualbox/qualbox/qualify/guest"
	"github.com/qualbox/qualbox/qualify/observer"
	"github.com/qualbox/qualbox/sandboxapi"
)

// TestRealHostV1 starts a sandbox on the real Engine, resolves its keeper
// once through the Engine and then reads the v1 scope from the host's
// /proc and /sys/fs/cgroup only: the limits equal the policy, and after
// destroy the scope is gone.
func TestRealHostV1(t *testing.T) {
	endpoint := "unix://" + testengine.Require(t)
	cli, err := client.New(client.WithHost(endpoint))
	assert.NilError(t, err)
	// A cleanup, not a defer: the image and sandbox cleanups below run after
	// the test function returns and still use cli, so it closes after them
	// and leaves no idle connection behind.
	t.Cleanup(func() { assert.Check(t, cli.Close()) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err = cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	assert.NilError(t, err)
	_, err = os.Stat(guest.DefaultBusybox)
	skip.If(t, err != nil, "Debian's static busybox is not installed at %s", guest.DefaultBusybox)
	_, err = os.Stat("/sys/fs/cgroup/memory")
	skip.If(t, err != nil, "not a cgroup v1 host")

	img, err := guest.Build(ctx, cli, guest.BuildOptions{})
	assert.NilError(t, err)
	t.Cleanup(func() { assert.Check(t, guest.Remove(context.Background(), cli, img.ID)) })

	b, err := driver.New(driver.Config{
		Profile: "linux-x64-cgroupv1", Endpoint: endpoint, Namespace: "qualbox-observer-test",
		SpillDirectory: t.TempDir(), ImageID: img.ID, User: driver.User{UID: 65534, GID: 65534},
	})
	assert.NilError(t, err)
	defer b.Close()
	pol := sandboxapi.Policy{
		Resources:        sandboxapi.Resources{CPUs: 0.5, MemoryBytes: 64 << 20, PIDs: 32},
		TemporaryStorage: sandboxapi.TemporaryStorage{HomeBytes: 1 << 20, TempBytes: 1 << 20},
		Network:          sandboxapi.Network{Kind: sandboxapi.NetworkIsolated},
		Deadlines:        sandboxapi.Deadlines{StartupMs: 60000, CleanupMs: 30000},
		Transfers:        sandboxapi.TransferBuffers{ChunkBytes: 65536, MetadataBatchBytes: 1 << 20, MetadataMergeFanIn: 16},
		Streams:          sandboxapi.StreamLimits{MaxBufferedInputBytes: 65536, MaxBufferedOutputBytes: 1 << 20, HighWaterMarkBytes: 16384},
	}
	res, err := b.Reserve(sandboxapi.Request{Policy: pol}, sandboxapi.InProcess())
	assert.NilError(t, err)
	destroyed := false
	t.Cleanup(func() {
		if !destroyed {
			assert.Check(t, res.Stop(context.Background()))
			assert.Check(t, res.Destroy(context.Background()))
		}
	})
	_, err = res.Start(ctx)
	assert.NilError(t, err)
	var computeID string
	for _, r := range res.RecoveryRecord().Resources {
		if r.Role == sandboxapi.RoleCompute {
			computeID = r.Identity.ID
		}
	}
	pid, err := observer.KeeperPID(ctx, cli, computeID)
	assert.NilError(t, err)
	host := os.DirFS("/")
	scope, err := observer.Resolve(host, pid)
	assert.NilError(t, err)
	assert.Equal(t, scope.Version, 1)
	assert.Equal(t, scope.Dirs["memory"], "sys/fs/cgroup/memory/docker/"+computeID)
	snap := scope.Read(host, "during")
	assert.Equal(t, len(snap.Errors), 0, "%v", snap.Errors)
	assert.DeepEqual(t, snap.MemoryLimitBytes, i64(64<<20))
	assert.DeepEqual(t, snap.MemorySwapLimitBytes, i64(64<<20))
	assert.DeepEqual(t, snap.PidsMax, i64(32))
	assert.DeepEqual(t, snap.CPUQuotaMicros, i64(50000))
	assert.DeepEqual(t, snap.CPUPeriodMicros, i64(100000))
	assert.DeepEqual(t, snap.OOMKills, i64(0))
	assert.Assert(t, len(snap.Procs) >= 1 && snap.Procs[0] == pid, "%v", snap.Procs)
	st, err := observer.StartTime(host, pid)
	assert.NilError(t, err)
	assert.Equal(t, scope.StartTime, st)
	assert.Equal(t, scope.Absence(host).String(), "occupied (keeper alive)")
	for _, d := range scope.Dirs {
		procs, err := os.ReadFile("/" + d + "/tasks")
		assert.NilError(t, err)
		assert.Assert(t, strings.Contains("\n"+string(procs), fmt.Sprintf("\n%d\n", pid)), "%s/tasks: %s", d, procs)
	}

	assert.NilError(t, res.Stop(ctx))
	assert.NilError(t, res.Destroy(ctx))
	destroyed = true
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	a := scope.WaitAbsent(wctx, host, 50*time.Millisecond)
	assert.Assert(t, a.OK(), "%+v", a)
	assert.Equal(t, a.String(), "gone")
}
