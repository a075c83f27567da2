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

func gather() facts.Facts {
	f := facts.Facts{Schema: facts.Schema}
	fail := func(what string, err error) { f.Errors = append(f.Errors, what+": "+err.Error()) }

	groups, err := os.Getgroups()
	if err != nil {
		fail("groups", err)
	}
	if groups == nil {
		groups = []int{}
	}
	f.Identity = facts.Identity{UID: os.Getuid(), GID: os.Getgid(), EUID: os.Geteuid(), EGID: os.Getegid(), Groups: groups}

	if data, err := os.ReadFile("/proc/self/status"); err != nil {
		fail("status", err)
	} else if f.Status, err = facts.ParseStatus(data); err != nil {
		fail("status", err)
	}

	f.Mounts = []facts.Mount{}
	if data, err := os.ReadFile("/proc/self/mountinfo"); err != nil {
		fail("mountinfo", err)
	} else if entries, err := facts.ParseMountinfo(data); err != nil {
		fail("mountinfo", err)
	} else {
		for _, p := range probedPaths {
			f.Mounts = append(f.Mounts, facts.Covering(entries, p))
		}
	}

	f.Interfaces = []facts.Interface{}
	if ifaces, err := net.Interfaces(); err != nil {
		fail("interfaces", err)
	} else {
		for _, i := range ifaces {
			addrs := []string{}
			if as, err := i.Addrs(); err != nil {
				fail("addrs "+i.Name, err)
			} else {
				for _, a := range as {
					addrs = append(addrs, a.String())
				}
			}
			f.Interfaces = append(f.Interfaces, facts.Interface{Name: i.Name, Flags: i.Flags.String(), Addrs: addrs})
		}
	}

	if f.Cgroup, err = facts.ReadCgroup(os.DirFS("/sys/fs/cgroup")); err != nil {
		fail("cgroup", err)
	}
	if data, err := os.ReadFile("/proc/self/cgroup"); err != nil {
		fail("proc self cgroup", err)
	} else {
		f.ProcSelfCgroup = string(data)
	}
	if f.AppArmor, err = readAppArmor(); err != nil {
		fail("apparmor", err)
	}
	if f.CgroupNamespace, err = os.Readlink("/proc/self/ns/cgroup"); err != nil {
		fail("cgroup namespace", err)
	}
	if data, err := os.ReadFile("/proc/1/cmdline"); err != nil {
		fail("pid 1 cmdline", err)
	} else {
		f.PID1Cmdline = strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00")
	}
	if f.Hostname, err = os.Hostname(); err != nil {
		fail("hostname", err)
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		fail("uname", err)
	} else {
		f.Machine = unix.ByteSliceToString(u.Machine[:])
	}

	root := os.DirFS("/")
	for _, p := range facts.UsernsSysctls {
		f.UsernsSysctls = append(f.UsernsSysctls, facts.ReadSysctl(root, p))
	}
	userns, control := tryUserNamespace()
	f.UserNamespace, f.UserNamespaceControl = &userns, control

	// O_EXCL: never touch an existing file even if the root is writable.
	const probe = "/.qualbox-probe-write-test"
	if w, err := os.OpenFile(probe, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err != nil {
		f.RootWrite = outcome(err)
	} else {
		f.RootWrite = facts.Outcome{OK: true}
		_ = w.Close()
		_ = os.Remove(probe)
	}
	return f
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
