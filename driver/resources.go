package driver

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/qualbox/qualbox/sandboxapi"
)

// Fields of a container inspection that a fingerprint covers
// (docs/contract.md#profiles-and-admission): identity and policy, not runtime
// state.
var (
	fingerprintConfigFields = []string{
		"Image", "User", "WorkingDir", "Entrypoint", "Cmd", "Env", "Labels", "Tty", "OpenStdin",
		"AttachStdin", "AttachStdout", "AttachStderr", "NetworkDisabled", "Healthcheck", "Volumes",
		"ExposedPorts", "StopSignal", "StopTimeout",
	}
	fingerprintHostFields = []string{
		"ReadonlyRootfs", "Privileged", "CapDrop", "CapAdd", "SecurityOpt", "PidMode", "IpcMode",
		"CgroupnsMode", "UsernsMode", "UTSMode", "CgroupParent", "NetworkMode", "PublishAllPorts",
		"PortBindings", "ExtraHosts", "Links", "Dns", "DnsOptions", "DnsSearch", "Devices",
		"DeviceRequests", "DeviceCgroupRules", "Binds", "Mounts", "Tmpfs", "VolumesFrom", "NanoCpus",
		"Memory", "MemorySwap", "MemoryReservation", "MemorySwappiness", "PidsLimit", "CpuShares",
		"CpuPeriod", "CpuQuota", "CpuRealtimePeriod", "CpuRealtimeRuntime", "CpusetCpus", "CpusetMems",
		"RestartPolicy", "AutoRemove", "Runtime", "Init", "StorageOpt", "Ulimits",
	}
	// Not CreatedAt: the local driver reports the ctime of the volume's
	// _data directory (RFC 3339, seconds), which moves whenever the volume
	// root changes (prepareWork, copy-up, the workload), so a recorded
	// fingerprint would stop matching the same volume.
	// HostConfig lists the Engine re-serialises across a daemon restart:
	// reported as null before it and as [] after it (measured on lane B's
	// Moby v2), with the same meaning, none. A fingerprint treats the
	// two as equal, so that a record saved before a restart still matches
	// the same container after it; any entry is still a difference.
	fingerprintEmptyListIsNull = []string{"Dns", "DnsOptions", "DnsSearch"}
	fingerprintVolumeFields    = []string{"Name", "Driver", "Mountpoint", "Labels", "Options", "Scope"}
	fingerprintNetworkFields   = []string{
		"Id", "Name", "Created", "Driver", "Scope", "Internal", "Attachable", "Ingress", "EnableIPv6",
		"ConfigOnly", "IPAM", "Options", "Labels",
	}
)

func selectFields(raw json.RawMessage, fields []string) (map[string]json.RawMessage, error) {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(raw, &all); err != nil {
		return nil, err
	}
	out := make(map[string]json.RawMessage, len(fields))
	for _, f := range fields {
		if v, ok := all[f]; ok {
			out[f] = v
		} else {
			out[f] = json.RawMessage("null")
		}
	}
	return out, nil
}

// containerFingerprint digests a container's identity and policy fields from
// the Engine's raw inspection, so an equal fingerprint means the same
// container with the same configuration.
func containerFingerprint(raw json.RawMessage, c container.InspectResponse) (string, error) {
	var top struct {
		Config     json.RawMessage
		HostConfig json.RawMessage
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		return "", err
	}
	cfg, err := selectFields(top.Config, fingerprintConfigFields)
	if err != nil {
		return "", err
	}
	host, err := selectFields(top.HostConfig, fingerprintHostFields)
	if err != nil {
		return "", err
	}
	for _, f := range fingerprintEmptyListIsNull {
		var list []json.RawMessage
		if json.Unmarshal(host[f], &list) == nil && list != nil && len(list) == 0 {
			host[f] = json.RawMessage("null")
		}
	}
	type mountFP struct {
		Type, Name, Source, Destination, Driver, Propagation string
		RW                                                   bool
	}
	mounts := make([]mountFP, 0, len(c.Mounts))
	for _, m := range c.Mounts {
		mounts = append(mounts, mountFP{string(m.Type), m.Name, m.Source, m.Destination, m.Driver, string(m.Propagation), m.RW})
	}
	slices.SortFunc(mounts, func(a, b mountFP) int { return strings.Compare(a.Destination, b.Destination) })
	oomDisabled := c.HostConfig != nil && c.HostConfig.OomKillDisable != nil && *c.HostConfig.OomKillDisable
	return digest(map[string]any{
		"Id": c.ID, "Name": c.Name, "Image": c.Image, "Config": cfg, "HostConfig": host,
		// Moby clears an unsupported false OOM switch to null on cgroup v2 start.
		"OomKillDisabled": oomDisabled, "Mounts": mounts,
	})
}

