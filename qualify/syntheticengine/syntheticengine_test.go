package syntheticengine

import (
	"context"
	"encoding/json"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

func start(t *testing.T, shape Shape) (*Server, *client.Client) {
	t.Helper()
	srv, err := Start(t.TempDir(), shape)
	assert.NilError(t, err)
	t.Cleanup(func() { assert.Check(t, srv.Close()) })
	cli, err := client.New(client.WithHost(srv.Endpoint()))
	assert.NilError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	return srv, cli
}

func TestReplaysDesktopThroughTheMobyClient(t *testing.T) {
	srv, cli := start(t, Desktop())
	ctx := context.Background()
	ver, err := cli.ServerVersion(ctx, client.ServerVersionOptions{})
	assert.NilError(t, err)
	assert.Equal(t, ver.Arch, "arm64")
	assert.Equal(t, ver.APIVersion, "1.52")
	info, err := cli.Info(ctx, client.InfoOptions{})
	assert.NilError(t, err)
	assert.Equal(t, info.Info.OperatingSystem, "Docker Desktop")
	assert.Equal(t, info.Info.CgroupDriver, "cgroupfs")
	assert.DeepEqual(t, info.Info.SecurityOptions, []string{"name=seccomp,profile=builtin", "name=cgroupns"})
	assert.Check(t, info.Info.MemoryLimit && info.Info.SwapLimit && info.Info.PidsLimit && info.Info.CPUCfsPeriod && info.Info.CPUCfsQuota)
	img, err := cli.ImageInspect(ctx, ImageAmd64)
	assert.NilError(t, err)
	assert.Equal(t, img.Architecture, "amd64")
	_, err = cli.ImageInspect(ctx, "sha256:"+"f"+ImageAmd64[8:71])
	assert.Check(t, cerrdefs.IsNotFound(err), "%v", err)

	_, err = cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: "x", Image: ImageArm64})
	assert.ErrorContains(t, err, "synthetic Engine replays admission only")
	reqs := srv.Requests()
	assert.Check(t, is.Contains(reqs[len(reqs)-1], "POST "), "%q", reqs)
	assert.Check(t, is.Contains(reqs[len(reqs)-1], "/containers/create"), "%q", reqs)
}

func TestVariantsChangeOnlyWhatTheySay(t *testing.T) {
	base := Desktop()
	seen := map[string]bool{}
	for _, v := range Variants() {
		assert.Check(t, !seen[v.Name], "duplicate variant %s", v.Name)
		seen[v.Name] = true
		s := v.Shape()
		assert.Equal(t, s.Name, v.Name)
		if v.Apply == nil {
			continue
		}
		// Each negative variant differs from the Desktop shape.
		assert.Check(t, !equalJSON(t, s.Info, base.Info) || !equalJSON(t, s.Version, base.Version) || len(s.Images) != len(base.Images), v.Name)
	}
	// Variants never change the shape they were cloned from.
	assert.Assert(t, equalJSON(t, Desktop(), base))
	for _, name := range []string{"rootless", "userns", "no-memory-limit", "no-swap-limit", "no-pids-limit", "no-cpu-cfs-period",
		"no-cpu-cfs-quota", "amd64-daemon", "systemd-cgroup-driver", "apparmor", "api-1.51", "min-api-1.53"} {
		assert.Check(t, seen[name], "missing variant %s", name)
	}
}

func TestShapeSwapAndRequestLog(t *testing.T) {
	srv, cli := start(t, Desktop())
	ctx := context.Background()
	srv.SetShape(Variants()[1].Shape())
	info, err := cli.Info(ctx, client.InfoOptions{})
	assert.NilError(t, err)
	assert.Check(t, is.Contains(info.Info.SecurityOptions, "name=rootless"))
	srv.ResetRequests()
	assert.Check(t, is.Len(srv.Requests(), 0))
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	assert.NilError(t, err)
	jb, err := json.Marshal(b)
	assert.NilError(t, err)
	return string(ja) == string(jb)
}
