package driver

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/driver/internal/enginetest"
	"github.com/qualbox/qualbox/sandboxapi"
)

// On a real Engine (lane A's) the compute container and the export
// accessor read back exactly the OCI runtime the profile names (runc),
// and with the profile naming another runtime the Engine lists (lane A's
// io.containerd.runc.v2), that one: the driver requests the profile's
// runtime, not the daemon's default.
func TestContainersRunUnderTheProfilesRuntime(t *testing.T) {
	cli := enginetest.Client(t)
	ctx := context.Background()
	info, err := cli.Info(ctx, client.InfoOptions{})
	assert.NilError(t, err)
	prof := mustProfile(t, enginetest.Profile())
	runtimes := []string{prof.Runtime}
	const other = "io.containerd.runc.v2"
	if _, listed := info.Info.Runtimes[other]; listed && prof.Runtime != other {
		runtimes = append(runtimes, other)
	}
	assert.Assert(t, slices.Contains(runtimes, "runc"), "profile %s names %q", prof.Name, prof.Runtime)
	if len(runtimes) == 1 {
		t.Logf("the Engine lists no io.containerd.runc.v2 runtime (%v): only the profile's own is tried", info.Info.Runtimes)
	}
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) {
			b, err := New(Config{
				Profile: enginetest.Profile(), Endpoint: "unix://" + enginetest.Socket(), Namespace: "qualbox-test",
				SpillDirectory: t.TempDir(), ImageID: enginetest.Image(t), User: User{UID: 65534, GID: 65534},
			})
			assert.NilError(t, err)
			t.Cleanup(func() { b.Close() })
			b.profile.Runtime = rt
			res, err := b.Reserve(sandboxapi.Request{Policy: enginetest.Policy()}, sandboxapi.InProcess())
			assert.NilError(t, err)
			t.Cleanup(func() {
				dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				assert.Check(t, res.Destroy(dctx))
			})
			sb, err := res.Start(ctx)
			assert.NilError(t, err)
			containers := 0
			for _, r := range sb.RecoveryRecord().Resources {
				if r.Role != sandboxapi.RoleCompute && r.Role != sandboxapi.RoleExport {
					continue
				}
				containers++
				in, err := cli.ContainerInspect(ctx, r.Identity.ID, client.ContainerInspectOptions{})
				assert.NilError(t, err)
				assert.Check(t, is.Equal(in.Container.HostConfig.Runtime, rt), "%s container", r.Role)
			}
			assert.Check(t, is.Equal(containers, 2))
		})
	}
}
