package scenario

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/profiles"
	"github.com/qualbox/qualbox/qualify/guest/facts"
	"github.com/qualbox/qualbox/sandboxapi"
)

// ProbePath is where the guest image installs the probe.
const ProbePath = "/usr/local/bin/qualbox-probe"

// KeeperCmdline is the compute container's PID 1 as /proc/1/cmdline shows
// it: the driver's fixed keeper.
var KeeperCmdline = []string{"/bin/sh", "-c", "while :; do sleep 3600; done"}

// Isolation starts a sandbox, runs the guest probe's facts action as its
// process and compares what the kernel reports with the requested policy,
// field by field: identity, capabilities, no_new_privs, seccomp, mounts,
// network interfaces, cgroup limits and the keeper PID 1; and that the
// workload cannot create a user namespace. The seccomp filters in force
// and the host's user namespace sysctls, as the sandbox reads them, are
// recorded as facts (observed["posture: ..."]), not judged.
type Isolation struct{}

// IsolationParams are the isolation scenario's manifest params.
type IsolationParams struct {
	// Probe is the probe's guest path; default ProbePath.
	Probe string `json:"probe,omitempty"`
}

// Name returns "isolation".
func (Isolation) Name() string { return "isolation" }

func (Isolation) params(raw map[string]any) (IsolationParams, error) {
	var p IsolationParams
	if err := DecodeParams(raw, &p); err != nil {
		return p, err
	}
	if p.Probe == "" {
		p.Probe = ProbePath
	}
	if !sandboxapi.ValidGuestPath(p.Probe) {
		return p, fmt.Errorf("params.probe: %q is not an absolute canonical guest path", p.Probe)
	}
	return p, nil
}

// Validate checks params: probe (guest path).
func (s Isolation) Validate(params map[string]any) error {
	_, err := s.params(params)
	return err
}

// Run executes the probe and compares its facts with the policy.
func (s Isolation) Run(ctx context.Context, env *Env, params map[string]any, rec *Record) error {
	p, err := s.params(params)
	if err != nil {
		return err
	}
	spec := sandboxapi.ProcessSpec{Executable: p.Probe, Args: []string{"facts"}, Env: map[string]string{}, Cwd: driver.WorkPath}
	res, err := execOnce(ctx, env, rec, spec, nil)
	rec.Observe("stdout", string(res.Stdout))
	rec.Observe("stderr", string(res.Stderr))
	if err != nil {
		return err
	}
	rec.Observe("exit", res.Exit)
	if res.Exit != sandboxapi.Exited(0) {
		return fmt.Errorf("probe exited %s: %s", res.Exit, bytes.TrimSpace(res.Stderr))
	}
	f, err := facts.Decode(res.Stdout)
	if err != nil {
		return err
	}
	rec.Observe("facts", f)
	observePosture(rec, f)
	prof, err := profiles.Load(env.Profile)
	if err != nil {
		return err
	}
	compareFacts(rec, f, env.Policy, env.User, prof, res.Effective)
	return nil
}

// compareFacts records one check per isolation property, in order: the
// probe and identity (compareIdentity), mounts (compareMounts), network
// interfaces, cgroup limits (compareCgroup), confinement
// (compareConfinement), then the Engine's readback of the policy.
func compareFacts(rec *Record, f facts.Facts, pol sandboxapi.Policy, user driver.User, prof profiles.Profile, eff sandboxapi.EffectivePolicy) {
	compareIdentity(rec, f, user, prof)
	compareMounts(rec, f, pol, user)
	var names []string
	for _, i := range f.Interfaces {
		names = append(names, i.Name)
	}
	if pol.Network.Kind == sandboxapi.NetworkIsolated {
		rec.Equal("interfaces (isolated)", []string{"lo"}, names)
	} else {
		rec.Check("interfaces (outbound)", "lo and one more", names, len(names) == 2)
	}
	compareCgroup(rec, f.Cgroup, pol, prof)
	compareConfinement(rec, f, prof)
	rec.Equal("effective resources (Engine readback)", pol.Resources, eff.Resources)
	rec.Equal("effective temporaryStorage", pol.TemporaryStorage, eff.TemporaryStorage)
	rec.Equal("effective network", pol.Network, eff.Network)
	rec.Check("effective nonRoot, readOnlyRoot", "true true", fmt.Sprint(eff.NonRoot, eff.ReadOnlyRoot), eff.NonRoot && eff.ReadOnlyRoot)
}