// engineIDPattern is the shape of a container, exec or network ID: 64
// lowercase hex digits. Anything else is not an identity a recovery record
// may hold (docs/contract.md#recovery).
var engineIDPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// checkEngineID returns a driver_failure *sandboxapi.OperationError unless
// id has the shape of an Engine ID; what names the object ("compute
// container", "exec").
func checkEngineID(what, id string) error {
	if engineIDPattern.MatchString(id) {
		return nil
	}
	return &sandboxapi.OperationError{Code: sandboxapi.CodeDriverFailure, Message: fmt.Sprintf("Engine reported %s ID %q, want 64 lowercase hex digits", what, id)}
}

// inspection is one inspected resource: its Engine ID, fingerprint and
// binding labels. container is set for compute and export.
type inspection struct {
	id          string
	name        string
	fingerprint string
	labels      map[string]string
	container   *container.InspectResponse
	// options are a network's driver options, which the driver never sets.
	options map[string]string
}

// inspectResource inspects the resource of role by reference (an exact ID,
// or the exact planned name while its identity is creating). It returns
// (nil, nil) when the Engine reports it absent.
func inspectResource(ctx context.Context, eng *engine, role sandboxapi.Role, ref string) (*inspection, error) {
	switch role {
	case sandboxapi.RoleCompute, sandboxapi.RoleExport:
		return inspectContainer(ctx, eng, role, ref)
	case sandboxapi.RoleStorage:
		return inspectVolume(ctx, eng, ref)
	case sandboxapi.RoleNetwork:
		return inspectNetwork(ctx, eng, ref)
	}
	return nil, fmt.Errorf("driver: unknown role %q", role)
}

// inspectContainer is inspectResource of a compute or export container:
// an Engine ID of 64 hex digits, its fingerprint and labels.
func inspectContainer(ctx context.Context, eng *engine, role sandboxapi.Role, ref string) (*inspection, error) {
	res, err := eng.cli.ContainerInspect(ctx, ref, client.ContainerInspectOptions{})
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, engineFailure(err, "inspect %s container %s", role, ref)
	}
	c := res.Container
	if err := checkEngineID(string(role)+" container", c.ID); err != nil {
		return nil, err
	}
	fp, err := containerFingerprint(res.Raw, c)
	if err != nil {
		return nil, engineFailure(err, "fingerprint %s container %s", role, ref)
	}
	var labels map[string]string
	if c.Config != nil {
		labels = c.Config.Labels
	}
	return &inspection{id: c.ID, name: strings.TrimPrefix(c.Name, "/"), fingerprint: fp, labels: labels, container: &c}, nil
}

// inspectVolume is inspectResource of the storage volume, which must be
// an owned local volume without options.
func inspectVolume(ctx context.Context, eng *engine, ref string) (*inspection, error) {
	res, err := eng.cli.VolumeInspect(ctx, ref, client.VolumeInspectOptions{})
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, engineFailure(err, "inspect volume %s", ref)
	}
	sel, err := selectFields(res.Raw, fingerprintVolumeFields)
	if err != nil {
		return nil, engineFailure(err, "fingerprint volume %s", ref)
	}
	fp, err := digest(sel)
	if err != nil {
		return nil, err
	}
	v := res.Volume
	if v.Driver != "local" || v.Scope != "local" || len(v.Options) != 0 {
		return nil, &sandboxapi.StateError{Message: fmt.Sprintf("volume %s is not an owned local volume (driver %q, scope %q, options %v)", ref, v.Driver, v.Scope, v.Options)}
	}
	return &inspection{id: v.Name, name: v.Name, fingerprint: fp, labels: v.Labels}, nil
}

