package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/qualbox/qualbox/qualify/guest/facts"
	"golang.org/x/sys/unix"
)

// probedPaths are the workload's mount points
// (docs/contract.md#profiles-and-admission).
var probedPaths = []string{"/", "/tmp", "/home/sandbox", "/workspace"}

// gather reads every fact the probe reports, in steps, each adding its
// failures to Errors and going on: identity, status, mounts, interfaces,
// cgroups, the process's confinement and machine, user namespaces, then
// the root write test.
func gather() facts.Facts {
	g := &gathering{f: facts.Facts{Schema: facts.Schema}}
	g.identity()
	g.status()
	g.mounts()
	g.interfaces()
	g.cgroups()
	g.process()
	g.userNamespaces()
	g.rootWrite()
	return g.f
}

// gathering is the state of one gather: the facts so far.
type gathering struct{ f facts.Facts }

// fail records that reading what failed with err.
func (g *gathering) fail(what string, err error) {
	g.f.Errors = append(g.f.Errors, what+": "+err.Error())
}

// identity reads the process's ids and groups.
func (g *gathering) identity() {
	groups, err := os.Getgroups()
	if err != nil {
		g.fail("groups", err)
	}
	if groups == nil {
		groups = []int{}
	}
	g.f.Identity = facts.Identity{UID: os.Getuid(), GID: os.Getgid(), EUID: os.Geteuid(), EGID: os.Getegid(), Groups: groups}
}

// status reads /proc/self/status.
func (g *gathering) status() {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		g.fail("status", err)
		return
	}
	if g.f.Status, err = facts.ParseStatus(data); err != nil {
		g.fail("status", err)
	}
}

// mounts reads the mounts covering probedPaths.
func (g *gathering) mounts() {
	g.f.Mounts = []facts.Mount{}
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		g.fail("mountinfo", err)
		return
	}
	entries, err := facts.ParseMountinfo(data)
	if err != nil {
		g.fail("mountinfo", err)
		return
	}
	for _, p := range probedPaths {
		g.f.Mounts = append(g.f.Mounts, facts.Covering(entries, p))
	}
}

// interfaces reads the network interfaces and their addresses.
func (g *gathering) interfaces() {
	g.f.Interfaces = []facts.Interface{}
	ifaces, err := net.Interfaces()
	if err != nil {
		g.fail("interfaces", err)
		return
	}
	for _, i := range ifaces {
		addrs := []string{}
		if as, err := i.Addrs(); err != nil {
			g.fail("addrs "+i.Name, err)
		} else {
			for _, a := range as {
				addrs = append(addrs, a.String())
			}
		}
		g.f.Interfaces = append(g.f.Interfaces, facts.Interface{Name: i.Name, Flags: i.Flags.String(), Addrs: addrs})
	}
}

// cgroups reads the cgroup limits and /proc/self/cgroup.
func (g *gathering) cgroups() {
	var err error
	if g.f.Cgroup, err = facts.ReadCgroup(os.DirFS("/sys/fs/cgroup")); err != nil {
		g.fail("cgroup", err)
	}
	if data, err := os.ReadFile("/proc/self/cgroup"); err != nil {
		g.fail("proc self cgroup", err)
	} else {
		g.f.ProcSelfCgroup = string(data)
	}
}

// process reads the AppArmor label, the cgroup namespace, PID 1's command
// line, the hostname and the machine.
func (g *gathering) process() {
	var err error
	if g.f.AppArmor, err = readAppArmor(); err != nil {
		g.fail("apparmor", err)
	}
	if g.f.CgroupNamespace, err = os.Readlink("/proc/self/ns/cgroup"); err != nil {
		g.fail("cgroup namespace", err)
	}
	if data, err := os.ReadFile("/proc/1/cmdline"); err != nil {
		g.fail("pid 1 cmdline", err)
	} else {
		g.f.PID1Cmdline = strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00")
	}
	if g.f.Hostname, err = os.Hostname(); err != nil {
		g.fail("hostname", err)
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		g.fail("uname", err)
	} else {
		g.f.Machine = unix.ByteSliceToString(u.Machine[:])
	}
}