// compareIdentity checks the facts' schema and errors, the architecture,
// the workload's ids, capabilities, no_new_privs and seccomp mode.
func compareIdentity(rec *Record, f facts.Facts, user driver.User, prof profiles.Profile) {
	rec.Equal("facts schema", facts.Schema, f.Schema)
	rec.Check("probe errors", "none", f.Errors, len(f.Errors) == 0)
	// The workload runs as the profile's image architecture (natively, or
	// through the Engine host's emulator for an emulated profile).
	rec.Equal("uname machine", profiles.UnameMachine(prof.Image.Architecture), f.Machine)

	uid, gid := int(user.UID), int(user.GID)
	rec.Equal("uid", uid, f.Identity.UID)
	rec.Equal("euid", uid, f.Identity.EUID)
	rec.Equal("gid", gid, f.Identity.GID)
	rec.Equal("egid", gid, f.Identity.EGID)

	const none = "0000000000000000"
	rec.Equal("CapEff", none, f.Status.CapEff)
	rec.Equal("CapPrm", none, f.Status.CapPrm)
	rec.Equal("CapBnd", none, f.Status.CapBnd)
	rec.Equal("CapInh", none, f.Status.CapInh)
	rec.Equal("CapAmb", none, f.Status.CapAmb)
	rec.Equal("NoNewPrivs", 1, f.Status.NoNewPrivs)
	rec.Equal("Seccomp mode (2 = filter)", 2, f.Status.Seccomp)
}

// compareMounts checks the read-only root, the two tmpfs mounts (size,
// mode, owner, options) and the writable workspace.
func compareMounts(rec *Record, f facts.Facts, pol sandboxapi.Policy, user driver.User) {
	uid, gid := int(user.UID), int(user.GID)
	mounts := map[string]facts.Mount{}
	for _, m := range f.Mounts {
		mounts[m.Path] = m
	}
	root := mounts["/"]
	rec.Check("/ read-only", "ro", root.MountOptions, root.Found && root.ReadOnly)
	rec.Check("/ write fails with EROFS", "EROFS", f.RootWrite, !f.RootWrite.OK && f.RootWrite.Errno == "EROFS")
	for _, t := range []struct {
		path  string
		bytes int64
	}{{driver.TempPath, pol.TemporaryStorage.TempBytes}, {driver.HomePath, pol.TemporaryStorage.HomeBytes}} {
		m := mounts[t.path]
		rec.Check(t.path+" mount point", t.path, m.MountPoint, m.Found && m.MountPoint == t.path)
		rec.Equal(t.path+" fstype", "tmpfs", m.FSType)
		rec.Check(t.path+" writable", "rw", m.MountOptions, m.Found && !m.ReadOnly)
		rec.Check(t.path+" nosuid,nodev,noexec", "nosuid nodev noexec", m.MountOptions, m.NoSuid && m.NoDev && m.NoExec)
		rec.Equal(t.path+" size", tmpfsSize(t.bytes), m.Size)
		rec.Equal(t.path+" mode", "700", m.Mode)
		rec.Equal(t.path+" uid", strconv.Itoa(uid), m.UID)
		rec.Equal(t.path+" gid", strconv.Itoa(gid), m.GID)
	}
	ws := mounts[driver.WorkspacePath]
	rec.Check("/workspace mount point", driver.WorkspacePath, ws.MountPoint, ws.Found && ws.MountPoint == driver.WorkspacePath)
	rec.Check("/workspace writable", "rw", ws.MountOptions, ws.Found && !ws.ReadOnly)
}

