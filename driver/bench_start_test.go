package driver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/driver/internal/enginetest"
	"github.com/qualbox/qualbox/sandboxapi"
	"github.com/qualbox/qualbox/testbed/containers"
)

// startVariant is one container create request whose start is timed.
type startVariant struct {
	name   string
	config *container.Config
	host   *container.HostConfig
	// volume: the request mounts a fresh volume at host.Mounts[0].
	volume bool
}

// computeStartRound rotates the variants' order from one sample to the
// next.
var computeStartRound atomic.Int64

// BenchmarkComputeStart breaks down the `POST /containers/{id}/start` of
// the compute container, the largest single step of a sandbox start: the
// container a driver start creates (read back with `GET
// /containers/{id}/json`), and variants of it without one group of its
// settings (or, for the namespaces, with the host's), each against the
// start reference's minimal container
// (image and keeper only, no network), measured back to back: reference,
// then variant. Only the start round trip is timed; create, removal and
// the volume are not. Every variant runs in / (the driver's work
// directory is made by the archive PUT before the start, timed in
// StartLatency, not here). No target: it shows which settings the start
// time goes to.
func BenchmarkComputeStart(b *testing.B) {
	be := benchBackend(b)
	cli := enginetest.Client(b)
	image := enginetest.Image(b)
	ctx := context.Background()
	variants := computeVariants(b, ctx, be, cli, image)
	ref := startVariant{name: "reference", config: &container.Config{Image: image, Entrypoint: containers.KeeperCommand[:1], Cmd: containers.KeeperCommand[1:]},
		host: &container.HostConfig{NetworkMode: "none"}}
	// One untimed round pays for the first start of each kind.
	for _, v := range append([]startVariant{ref}, variants...) {
		if _, err := timedStart(ctx, cli, v); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		k := int(computeStartRound.Add(1))
		for i := range variants {
			v := variants[(i+k)%len(variants)]
			r, err := timedStart(ctx, cli, ref)
			if err != nil {
				b.Fatal(err)
			}
			d, err := timedStart(ctx, cli, v)
			if err != nil {
				b.Fatal(err)
			}
			recordRatio(b, "compute start: "+v.name, nil, d.Seconds()/r.Seconds(), ms(d), ms(r), "ms")
		}
	}
}

// computeVariants starts one sandbox, reads its compute container's
// request back and destroys it, and returns that request and variants of
// it without one group of settings each.
func computeVariants(b *testing.B, ctx context.Context, be *driver.Backend, cli *client.Client, image string) []startVariant {
	b.Helper()
	res, err := be.Reserve(sandboxapi.Request{Policy: enginetest.Policy()}, sandboxapi.InProcess())
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := res.Destroy(context.WithoutCancel(ctx)); err != nil {
			b.Error(err)
		}
	}()
	sb, err := res.Start(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var computeID string
	for _, r := range sb.RecoveryRecord().Resources {
		if r.Role == sandboxapi.RoleCompute {
			computeID = r.Identity.ID
		}
	}
	in, err := cli.ContainerInspect(ctx, computeID, client.ContainerInspectOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if in.Container.Config == nil || in.Container.HostConfig == nil || len(in.Container.HostConfig.Mounts) != 1 {
		b.Fatalf("compute %s: unexpected readback (config %v, host config %v)", computeID, in.Container.Config != nil, in.Container.HostConfig != nil)
	}
	base := startVariant{name: "driver spec", config: in.Container.Config, host: in.Container.HostConfig, volume: true}
	base.config.Hostname, base.config.Labels, base.config.WorkingDir = "", nil, "/"
	base.config.Image = image
	vary := func(name string, change func(v *startVariant)) startVariant {
		v := cloneVariant(b, base)
		v.name = name
		change(&v)
		return v
	}
	return []startVariant{
		vary("driver spec", func(*startVariant) {}),
		vary("without tmpfs mounts", func(v *startVariant) { v.host.Tmpfs = nil }),
		vary("without workspace volume", func(v *startVariant) { v.host.Mounts, v.volume = nil, false }),
		vary("without cgroup limits", func(v *startVariant) {
			v.host.NanoCPUs, v.host.Memory, v.host.MemorySwap, v.host.PidsLimit = 0, 0, 0, nil
		}),
		// Explicitly "host": the daemon's defaults may be private too.
		vary("host cgroup and IPC namespaces", func(v *startVariant) { v.host.CgroupnsMode, v.host.IpcMode = "host", "host" }),
		vary("without read-only root, cap drop, no-new-privileges", func(v *startVariant) {
			v.host.ReadonlyRootfs, v.host.CapDrop, v.host.SecurityOpt = false, nil, nil
		}),
	}
}

// cloneVariant deep-copies v through JSON, so variants share nothing.
func cloneVariant(b *testing.B, v startVariant) startVariant {
	b.Helper()
	out := startVariant{name: v.name, volume: v.volume}
	for _, p := range []struct{ from, to any }{{v.config, &out.config}, {v.host, &out.host}} {
		data, err := json.Marshal(p.from)
		if err != nil {
			b.Fatal(err)
		}
		if err := json.Unmarshal(data, p.to); err != nil {
			b.Fatal(err)
		}
	}
	return out
}

// timedStart creates v (with a fresh volume when v.volume), times its
// start, and removes the container and the volume by ID.
func timedStart(ctx context.Context, cli *client.Client, v startVariant) (d time.Duration, err error) {
	host := *v.host
	if v.volume {
		vol, verr := cli.VolumeCreate(ctx, client.VolumeCreateOptions{})
		if verr != nil {
			return 0, verr
		}
		defer func() {
			if _, rerr := cli.VolumeRemove(context.WithoutCancel(ctx), vol.Volume.Name, client.VolumeRemoveOptions{}); rerr != nil && err == nil {
				err = fmt.Errorf("remove volume %s: %w", vol.Volume.Name, rerr)
			}
		}()
		host.Mounts = append(host.Mounts[:0:0], host.Mounts...)
		host.Mounts[0].Source = vol.Volume.Name
	}
	created, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{Config: v.config, HostConfig: &host})
	if err != nil {
		return 0, fmt.Errorf("%s: create: %w", v.name, err)
	}
	defer func() {
		if _, rerr := cli.ContainerRemove(context.WithoutCancel(ctx), created.ID, client.ContainerRemoveOptions{Force: true}); rerr != nil && err == nil {
			err = fmt.Errorf("remove container %s: %w", created.ID, rerr)
		}
	}()
	t0 := time.Now()
	if _, err := cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		return 0, fmt.Errorf("%s: start: %w", v.name, err)
	}
	return time.Since(t0), nil
}
