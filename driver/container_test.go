package driver

import (
	"errors"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/sandboxapi"
)

func testBackend(t *testing.T) *Backend {
	t.Helper()
	b, err := New(Config{
		Profile: "linux-x64-cgroupv1", Endpoint: "unix:///var/run/docker.sock", Namespace: "ns",
		SpillDirectory: "/tmp", ImageID: "sha256:" + strings.Repeat("a", 64), User: User{UID: 1000, GID: 1000},
	})
	assert.NilError(t, err)
	return b
}

func testPolicy() sandboxapi.Policy {
	return sandboxapi.Policy{
		Resources:        sandboxapi.Resources{CPUs: 0.5, MemoryBytes: 64 << 20, PIDs: 64},
		TemporaryStorage: sandboxapi.TemporaryStorage{HomeBytes: 8 << 20, TempBytes: 8 << 20},
		Network:          sandboxapi.Network{Kind: sandboxapi.NetworkIsolated},
	}
}

// readback turns a create request into the inspection an Engine that
// applied it exactly would return.
func readback(b *Backend, spec containerSpec, name string, running bool) container.InspectResponse {
	mounts := make([]container.MountPoint, 0, len(spec.host.Mounts))
	for _, m := range spec.host.Mounts {
		mp := container.MountPoint{Type: m.Type, Name: m.Source, Destination: m.Target, RW: !m.ReadOnly}
		if m.Type == mount.TypeImage {
			mp.Source, mp.Propagation = "/var/lib/docker/rootfs/overlayfs/"+strings.TrimPrefix(m.Source, "sha256:"), mount.PropagationRPrivate
		}
		mounts = append(mounts, mp)
	}
	host := *spec.host
	host.Mounts = nil
	for _, m := range spec.host.Mounts {
		if m.VolumeOptions != nil {
			vo := *m.VolumeOptions
			m.VolumeOptions = &vo
		}
		host.Mounts = append(host.Mounts, m)
	}
	cfg := *spec.config
	return container.InspectResponse{
		ID: strings.Repeat("c", 64), Name: "/" + name, Image: b.cfg.ImageID,
		Config: &cfg, HostConfig: &host, Mounts: mounts,
		State:           &container.State{Running: running, Status: map[bool]container.ContainerState{true: "running", false: "created"}[running]},
		AppArmorProfile: b.profile.AppArmor.WorkloadProfile,
		NetworkSettings: &container.NetworkSettings{Networks: map[string]*network.EndpointSettings{"none": {}}},
	}
}

func TestVerifyContainerReportsEveryDifference(t *testing.T) {
	b := testBackend(t)
	policy := testPolicy()
	record := newRecoveryRecord(&b.cfg, b.ns, b.profile.BackendRevision, policy)
	spec := b.workloadSpec(record, policy, sandboxapi.RoleCompute, "vol", "")
	good := readback(b, spec, "x", true)
	assert.NilError(t, b.verifyContainer(good, record, policy, sandboxapi.RoleCompute, "vol", "", true))

	bad := readback(b, b.workloadSpec(record, policy, sandboxapi.RoleCompute, "vol", ""), "x", true)
	bad.HostConfig.Memory = 128 << 20
	bad.HostConfig.CapAdd = []string{"NET_ADMIN"}
	bad.HostConfig.CgroupnsMode = "host"
	bad.Config.Env = append(bad.Config.Env, "EXTRA=1")
	bad.AppArmorProfile = "unconfined"
	err := b.verifyContainer(bad, record, policy, sandboxapi.RoleCompute, "vol", "", true)
	var rb *ReadbackError
	assert.Assert(t, errors.As(err, &rb), "got %v", err)
	for _, field := range []string{"HostConfig.Memory", "HostConfig.CapAdd", "HostConfig.CgroupnsMode", "Config.Env", "AppArmorProfile"} {
		found := false
		for _, line := range rb.Differences {
			found = found || strings.HasPrefix(line, field+":")
		}
		assert.Check(t, found, "%s missing from %v", field, rb.Differences)
	}
	var unsupported *sandboxapi.UnsupportedError
	assert.Check(t, errors.As(err, &unsupported))
}

