package scenario

import (
	"testing"

	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/profiles"
	"github.com/qualbox/qualbox/qualify/evidence"
	"github.com/qualbox/qualbox/qualify/guest/facts"
	"github.com/qualbox/qualbox/sandboxapi"
)

// checkNamed runs compareFacts on f under profile and returns the check
// called name.
func checkNamed(t *testing.T, profile string, f facts.Facts, name string) evidence.Check {
	t.Helper()
	prof, err := profiles.Load(profile)
	assert.NilError(t, err)
	rec := NewRecord()
	compareFacts(rec, f, sandboxapi.Policy{}, driver.User{UID: 65534, GID: 65534}, prof, sandboxapi.EffectivePolicy{})
	for _, c := range rec.Snapshot().Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q", name)
	return evidence.Check{}
}

// The workload's AppArmor label as the kernel reports it must be the
// profile's docker-default in enforce mode where AppArmor is required, and
// absent where the profile says AppArmor is absent.
func TestIsolationAppArmorConfinement(t *testing.T) {
	const name = "AppArmor confinement (kernel)"
	for _, tc := range []struct {
		profile, label string
		ok             bool
	}{
		{"linux-x64", "docker-default (enforce)", true},
		{"linux-x64", "docker-default (complain)", false},
		{"linux-x64", "unconfined", false},
		{"linux-x64", "", false},
		{"linux-x64", "other-profile (enforce)", false},
		{"linux-x64-cgroupv1", "", true},
		{"linux-x64-cgroupv1", "unconfined", true},
		{"linux-x64-cgroupv1", "docker-default (enforce)", false},
	} {
		c := checkNamed(t, tc.profile, facts.Facts{AppArmor: tc.label}, name)
		assert.Equal(t, c.OK, tc.ok, "%s with %q: %+v", tc.profile, tc.label, c)
	}
}

// The probe must find itself at the root of a private cgroup namespace.
func TestIsolationPrivateCgroupNamespace(t *testing.T) {
	const name = "private cgroup namespace (/proc/self/cgroup at its root)"
	for _, tc := range []struct {
		profile, cgroup string
		ok              bool
	}{
		{"linux-x64", "0::/\n", true},
		{"linux-x64", "0::/system.slice/docker-0123abcd.scope\n", false},
		{"linux-x64", "", false},
		{"linux-x64-cgroupv1", "12:pids:/\n2:cpu,cpuacct:/\n1:name=systemd:/\n0::/\n", true},
		{"linux-x64-cgroupv1", "12:pids:/docker/0123abcd\n0::/\n", false},
	} {
		c := checkNamed(t, tc.profile, facts.Facts{ProcSelfCgroup: tc.cgroup}, name)
		assert.Equal(t, c.OK, tc.ok, "%s with %q: %+v", tc.profile, tc.cgroup, c)
	}
}

// The independent AppArmor cross-check accepts both spellings a current
// Engine uses and still tells presence from absence.
func TestCrossCheckAppArmorSpellings(t *testing.T) {
	const name = "independent: SecurityOptions AppArmor"
	for _, tc := range []struct {
		profile string
		opts    []string
		ok      bool
	}{
		{"linux-x64", []string{"name=apparmor", "name=seccomp,profile=builtin", "name=cgroupns"}, true},
		{"linux-x64", []string{"name=apparmor,profile=default", "name=seccomp,profile=builtin", "name=cgroupns"}, true},
		{"linux-x64", []string{"name=seccomp,profile=builtin", "name=cgroupns"}, false},
		{"linux-x64", []string{"name=apparmorx", "name=seccomp,profile=builtin"}, false},
		{"linux-x64-cgroupv1", []string{"name=apparmor,profile=default", "name=seccomp,profile=default"}, false},
		{"linux-x64-cgroupv1", []string{"name=seccomp,profile=default"}, true},
	} {
		prof, err := profiles.Load(tc.profile)
		assert.NilError(t, err)
		adm := &driver.Admission{}
		ind := independentFacts{Engine: driver.EngineFacts{SecurityOptions: tc.opts}}
		var got *evidence.Check
		for _, c := range crossCheck(adm, ind, prof, "") {
			if c.Name == name {
				got = &c
			}
		}
		assert.Assert(t, got != nil)
		assert.Equal(t, got.OK, tc.ok, "%s %q: %+v", tc.profile, tc.opts, *got)
	}
}