// inspectNetwork is inspectResource of the outbound network, which must
// be an owned private local bridge (its options are judged apart, by
// checkRequested).
func inspectNetwork(ctx context.Context, eng *engine, ref string) (*inspection, error) {
	res, err := eng.cli.NetworkInspect(ctx, ref, client.NetworkInspectOptions{})
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, engineFailure(err, "inspect network %s", ref)
	}
	sel, err := selectFields(res.Raw, fingerprintNetworkFields)
	if err != nil {
		return nil, engineFailure(err, "fingerprint network %s", ref)
	}
	fp, err := digest(sel)
	if err != nil {
		return nil, err
	}
	n := res.Network
	if err := checkEngineID("network", n.ID); err != nil {
		return nil, err
	}
	if n.Driver != "bridge" || n.Scope != "local" || n.Internal || n.Attachable || n.Ingress || n.ConfigOnly || n.EnableIPv6 {
		return nil, &sandboxapi.StateError{Message: fmt.Sprintf("network %s is not an owned private bridge", ref)}
	}
	return &inspection{id: n.ID, name: n.Name, fingerprint: fp, labels: n.Labels, options: n.Options}, nil
}

// checkRequested is the create-time readback of what inspectResource does
// not judge: the driver creates the bridge without options, so any option
// is one the daemon merged in (default-network-opts such as a bridge name
// or gateway mode) and the network is not the one requested. Cleanup does
// not apply it: a network the driver owns by name, labels and ID is
// removed whatever the daemon merged into it.
func checkRequested(role sandboxapi.Role, in *inspection) error {
	if role == sandboxapi.RoleNetwork && len(in.options) != 0 {
		return &sandboxapi.StateError{Message: fmt.Sprintf("network %s carries options the driver did not request: %v", in.id, in.options)}
	}
	return nil
}

// checkOwned verifies that an inspected resource is the one the record
// owns: exact name, binding labels and, once identified, exact ID and
// fingerprint. A mismatch is a *sandboxapi.StateError and the resource is
// not touched.
func checkOwned(in *inspection, record sandboxapi.RecoveryRecord, res sandboxapi.RecoveryResource) error {
	if in.name != res.Name {
		return &sandboxapi.StateError{Message: fmt.Sprintf("%s resource %s is named %q, not %q", res.Role, in.id, in.name, res.Name)}
	}
	if bad := labelMismatch(in.labels, record, res.Role); len(bad) > 0 {
		return &sandboxapi.StateError{Message: fmt.Sprintf("%s resource %s does not carry this record's binding labels (%s differ)", res.Role, in.id, strings.Join(bad, ", "))}
	}
	if in.container != nil && (in.container.Image != record.ImageDigest || in.container.Config == nil || in.container.Config.Image != record.ImageDigest) {
		return &sandboxapi.StateError{Message: fmt.Sprintf("%s container %s does not run image %s", res.Role, in.id, record.ImageDigest)}
	}
	if res.Identity.Kind == sandboxapi.IdentityIdentified && (res.Identity.ID != in.id || res.Identity.Fingerprint != in.fingerprint) {
		return &sandboxapi.StateError{Message: fmt.Sprintf("%s resource %s no longer matches its recorded ID and fingerprint", res.Role, res.Name)}
	}
	return nil
}

// removeByID removes exactly one resource by its Engine ID (volumes: their
// name, which is their ID). A 404 counts as gone; a 409 (removal already in
// progress) counts as gone only once inspection confirms absence.
func removeByID(ctx context.Context, eng *engine, role sandboxapi.Role, id string) error {
	var err error
	switch role {
	case sandboxapi.RoleCompute, sandboxapi.RoleExport:
		_, err = eng.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true})
	case sandboxapi.RoleStorage:
		_, err = eng.cli.VolumeRemove(ctx, id, client.VolumeRemoveOptions{})
	case sandboxapi.RoleNetwork:
		_, err = eng.cli.NetworkRemove(ctx, id, client.NetworkRemoveOptions{})
	}
	if err == nil || isNotFound(err) {
		return nil
	}
	if !isConflict(err) || role == sandboxapi.RoleStorage || role == sandboxapi.RoleNetwork {
		return engineFailure(err, "remove %s %s", role, id)
	}
	// 409: another removal is in progress; wait for the Engine to finish it.
	for delay := 20 * time.Millisecond; ; delay = min(delay*2, 500*time.Millisecond) {
		in, ierr := inspectResource(ctx, eng, role, id)
		if ierr != nil {
			return ierr
		}
		if in == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return engineFailure(ctx.Err(), "confirm removal of %s %s after %v", role, id, err)
		case <-time.After(delay):
		}
	}
}
