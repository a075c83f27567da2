package main

import (
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/client"
	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/qualify/syntheticengine"
)

// laneImage is the guest image ID the hermetic manifests name.
var laneImage = "sha256:" + strings.Repeat("a", 64)

// laneAEngine serves, from the project's synthetic Engine, the replies of
// lane A's Engine (Debian 12's docker.io 20.10.24, API 1.41, cgroup v1
// with cgroupfs, default seccomp: docs/lanes.md#lane-a) holding the guest
// image laneImage, so that a hermetic run records Engine facts and an
// admission of profile linux-x64-cgroupv1 as a lane run would: a report
// without Engine facts satisfies no row (docs/qualification.md#gate). It
// returns the endpoint and a client of it.
func laneAEngine(t *testing.T) (endpoint string, cli *client.Client) {
	t.Helper()
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		// Profile linux-x64-cgroupv1 admits a linux/amd64 controller only.
		t.Skipf("a run of profile linux-x64-cgroupv1 needs a linux/amd64 controller, this is %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	// A short directory: a Unix socket path is at most 108 bytes.
	dir, err := os.MkdirTemp("", "qb-engine")
	assert.NilError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	shape := syntheticengine.Desktop().Clone()
	shape.Name, shape.Description = "lane-a", "lane A: Debian 12 docker.io 20.10.24, cgroup v1"
	v := &shape.Version
	v.Platform.Name, v.Version, v.APIVersion, v.MinAPIVersion, v.Arch, v.GitCommit = "", "20.10.24+dfsg1", "1.41", "1.12", "amd64", "5d6db84"
	v.KernelVersion = "6.1.0-28-amd64"
	for i := range v.Components {
		if v.Components[i].Name == "Engine" {
			v.Components[i].Version = v.Version
			v.Components[i].Details["ApiVersion"], v.Components[i].Details["MinAPIVersion"], v.Components[i].Details["Arch"] = "1.41", "1.12", "amd64"
			v.Components[i].Details["KernelVersion"] = v.KernelVersion
		}
	}
	in := &shape.Info
	in.ServerVersion, in.OperatingSystem, in.Architecture, in.KernelVersion = v.Version, "Debian GNU/Linux 12 (bookworm)", "x86_64", v.KernelVersion
	in.CgroupVersion, in.CgroupDriver, in.Driver, in.DriverStatus, in.Name = "1", "cgroupfs", "overlay2", nil, "lane-a"
	in.SecurityOptions = []string{"name=seccomp,profile=default"}
	shape.Images = map[string]image.InspectResponse{laneImage: {ID: laneImage, Os: "linux", Architecture: "amd64",
		RootFS: image.RootFS{Type: "layers", Layers: []string{"sha256:" + strings.Repeat("0", 64)}}}}
	srv, err := syntheticengine.Start(dir, shape)
	assert.NilError(t, err)
	t.Cleanup(func() { srv.Close() })
	cli, err = client.New(client.WithHost(srv.Endpoint()))
	assert.NilError(t, err)
	t.Cleanup(func() { cli.Close() })
	return srv.Endpoint(), cli
}