// The workload's uname machine must be the profile's image architecture:
// an arm64 row whose workload ran as x86_64 (or an emulated amd64 row whose
// workload ran natively) fails.
func TestIsolationUnameMachine(t *testing.T) {
	const name = "uname machine"
	for _, tc := range []struct {
		profile, machine string
		ok               bool
	}{
		{"linux-arm64", "aarch64", true},
		{"linux-arm64", "x86_64", false},
		{"linux-x64", "x86_64", true},
		{"linux-x64", "aarch64", false},
		{"linux-x64", "", false},
		{"desktop-apple-virtualization-rosetta-amd64", "x86_64", true},
		{"desktop-apple-virtualization-rosetta-amd64", "aarch64", false},
	} {
		c := checkNamed(t, tc.profile, facts.Facts{Machine: tc.machine}, name)
		assert.Equal(t, c.OK, tc.ok, "%s with %q: %+v", tc.profile, tc.machine, c)
	}
}

// The workload must be refused a user namespace with an errno that means
// a refusal, while the same child without CLONE_NEWUSER starts; a
// creation fails the check, and so does an attempt that said nothing (no
// attempt recorded, EINVAL from a multi-threaded unshare, a probe that
// could not exec itself, a control that failed too). The facts package's
// reading (facts.ReadUserns) is the one verification re-derives.
func TestIsolationUserNamespaceRefused(t *testing.T) {
	const name = "unprivileged user namespace refused"
	started := &facts.Outcome{OK: true}
	for _, tc := range []struct {
		o, control *facts.Outcome
		got        string
		ok         bool
	}{
		{&facts.Outcome{Errno: "EPERM", Error: "fork/exec /usr/local/bin/qualbox-probe: operation not permitted"}, started, "EPERM", true},
		{&facts.Outcome{Errno: "ENOSPC"}, started, "ENOSPC", true},
		{&facts.Outcome{Errno: "EACCES"}, started, "EACCES", true},
		{&facts.Outcome{Errno: "EUSERS"}, started, "EUSERS", true},
		// A probe before the control recorded none: its errno decides.
		{&facts.Outcome{Errno: "EPERM"}, nil, "EPERM", true},
		{&facts.Outcome{Errno: "EPERM"}, &facts.Outcome{Errno: "EPERM"}, "inconclusive: EPERM (the same child without CLONE_NEWUSER failed too: EPERM)", false},
		{&facts.Outcome{Errno: "EACCES"}, &facts.Outcome{Errno: "EACCES"}, "inconclusive: EACCES (the same child without CLONE_NEWUSER failed too: EACCES)", false},
		{&facts.Outcome{OK: true}, nil, "created", false},
		{&facts.Outcome{OK: true, Error: "child in the new user namespace: exit status 2"}, nil, "created (child in the new user namespace: exit status 2)", false},
		{&facts.Outcome{Errno: "EINVAL"}, started, "EINVAL", false},
		{&facts.Outcome{Errno: "ENOENT"}, started, "ENOENT", false},
		{&facts.Outcome{Error: "no errno"}, started, "failed without an errno: no errno", false},
		{nil, nil, "not attempted (no userNamespace in the facts)", false},
	} {
		c := checkNamed(t, "linux-x64-cgroupv1", facts.Facts{UserNamespace: tc.o, UserNamespaceControl: tc.control}, name)
		assert.Equal(t, c.OK, tc.ok, "%+v, control %+v: %+v", tc.o, tc.control, c)
		assert.Equal(t, c.Got, tc.got)
		assert.Equal(t, c.Want, "refused (EPERM, EACCES, ENOSPC, EUSERS)")
	}
}

// The seccomp filters and the host's user namespace sysctls are recorded
// as observations, never as checks: the sysctls are facts of the host.
func TestIsolationPostureObserved(t *testing.T) {
	f := facts.Facts{
		Status: facts.Status{Seccomp: 2, SeccompFilters: 1},
		UsernsSysctls: []facts.Sysctl{
			{Path: "/proc/sys/kernel/apparmor_restrict_unprivileged_userns", Read: facts.Outcome{Errno: "ENOENT"}},
			{Path: "/proc/sys/user/max_user_namespaces", Value: "96369", Read: facts.Outcome{OK: true}},
		},
		UserNamespace: &facts.Outcome{Errno: "EPERM"},
	}
	rec := NewRecord()
	observePosture(rec, f)
	snap := rec.Snapshot()
	assert.Equal(t, len(snap.Checks), 0)
	assert.DeepEqual(t, snap.Observed["posture: seccomp"], map[string]any{"mode": 2, "filters": 1})
	assert.DeepEqual(t, snap.Observed["posture: user namespace sysctls"], map[string]string{
		"/proc/sys/kernel/apparmor_restrict_unprivileged_userns": "absent (ENOENT)",
		"/proc/sys/user/max_user_namespaces":                     "96369",
	})
	assert.Equal(t, snap.Observed["posture: unprivileged user namespace"], "EPERM")

	f.Status.SeccompFilters = -1
	observePosture(rec, f)
	assert.DeepEqual(t, rec.Snapshot().Observed["posture: seccomp"], map[string]any{"mode": 2, "filters": "not reported (Linux before 5.9)"})
}