// Both containers request the profile's OCI runtime by name, and a
// readback under any other runtime is a ReadbackError naming
// HostConfig.Runtime: another runtime, or none (an Engine that left it to
// its default). The inspections are synthetic Engine replies (readback):
// no real Engine answers a runtime other than the one requested. With the
// profile naming another runtime, the request and the comparison follow
// it, so runc is refused there.
func TestRuntimeReadbackFollowsTheProfile(t *testing.T) {
	b := testBackend(t)
	assert.Equal(t, b.profile.Runtime, "runc")
	policy := testPolicy()
	record := newRecoveryRecord(&b.cfg, b.ns, b.profile.BackendRevision, policy)
	for _, role := range []sandboxapi.Role{sandboxapi.RoleCompute, sandboxapi.RoleExport} {
		spec := b.workloadSpec(record, policy, role, "vol", "")
		assert.Check(t, is.Equal(spec.host.Runtime, "runc"), role)
		started := role == sandboxapi.RoleCompute
		assert.NilError(t, b.verifyContainer(readback(b, spec, "x", started), record, policy, role, "vol", "", started))
		for got, want := range map[string]string{"runsc": `HostConfig.Runtime: want "runc", got "runsc"`, "": `HostConfig.Runtime: want "runc", got ""`} {
			c := readback(b, spec, "x", started)
			c.HostConfig.Runtime = got
			err := b.verifyContainer(c, record, policy, role, "vol", "", started)
			var rb *ReadbackError
			assert.Assert(t, errors.As(err, &rb), "%s under %q: got %v", role, got, err)
			assert.Check(t, is.DeepEqual(rb.Differences, []string{want}))
			var unsupported *sandboxapi.UnsupportedError
			assert.Check(t, errors.As(err, &unsupported))
		}
	}

	b.profile.Runtime = "io.containerd.runc.v2"
	spec := b.workloadSpec(record, policy, sandboxapi.RoleCompute, "vol", "")
	assert.Check(t, is.Equal(spec.host.Runtime, "io.containerd.runc.v2"))
	c := readback(b, spec, "x", true)
	assert.NilError(t, b.verifyContainer(c, record, policy, sandboxapi.RoleCompute, "vol", "", true))
	c.HostConfig.Runtime = "runc"
	var rb *ReadbackError
	assert.Assert(t, errors.As(b.verifyContainer(c, record, policy, sandboxapi.RoleCompute, "vol", "", true), &rb))
	assert.Check(t, is.DeepEqual(rb.Differences, []string{`HostConfig.Runtime: want "io.containerd.runc.v2", got "runc"`}))
}

func TestExportAccessorMustNeverStart(t *testing.T) {
	b := testBackend(t)
	policy := testPolicy()
	record := newRecoveryRecord(&b.cfg, b.ns, b.profile.BackendRevision, policy)
	spec := b.workloadSpec(record, policy, sandboxapi.RoleExport, "vol", "")
	assert.Check(t, spec.config.NetworkDisabled)
	assert.Check(t, spec.host.Mounts[0].ReadOnly)
	assert.NilError(t, b.verifyContainer(readback(b, spec, "x", false), record, policy, sandboxapi.RoleExport, "vol", "", false))
	err := b.verifyContainer(readback(b, spec, "x", true), record, policy, sandboxapi.RoleExport, "vol", "", false)
	assert.ErrorContains(t, err, "never started")
}

func TestWorkloadShape(t *testing.T) {
	b := testBackend(t)
	policy := testPolicy()
	record := newRecoveryRecord(&b.cfg, b.ns, b.profile.BackendRevision, policy)
	spec := b.workloadSpec(record, policy, sandboxapi.RoleCompute, "vol", "")
	h := spec.host
	assert.Equal(t, h.NanoCPUs, int64(500_000_000))
	assert.Equal(t, h.Memory, h.MemorySwap)
	assert.Equal(t, *h.PidsLimit, int64(64))
	assert.DeepEqual(t, h.CapDrop, []string{"ALL"})
	assert.DeepEqual(t, h.SecurityOpt, []string{"no-new-privileges:true"})
	assert.Equal(t, string(h.CgroupnsMode), "private")
	assert.Equal(t, string(h.NetworkMode), "none")
	assert.Equal(t, h.Tmpfs["/tmp"], "rw,nosuid,nodev,noexec,size=8388608,mode=0700,uid=1000,gid=1000")
	assert.Check(t, h.ReadonlyRootfs && !h.Privileged)
	assert.DeepEqual(t, spec.config.Env, FixedEnvironment)
	assert.Equal(t, spec.config.User, "1000:1000")
}