// compareCgroup checks the cgroup version and the memory, swap, pids and
// CPU limits the workload's cgroup holds.
func compareCgroup(rec *Record, cg facts.Cgroup, pol sandboxapi.Policy, prof profiles.Profile) {
	rec.Equal("cgroup version", prof.Cgroup.Version, cg.Version)
	rec.Equal("memory limit bytes", pageFloor(pol.Resources.MemoryBytes), cg.MemoryLimitBytes)
	if cg.Version == 1 {
		rec.Equal("memory+swap limit bytes (v1 memsw)", pageFloor(pol.Resources.MemoryBytes), cg.MemoryAndSwapLimitBytes)
	} else {
		rec.Equal("swap max bytes (v2)", int64(0), cg.SwapLimitBytes)
	}
	rec.Equal("pids.max", pol.Resources.PIDs, cg.PidsMax)
	quota, period := cg.CPUQuotaMicros, cg.CPUPeriodMicros
	gotCPUs := "unlimited"
	if quota != nil && period != nil && *period > 0 {
		gotCPUs = fmt.Sprintf("%d/%d = %g", *quota, *period, float64(*quota)/float64(*period))
	}
	rec.Check("cpu quota/period", fmt.Sprintf("%g", pol.Resources.CPUs), gotCPUs,
		quota != nil && period != nil && *quota == int64(math.Round(pol.Resources.CPUs*float64(*period))))
}

// compareConfinement checks PID 1 is the keeper, no user namespace can be
// created, and the AppArmor and cgroup namespace confinement.
func compareConfinement(rec *Record, f facts.Facts, prof profiles.Profile) {
	rec.Equal("PID 1 cmdline (keeper)", KeeperCmdline, f.PID1Cmdline)
	usernsGot, usernsRefused := facts.ReadUserns(f.UserNamespace, f.UserNamespaceControl)
	rec.Check("unprivileged user namespace refused", "refused ("+strings.Join(facts.UsernsRefusals, ", ")+")", usernsGot, usernsRefused)

	// The driver reads back AppArmorProfile and HostConfig.CgroupnsMode from
	// the Engine when it starts the sandbox (docs/contract.md#policy); these
	// are the same two properties as the kernel shows them to the workload.
	if want := prof.AppArmor.WorkloadProfile; want != "" {
		rec.Equal("AppArmor confinement (kernel)", want+" (enforce)", f.AppArmor)
	} else {
		rec.Check("AppArmor confinement (kernel)", "none (AppArmor absent)", f.AppArmor, f.AppArmor == "" || f.AppArmor == "unconfined")
	}
	if prof.Cgroup.Namespace.PerContainerReadback {
		rec.Check("private cgroup namespace (/proc/self/cgroup at its root)", "every hierarchy at /", f.ProcSelfCgroup,
			facts.AtCgroupNamespaceRoot(f.ProcSelfCgroup))
	}
}

// observePosture records, as facts of the sandbox and its host rather than
// checks, the seccomp confinement as /proc/self/status shows it and the
// host kernel's restrictions of unprivileged user namespaces as the
// sandbox reads them: the host's sysctls are what they are, the check is
// the namespace attempt itself.
func observePosture(rec *Record, f facts.Facts) {
	filters := any(f.Status.SeccompFilters)
	if f.Status.SeccompFilters < 0 {
		filters = "not reported (Linux before 5.9)"
	}
	rec.Observe("posture: seccomp", map[string]any{"mode": f.Status.Seccomp, "filters": filters})
	sysctls := map[string]string{}
	for _, s := range f.UsernsSysctls {
		sysctls[s.Path] = s.String()
	}
	rec.Observe("posture: user namespace sysctls", sysctls)
	got, _ := facts.ReadUserns(f.UserNamespace, f.UserNamespaceControl)
	rec.Observe("posture: unprivileged user namespace", got)
}

// tmpfsSize is the size option as the kernel prints it for a tmpfs of n
// bytes: whole pages, in KiB ("8192k").
func tmpfsSize(n int64) string {
	page := int64(os.Getpagesize())
	pages := (n + page - 1) / page
	return fmt.Sprintf("%dk", pages*page/1024)
}

// pageFloor is a memory limit as the kernel stores it: whole pages.
func pageFloor(n int64) *int64 {
	page := int64(os.Getpagesize())
	v := n / page * page
	return &v
}
