package driver

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"

	"github.com/qualbox/qualbox/profiles"
	"github.com/qualbox/qualbox/sandboxapi"
)

// Guest paths of the workload (docs/contract.md#profiles-and-admission).
const (
	WorkspacePath = "/workspace"
	WorkPath      = "/workspace/work"
	HomePath      = "/home/sandbox"
	TempPath      = "/tmp"
)

// keeperEntrypoint and keeperCmd form the fixed keeper that replaces the
// image's entrypoint and command: PID 1 sleeps until stop removes it.
var (
	keeperEntrypoint = []string{"/bin/sh"}
	keeperCmd        = []string{"-c", "while :; do sleep 3600; done"}
)

// FixedEnvironment is the workload environment every image must match
// (docs/contract.md#profiles-and-admission), in Engine "NAME=value" form.
var FixedEnvironment = []string{
	"HOME=/home/sandbox",
	"TMPDIR=/tmp",
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
}

func fixedEnvironmentMap() map[string]string {
	m := make(map[string]string, len(FixedEnvironment))
	for _, kv := range FixedEnvironment {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// tmpfsOptions returns the two tmpfs mounts' options, owned by the workload.
func tmpfsOptions(policy sandboxapi.Policy, user User) map[string]string {
	opts := func(size int64) string {
		return fmt.Sprintf("rw,nosuid,nodev,noexec,size=%d,mode=0700,uid=%d,gid=%d", size, user.UID, user.GID)
	}
	return map[string]string{
		HomePath: opts(policy.TemporaryStorage.HomeBytes),
		TempPath: opts(policy.TemporaryStorage.TempBytes),
	}
}

// nanoCPUs converts policy CPUs to Docker NanoCpus; ok is false when the
// value is not representable exactly (docs/contract.md#profiles-and-admission).
func nanoCPUs(cpus float64) (int64, bool) {
	n := cpus * 1e9
	if n != math.Trunc(n) || n < 1 || n > float64(sandboxapi.MaxSafeInteger) || cpus > 1024 {
		return 0, false
	}
	return int64(n), true
}

// containerSpec is one container's create request.
type containerSpec struct {
	config *container.Config
	host   *container.HostConfig
}

// workloadSpec builds the compute or export container
// (docs/contract.md#profiles-and-admission). The export accessor is never
// started, has no network and mounts the workspace read-only.
func (b *Backend) workloadSpec(record sandboxapi.RecoveryRecord, policy sandboxapi.Policy, role sandboxapi.Role, storage, networkID string) containerSpec {
	nano, _ := nanoCPUs(policy.Resources.CPUs)
	pids := policy.Resources.PIDs
	return containerSpec{
		config: &container.Config{
			Image:           b.cfg.ImageID,
			User:            fmt.Sprintf("%d:%d", b.cfg.User.UID, b.cfg.User.GID),
			WorkingDir:      WorkPath,
			Entrypoint:      keeperEntrypoint,
			Cmd:             keeperCmd,
			Env:             FixedEnvironment,
			NetworkDisabled: role == sandboxapi.RoleExport,
			Healthcheck:     &container.HealthConfig{Test: []string{"NONE"}},
			Labels:          resourceLabels(record, role),
		},
		host: &container.HostConfig{
			ReadonlyRootfs: true,
			CapDrop:        []string{"ALL"},
			SecurityOpt:    []string{"no-new-privileges:true"},
			IpcMode:        "private",
			CgroupnsMode:   "private",
			// The profile's OCI runtime, by name: never the daemon's default,
			// which its configuration may change (docs/contract.md#profiles-and-admission).
			Runtime:       b.profile.Runtime,
			NetworkMode:   container.NetworkMode(expectedNetworkMode(policy, role, networkID)),
			RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled},
			Resources: container.Resources{
				NanoCPUs:   nano,
				Memory:     policy.Resources.MemoryBytes,
				MemorySwap: policy.Resources.MemoryBytes,
				PidsLimit:  &pids,
			},
			Tmpfs:  tmpfsOptions(policy, b.cfg.User),
			Mounts: containerMounts(b.cfg.Datasets, role, storage),
		},
	}
}

func expectedNetworkMode(policy sandboxapi.Policy, role sandboxapi.Role, networkID string) string {
	if role == sandboxapi.RoleExport || policy.Network.Kind == sandboxapi.NetworkIsolated {
		return "none"
	}
	return networkID
}

// containerMounts returns the workspace volume and, for compute, the
// read-only dataset image mounts (docs/contract.md#datasets).
func containerMounts(datasets []Dataset, role sandboxapi.Role, storage string) []mount.Mount {
	mounts := []mount.Mount{{
		Type:          mount.TypeVolume,
		Source:        storage,
		Target:        WorkspacePath,
		ReadOnly:      role == sandboxapi.RoleExport,
		VolumeOptions: &mount.VolumeOptions{NoCopy: true},
	}}
	if role != sandboxapi.RoleCompute {
		return mounts
	}
	for _, d := range datasets {
		m := mount.Mount{Type: mount.TypeImage, Source: d.ImageID, Target: "/datasets/" + d.Name, ReadOnly: true}
		if d.Subpath != nil {
			m.ImageOptions = &mount.ImageOptions{Subpath: *d.Subpath}
		}
		mounts = append(mounts, m)
	}
	return mounts
}

// ReadbackError reports that an Engine resource differs from what the driver
// requested (docs/contract.md#profiles-and-admission). Differences lists one
// line per field, "path: want X, got Y". The driver never silently fixes a
// mismatch.
type ReadbackError struct {
	Resource    string
	Differences []string
}

func (e *ReadbackError) Error() string {
	return fmt.Sprintf("driver: %s readback differs from the request:\n  %s", e.Resource, strings.Join(e.Differences, "\n  "))
}

// Unwrap classifies a readback mismatch as unsupported: the Engine did not
// apply the requested isolation.
func (e *ReadbackError) Unwrap() error {
	return &sandboxapi.UnsupportedError{Message: "Engine readback does not match the requested workload isolation"}
}

type differ struct{ lines []string }

func (d *differ) check(field string, want, got any) {
	if !reflect.DeepEqual(want, got) {
		d.lines = append(d.lines, fmt.Sprintf("%s: want %#v, got %#v", field, want, got))
	}
}

func (d *differ) checkEmpty(field string, got any) {
	v := reflect.ValueOf(got)
	if !v.IsValid() {
		return
	}
	switch v.Kind() {
	case reflect.Slice, reflect.Map:
		if v.Len() == 0 {
			return
		}
	case reflect.Pointer:
		if v.IsNil() {
			return
		}
	case reflect.String:
		if v.Len() == 0 {
			return
		}
	default:
		if v.IsZero() {
			return
		}
	}
	d.lines = append(d.lines, fmt.Sprintf("%s: want empty, got %#v", field, got))
}

func (d *differ) err(resource string) error {
	if len(d.lines) == 0 {
		return nil
	}
	return &ReadbackError{Resource: resource, Differences: d.lines}
}

// neverStarted is State.StartedAt of a container that never ran.
const neverStarted = "0001-01-01T00:00:00Z"

// verifyContainer compares an inspected container with its request field by
// field (docs/contract.md#profiles-and-admission). started adds the
// running-state, AppArmor and network attachment checks that only hold after
// start. The differences are collected in order: Config
// (verifyContainerConfig), HostConfig (verifyHostConfig), mounts
// (verifyMounts), then state (verifyContainerState).
func (b *Backend) verifyContainer(c container.InspectResponse, record sandboxapi.RecoveryRecord, policy sandboxapi.Policy, role sandboxapi.Role, storage, networkID string, started bool) error {
	want := b.workloadSpec(record, policy, role, storage, networkID)
	var d differ
	if c.Config == nil || c.HostConfig == nil {
		d.lines = append(d.lines, "Config/HostConfig: missing from inspection")
		return d.err(string(role) + " container " + c.ID)
	}
	d.check("Image", b.cfg.ImageID, c.Image)
	b.verifyContainerConfig(&d, c.Config, want, record, role)
	b.verifyHostConfig(&d, c.HostConfig, want)
	verifyMounts(&d, c, want.host.Mounts)
	b.verifyContainerState(&d, c, policy, role, networkID, started)
	return d.err(string(role) + " container " + c.ID)
}

// verifyContainerConfig compares the container's Config with want's.
func (b *Backend) verifyContainerConfig(d *differ, cfg *container.Config, want containerSpec, record sandboxapi.RecoveryRecord, role sandboxapi.Role) {
	d.check("Config.Image", b.cfg.ImageID, cfg.Image)
	d.check("Config.User", want.config.User, cfg.User)
	d.check("Config.WorkingDir", want.config.WorkingDir, cfg.WorkingDir)
	d.check("Config.Entrypoint", want.config.Entrypoint, []string(cfg.Entrypoint))
	d.check("Config.Cmd", want.config.Cmd, []string(cfg.Cmd))
	d.check("Config.Env", want.config.Env, cfg.Env)
	d.check("Config.Tty", false, cfg.Tty)
	d.check("Config.OpenStdin", false, cfg.OpenStdin)
	d.checkEmpty("Config.Volumes", cfg.Volumes)
	d.checkEmpty("Config.ExposedPorts", cfg.ExposedPorts)
	if cfg.Healthcheck == nil {
		d.check("Config.Healthcheck.Test", []string{"NONE"}, nil)
	} else {
		d.check("Config.Healthcheck.Test", []string{"NONE"}, cfg.Healthcheck.Test)
	}
	if bad := labelMismatch(cfg.Labels, record, role); len(bad) > 0 {
		d.lines = append(d.lines, fmt.Sprintf("Config.Labels: binding labels differ: %s", strings.Join(bad, ", ")))
	}
}

// verifyHostConfig compares the container's HostConfig, mounts aside,
// with want's and the isolation every sandbox container has.
func (b *Backend) verifyHostConfig(d *differ, host *container.HostConfig, want containerSpec) {
	d.check("HostConfig.ReadonlyRootfs", true, host.ReadonlyRootfs)
	d.check("HostConfig.Privileged", false, host.Privileged)
	d.check("HostConfig.CapDrop", []string{"ALL"}, []string(host.CapDrop))
	d.checkEmpty("HostConfig.CapAdd", []string(host.CapAdd))
	d.check("HostConfig.SecurityOpt", want.host.SecurityOpt, host.SecurityOpt)
	d.check("HostConfig.PublishAllPorts", false, host.PublishAllPorts)
	d.checkEmpty("HostConfig.PortBindings", host.PortBindings)
	d.checkEmpty("HostConfig.Devices", host.Devices)
	d.checkEmpty("HostConfig.DeviceRequests", host.DeviceRequests)
	d.checkEmpty("HostConfig.DeviceCgroupRules", host.DeviceCgroupRules)
	d.checkEmpty("HostConfig.Binds", host.Binds)
	d.checkEmpty("HostConfig.VolumesFrom", host.VolumesFrom)
	d.checkEmpty("HostConfig.Links", host.Links)
	d.checkEmpty("HostConfig.GroupAdd", host.GroupAdd)
	d.checkEmpty("HostConfig.Sysctls", host.Sysctls)
	d.checkEmpty("HostConfig.CgroupParent", host.CgroupParent)
	d.check("HostConfig.PidMode", container.PidMode(""), host.PidMode)
	d.check("HostConfig.IpcMode", container.IpcMode("private"), host.IpcMode)
	d.check("HostConfig.UTSMode", container.UTSMode(""), host.UTSMode)
	d.check("HostConfig.UsernsMode", container.UsernsMode(""), host.UsernsMode)
	if b.profile.Cgroup.Namespace.PerContainerReadback {
		d.check("HostConfig.CgroupnsMode", container.CgroupnsMode("private"), host.CgroupnsMode)
	}
	d.check("HostConfig.NetworkMode", want.host.NetworkMode, host.NetworkMode)
	d.check("HostConfig.NanoCpus", want.host.NanoCPUs, host.NanoCPUs)
	d.check("HostConfig.Memory", want.host.Memory, host.Memory)
	d.check("HostConfig.MemorySwap", want.host.MemorySwap, host.MemorySwap)
	if host.PidsLimit == nil {
		d.check("HostConfig.PidsLimit", *want.host.PidsLimit, nil)
	} else {
		d.check("HostConfig.PidsLimit", *want.host.PidsLimit, *host.PidsLimit)
	}
	if host.OomKillDisable != nil && *host.OomKillDisable {
		d.check("HostConfig.OomKillDisable", false, true)
	}
	d.check("HostConfig.CpuQuota", int64(0), host.CPUQuota)
	d.check("HostConfig.CpuPeriod", int64(0), host.CPUPeriod)
	d.check("HostConfig.RestartPolicy.Name", container.RestartPolicyDisabled, host.RestartPolicy.Name)
	d.check("HostConfig.RestartPolicy.MaximumRetryCount", 0, host.RestartPolicy.MaximumRetryCount)
	d.check("HostConfig.AutoRemove", false, host.AutoRemove)
	d.check("HostConfig.Tmpfs", want.host.Tmpfs, host.Tmpfs)
	d.check("HostConfig.Runtime", want.host.Runtime, host.Runtime)
}

// verifyContainerState checks the export accessor was never started and,
// once started, that the container runs under the profile's AppArmor
// profile attached to exactly its network (verifyNetworks).
func (b *Backend) verifyContainerState(d *differ, c container.InspectResponse, policy sandboxapi.Policy, role sandboxapi.Role, networkID string, started bool) {
	if role == sandboxapi.RoleExport {
		if c.State == nil || c.State.Running || c.State.Status != "created" || (c.State.StartedAt != "" && c.State.StartedAt != neverStarted) {
			d.lines = append(d.lines, fmt.Sprintf("State: export accessor must be created and never started, got %+v", c.State))
		}
	}
	if !started {
		return
	}
	if c.State == nil || !c.State.Running {
		d.lines = append(d.lines, "State.Running: want true")
	}
	d.check("AppArmorProfile", b.profile.AppArmor.WorkloadProfile, c.AppArmorProfile)
	if c.NetworkSettings == nil {
		d.lines = append(d.lines, "NetworkSettings: missing")
		return
	}
	verifyNetworks(d, c.NetworkSettings, expectedNetworkMode(policy, role, networkID), networkID)
}

// verifyNetworks checks a started container is attached to "none" (mode
// "none") or to exactly the private network networkID, and publishes no
// ports.
func verifyNetworks(d *differ, ns *container.NetworkSettings, mode, networkID string) {
	nets := make([]string, 0, len(ns.Networks))
	for name := range ns.Networks {
		nets = append(nets, name)
	}
	sort.Strings(nets)
	if mode == "none" {
		d.check("NetworkSettings.Networks", []string{"none"}, nets)
	} else if len(nets) != 1 || ns.Networks[nets[0]] == nil || ns.Networks[nets[0]].NetworkID != networkID {
		d.lines = append(d.lines, fmt.Sprintf("NetworkSettings.Networks: want exactly the private network %s, got %v", networkID, nets))
	}
	d.checkEmpty("NetworkSettings.Ports", ns.Ports)
}

// verifyMounts compares requested and effective mounts
// (docs/contract.md#profiles-and-admission).
func verifyMounts(d *differ, c container.InspectResponse, want []mount.Mount) {
	got := c.HostConfig.Mounts
	if len(got) != len(want) || len(c.Mounts) != len(want) {
		d.lines = append(d.lines, fmt.Sprintf("Mounts: want %d mounts, requested %d, effective %d", len(want), len(got), len(c.Mounts)))
		return
	}
	for _, w := range want {
		var req *mount.Mount
		for i := range got {
			if got[i].Target == w.Target {
				req = &got[i]
			}
		}
		if req == nil {
			d.lines = append(d.lines, "HostConfig.Mounts["+w.Target+"]: missing")
			continue
		}
		p := "HostConfig.Mounts[" + w.Target + "]"
		d.check(p+".Type", w.Type, req.Type)
		d.check(p+".Source", w.Source, req.Source)
		d.check(p+".ReadOnly", w.ReadOnly, req.ReadOnly)
		// The request sets only the fields above plus NoCopy (volume) or
		// Subpath (image); any other option is one the driver did not ask
		// for.
		d.checkEmpty(p+".Consistency", req.Consistency)
		d.checkEmpty(p+".BindOptions", req.BindOptions)
		d.checkEmpty(p+".TmpfsOptions", req.TmpfsOptions)
		d.checkEmpty(p+".ClusterOptions", req.ClusterOptions)
		if w.Type == mount.TypeVolume {
			d.check(p+".VolumeOptions.NoCopy", true, req.VolumeOptions != nil && req.VolumeOptions.NoCopy)
			if req.VolumeOptions != nil {
				d.checkEmpty(p+".VolumeOptions.Labels", req.VolumeOptions.Labels)
				d.checkEmpty(p+".VolumeOptions.Subpath", req.VolumeOptions.Subpath)
				d.checkEmpty(p+".VolumeOptions.DriverConfig", req.VolumeOptions.DriverConfig)
			}
			d.checkEmpty(p+".ImageOptions", req.ImageOptions)
		}
		if w.Type == mount.TypeImage {
			d.checkEmpty(p+".VolumeOptions", req.VolumeOptions)
			var sub string
			if req.ImageOptions != nil {
				sub = req.ImageOptions.Subpath
			}
			var wantSub string
			if w.ImageOptions != nil {
				wantSub = w.ImageOptions.Subpath
			}
			d.check(p+".ImageOptions.Subpath", wantSub, sub)
		}
		var eff *container.MountPoint
		for i := range c.Mounts {
			if c.Mounts[i].Destination == w.Target {
				eff = &c.Mounts[i]
			}
		}
		e := "Mounts[" + w.Target + "]"
		if eff == nil {
			d.lines = append(d.lines, e+": missing")
			continue
		}
		d.check(e+".Type", w.Type, eff.Type)
		d.check(e+".Name", w.Source, eff.Name)
		d.check(e+".RW", !w.ReadOnly, eff.RW)
		if w.Type == mount.TypeImage {
			d.check(e+".Propagation", mount.PropagationRPrivate, eff.Propagation)
			// The Engine mounts the image's own snapshot: a host path, never
			// a volume driver (docs/contract.md#datasets).
			if !strings.HasPrefix(eff.Source, "/") {
				d.lines = append(d.lines, fmt.Sprintf("%s.Source: want an absolute host path, got %q", e, eff.Source))
			}
			d.checkEmpty(e+".Driver", eff.Driver)
		}
	}
}

// checkPolicy rejects policies Docker cannot represent
// (docs/contract.md#profiles-and-admission): non-representable NanoCPUs,
// under 6 MiB memory.
func checkPolicy(policy sandboxapi.Policy, prof profiles.Profile) error {
	if _, ok := nanoCPUs(policy.Resources.CPUs); !ok {
		return &sandboxapi.UnsupportedError{Message: fmt.Sprintf("resources.cpus %v is not representable as Docker NanoCpus (1e-9 steps, at most 1024)", policy.Resources.CPUs)}
	}
	if policy.Resources.MemoryBytes < 6<<20 {
		return &sandboxapi.UnsupportedError{Message: fmt.Sprintf("resources.memoryBytes %d is below Docker's 6 MiB minimum", policy.Resources.MemoryBytes)}
	}
	if policy.WorkspaceDiskQuota.Kind == sandboxapi.QuotaRequired {
		return &sandboxapi.UnsupportedError{Message: "workspaceDiskQuota required: this backend cannot enforce a qualified hard workspace quota (profile " + prof.Name + ")"}
	}
	return nil
}