// The effective policy is read from the Engine's readback, not copied from
// the request: a differing tmpfs size or network mode shows.
func TestEffectiveComesFromReadback(t *testing.T) {
	b := testBackend(t)
	policy := testPolicy()
	record := newRecoveryRecord(&b.cfg, b.ns, b.profile.BackendRevision, policy)
	c := readback(b, b.workloadSpec(record, policy, sandboxapi.RoleCompute, "vol", ""), "x", true)
	eff := effectiveFrom("daemon", c)
	assert.Equal(t, eff.TemporaryStorage, policy.TemporaryStorage)
	assert.Equal(t, eff.Network.Kind, sandboxapi.NetworkIsolated)
	assert.Equal(t, eff.Resources, policy.Resources)

	c.HostConfig.Tmpfs = map[string]string{HomePath: "rw,size=1024", TempPath: "rw"}
	c.HostConfig.NetworkMode = "abc123"
	eff = effectiveFrom("daemon", c)
	assert.Equal(t, eff.TemporaryStorage, sandboxapi.TemporaryStorage{HomeBytes: 1024, TempBytes: 0})
	assert.Equal(t, eff.Network.Kind, sandboxapi.NetworkOutbound)
}

// Mount readback is as strict as the request: a requested mount carries no
// option the driver did not set (no bind, tmpfs or extra volume options),
// and an effective image mount has an absolute source and no volume driver
// (docs/contract.md#policy).
func TestMountReadbackIsStrict(t *testing.T) {
	b := testBackend(t)
	b.cfg.Datasets = []Dataset{{Name: "corpus", ImageID: "sha256:" + strings.Repeat("b", 64)}}
	policy := testPolicy()
	record := newRecoveryRecord(&b.cfg, b.ns, b.profile.BackendRevision, policy)
	fresh := func() container.InspectResponse {
		return readback(b, b.workloadSpec(record, policy, sandboxapi.RoleCompute, "vol", ""), "x", true)
	}
	assert.NilError(t, b.verifyContainer(fresh(), record, policy, sandboxapi.RoleCompute, "vol", "", true))
	const ws, ds = "HostConfig.Mounts[/workspace]", "HostConfig.Mounts[/datasets/corpus]"
	for field, mutate := range map[string]func(c *container.InspectResponse){
		ws + ".BindOptions":  func(c *container.InspectResponse) { c.HostConfig.Mounts[0].BindOptions = &mount.BindOptions{} },
		ws + ".TmpfsOptions": func(c *container.InspectResponse) { c.HostConfig.Mounts[0].TmpfsOptions = &mount.TmpfsOptions{} },
		ws + ".ImageOptions": func(c *container.InspectResponse) { c.HostConfig.Mounts[0].ImageOptions = &mount.ImageOptions{} },
		ws + ".Consistency":  func(c *container.InspectResponse) { c.HostConfig.Mounts[0].Consistency = mount.ConsistencyCached },
		ws + ".VolumeOptions.Labels": func(c *container.InspectResponse) {
			c.HostConfig.Mounts[0].VolumeOptions.Labels = map[string]string{"a": "b"}
		},
		ws + ".VolumeOptions.Subpath": func(c *container.InspectResponse) { c.HostConfig.Mounts[0].VolumeOptions.Subpath = "x" },
		ws + ".VolumeOptions.DriverConfig": func(c *container.InspectResponse) {
			c.HostConfig.Mounts[0].VolumeOptions.DriverConfig = &mount.Driver{Name: "local"}
		},
		ds + ".VolumeOptions":             func(c *container.InspectResponse) { c.HostConfig.Mounts[1].VolumeOptions = &mount.VolumeOptions{} },
		ds + ".ClusterOptions":            func(c *container.InspectResponse) { c.HostConfig.Mounts[1].ClusterOptions = &mount.ClusterOptions{} },
		"Mounts[/datasets/corpus].Source": func(c *container.InspectResponse) { c.Mounts[1].Source = "" },
		"Mounts[/datasets/corpus].Driver": func(c *container.InspectResponse) { c.Mounts[1].Driver = "local" },
	} {
		c := fresh()
		mutate(&c)
		err := b.verifyContainer(c, record, policy, sandboxapi.RoleCompute, "vol", "", true)
		var rb *ReadbackError
		if !assert.Check(t, errors.As(err, &rb), "%s: got %v", field, err) {
			continue
		}
		found := false
		for _, line := range rb.Differences {
			found = found || strings.HasPrefix(line, field+":")
		}
		assert.Check(t, found, "%s missing from %v", field, rb.Differences)
	}
}