// userNamespaces reads the user namespace sysctls and tries to create
// one (with its control when that fails).
func (g *gathering) userNamespaces() {
	root := os.DirFS("/")
	for _, p := range facts.UsernsSysctls {
		g.f.UsernsSysctls = append(g.f.UsernsSysctls, facts.ReadSysctl(root, p))
	}
	userns, control := tryUserNamespace()
	g.f.UserNamespace, g.f.UserNamespaceControl = &userns, control
}

// rootWrite tries to create a file in the root directory. O_EXCL: never
// touch an existing file even if the root is writable.
func (g *gathering) rootWrite() {
	const probe = "/.qualbox-probe-write-test"
	if w, err := os.OpenFile(probe, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err != nil {
		g.f.RootWrite = outcome(err)
	} else {
		g.f.RootWrite = facts.Outcome{OK: true}
		_ = w.Close()
		_ = os.Remove(probe)
	}
}

// readAppArmor reads the process's AppArmor label: the per-LSM file first
// (Linux 5.8+, correct when several LSMs are stacked), then the shared one.
// A missing file, or EINVAL (no LSM implements it), means no AppArmor: "".
func readAppArmor() (string, error) {
	for _, p := range []string{"/proc/self/attr/apparmor/current", "/proc/self/attr/current"} {
		data, err := os.ReadFile(p)
		switch {
		case err == nil:
			return facts.ParseLSMAttr(data), nil
		case errors.Is(err, os.ErrNotExist), errors.Is(err, syscall.EINVAL):
			continue
		default:
			return "", err
		}
	}
	return "", nil
}

// tryUserNamespace starts the probe itself again as a child in a new user
// namespace (clone(2) with CLONE_NEWUSER, no uid or gid mapping asked
// for), running `sleep 0`, and reports whether the kernel let it, with
// the control usernsAttempt adds when it did not. A forked child and not
// unshare(2) here: unshare(CLONE_NEWUSER) refuses any multi-threaded
// caller with EINVAL, which every Go process is, and that would read as a
// refusal whatever the seccomp profile says.
func tryUserNamespace() (attempt facts.Outcome, control *facts.Outcome) {
	self, err := os.Executable()
	return usernsAttempt(func(cloneflags uintptr) facts.Outcome {
		if err != nil {
			// Neither child can start: the attempt and its control both
			// fail, which reads as inconclusive, not as a refusal.
			return outcome(fmt.Errorf("the probe's own path: %w", err))
		}
		return startChild(self, cloneflags, "sleep", "0")
	})
}

// usernsAttempt starts a child with CLONE_NEWUSER and, only when that
// fails, the same child without it, the control. Go reports a child that
// failed after the clone (its exec refused with EACCES or EPERM, its
// working directory gone) with the same error as a refused clone: only a
// control that starts shows the difference was the new namespace
// (facts.ReadUserns). control is nil when the attempt started.
func usernsAttempt(start func(cloneflags uintptr) facts.Outcome) (attempt facts.Outcome, control *facts.Outcome) {
	attempt = start(syscall.CLONE_NEWUSER)
	if attempt.OK {
		return attempt, nil
	}
	c := start(0)
	return attempt, &c
}

// startChild runs path with args as a child cloned with cloneflags, for
// at most 10 s: OK when it started (with Error saying how it failed
// after, if it did), else why it did not, with its errno.
func startChild(path string, cloneflags uintptr, args ...string) facts.Outcome {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: cloneflags}
	if err := cmd.Start(); err != nil {
		// The clone failed, or the child failed before its exec
		// completed: err wraps the errno either way.
		return outcome(err)
	}
	if err := cmd.Wait(); err != nil {
		// The child started (in its new namespace, if asked for) and
		// then failed: still a start, but say so rather than report a
		// clean OK.
		what := "child"
		if cloneflags&syscall.CLONE_NEWUSER != 0 {
			what = "child in the new user namespace"
		}
		return facts.Outcome{OK: true, Error: what + ": " + err.Error()}
	}
	return facts.Outcome{OK: true}
}

// outcome describes err with its symbolic errno ("EROFS", "ENOSPC", ...).
func outcome(err error) facts.Outcome { return facts.OutcomeOf(err) }