// Dataset mounts are read back requested and effective: compute gets one
// read-only image mount per dataset with its subpath, the accessor none,
// and each difference is named (docs/contract.md#datasets).
func TestVerifyDatasetMounts(t *testing.T) {
	b := testBackend(t)
	alias := "alias"
	ds := "sha256:" + strings.Repeat("d", 64)
	b.cfg.Datasets = []Dataset{{Name: "ref", ImageID: ds}, {Name: "aliased", ImageID: ds, Subpath: &alias}}
	policy := testPolicy()
	record := newRecoveryRecord(&b.cfg, b.ns, b.profile.BackendRevision, policy)
	spec := b.workloadSpec(record, policy, sandboxapi.RoleCompute, "vol", "")
	assert.Equal(t, len(spec.host.Mounts), 3)
	assert.DeepEqual(t, spec.host.Mounts[2].ImageOptions, &mount.ImageOptions{Subpath: "alias"})
	assert.Equal(t, len(b.workloadSpec(record, policy, sandboxapi.RoleExport, "vol", "").host.Mounts), 1, "the accessor mounts no dataset")
	assert.NilError(t, b.verifyContainer(readback(b, spec, "x", true), record, policy, sandboxapi.RoleCompute, "vol", "", true))

	for field, mutate := range map[string]func(c *container.InspectResponse){
		"Mounts[/datasets/ref].RW":                                  func(c *container.InspectResponse) { c.Mounts[1].RW = true },
		"Mounts[/datasets/ref].Name":                                func(c *container.InspectResponse) { c.Mounts[1].Name = "sha256:" + strings.Repeat("f", 64) },
		"Mounts[/datasets/ref].Propagation":                         func(c *container.InspectResponse) { c.Mounts[1].Propagation = mount.PropagationRShared },
		"Mounts[/datasets/ref].Source":                              func(c *container.InspectResponse) { c.Mounts[1].Source = "" },
		"Mounts[/datasets/ref].Driver":                              func(c *container.InspectResponse) { c.Mounts[1].Driver = "local" },
		"HostConfig.Mounts[/datasets/aliased].ImageOptions.Subpath": func(c *container.InspectResponse) { c.HostConfig.Mounts[2].ImageOptions = nil },
		"HostConfig.Mounts[/datasets/aliased].ReadOnly":             func(c *container.InspectResponse) { c.HostConfig.Mounts[2].ReadOnly = false },
		"Mounts:": func(c *container.InspectResponse) { c.Mounts = c.Mounts[:2] },
	} {
		c := readback(b, b.workloadSpec(record, policy, sandboxapi.RoleCompute, "vol", ""), "x", true)
		c.HostConfig.Mounts = append([]mount.Mount(nil), c.HostConfig.Mounts...)
		mutate(&c)
		err := b.verifyContainer(c, record, policy, sandboxapi.RoleCompute, "vol", "", true)
		var rb *ReadbackError
		assert.Assert(t, errors.As(err, &rb), "%s: got %v", field, err)
		found := false
		for _, line := range rb.Differences {
			found = found || strings.HasPrefix(line, field)
		}
		assert.Check(t, found, "%s missing from %v", field, rb.Differences)
	}
}
