package facts

import (
	"fmt"
	"slices"
	"strings"
)

// Schema identifies the Facts JSON layout.
const Schema = "qualbox.probe.facts.v1"

// Facts is the probe's `facts` output: one JSON object on one line.
type Facts struct {
	// Schema is always [Schema].
	Schema string `json:"schema"`
	// Identity is the process's user and group identity.
	Identity Identity `json:"identity"`
	// Status holds capability sets and confinement from /proc/self/status.
	Status Status `json:"status"`
	// Mounts describes, per probed path in order ("/", "/tmp",
	// "/home/sandbox", "/workspace"), the mount that covers it.
	Mounts []Mount `json:"mounts"`
	// Interfaces lists the network interfaces visible to the process.
	Interfaces []Interface `json:"interfaces"`
	// Cgroup holds the resource limits visible inside the sandbox.
	Cgroup Cgroup `json:"cgroup"`
	// ProcSelfCgroup is /proc/self/cgroup verbatim.
	ProcSelfCgroup string `json:"procSelfCgroup"`
	// AppArmor is the process's AppArmor confinement as the kernel reports
	// it in /proc/self/attr/apparmor/current (Linux 5.8 and later) or
	// /proc/self/attr/current, for example "docker-default (enforce)", or
	// "unconfined". Empty when no LSM provides the file (no AppArmor).
	AppArmor string `json:"appArmor"`
	// CgroupNamespace is the target of /proc/self/ns/cgroup, for example
	// "cgroup:[4026532211]".
	CgroupNamespace string `json:"cgroupNamespace"`
	// PID1Cmdline is /proc/1/cmdline split at NUL bytes; null when it cannot
	// be read.
	PID1Cmdline []string `json:"pid1Cmdline"`
	// Hostname is the UTS hostname.
	Hostname string `json:"hostname"`
	// Machine is uname(2)'s machine field as this process sees it, for
	// example "x86_64" or "aarch64"; under a user-mode emulator (qemu-user
	// through binfmt_misc) it is the emulated machine's.
	Machine string `json:"machine"`
	// RootWrite is the outcome of creating a file directly under "/";
	// a read-only root reports OK false and Errno "EROFS".
	RootWrite Outcome `json:"rootWrite"`
	// UsernsSysctls are the host kernel's restrictions of unprivileged
	// user namespaces as the sandbox reads them, one per [UsernsSysctls]
	// path in that order; a sysctl this kernel does not have (no AppArmor,
	// no Debian or Ubuntu patch) is there with Read.Errno "ENOENT". Absent
	// from facts printed before it existed.
	UsernsSysctls []Sysctl `json:"usernsSysctls,omitempty"`
	// UserNamespace is the outcome of starting a child process in a new
	// user namespace (clone(2) with CLONE_NEWUSER, no capability asked
	// for): OK when the kernel created one, else the errno that refused it
	// ("EPERM" from Docker's default seccomp profile without
	// CAP_SYS_ADMIN). When the namespace was created but the child then
	// failed, OK is true and Error says how. Nil in facts printed before
	// it existed. ReadUserns reads it with UserNamespaceControl.
	UserNamespace *Outcome `json:"userNamespace,omitempty"`
	// UserNamespaceControl is the outcome of starting the same child
	// without CLONE_NEWUSER, attempted only when UserNamespace failed: Go
	// reports a failure of the child after the clone (its exec refused
	// with EACCES or EPERM, say) with the same error as a refused clone,
	// so UserNamespace's errno says the clone was refused only when this
	// control started. Nil when UserNamespace is OK, and in facts printed
	// before it existed.
	UserNamespaceControl *Outcome `json:"userNamespaceControl,omitempty"`
	// Errors lists facts that could not be gathered, "<what>: <error>".
	Errors []string `json:"errors,omitempty"`
}

// UsernsSysctls are the sysctls that restrict the creation of user
// namespaces by an unprivileged process: AppArmor's (Ubuntu 23.10 and
// later; 1 confines a new namespace to the unprivileged_userns profile),
// the Debian and Ubuntu kernels' unprivileged_userns_clone (0 refuses
// one without CAP_SYS_ADMIN), and the upstream limit of user namespaces
// per user (0 refuses every one).
var UsernsSysctls = []string{
	"/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
	"/proc/sys/kernel/unprivileged_userns_clone",
	"/proc/sys/user/max_user_namespaces",
}

// UsernsRefusals are the errnos with which the kernel, an LSM or a
// seccomp filter refuses a new user namespace (Facts.UserNamespace):
// EPERM (Docker's default seccomp profile without CAP_SYS_ADMIN,
// unprivileged_userns_clone 0, a chrooted caller), EACCES (an LSM),
// ENOSPC and EUSERS (the max_user_namespaces limit, before and since
// Linux 4.9). Any other failure (EINVAL from a multi-threaded unshare, a
// probe that could not exec itself) says nothing about the sandbox's
// posture. The isolation scenario passes only on one of these, and
// verification re-derives its check with them (ReadUserns;
// docs/qualification.md#evidence).
var UsernsRefusals = []string{"EPERM", "EACCES", "ENOSPC", "EUSERS"}

// ReadUserns reads a user namespace attempt (Facts.UserNamespace) and its
// control (Facts.UserNamespaceControl) as the isolation scenario's check
// does and verification re-derives it: got is the check's got, refused
// whether the clone itself was refused.
//
//   - no attempt: "not attempted (no userNamespace in the facts)";
//   - created: "created", or "created (<error>)" when the child then failed;
//   - failed while the control failed too: "inconclusive: <errno>
//     (the same child without CLONE_NEWUSER failed too: <errno>)", not a
//     refusal, since the failure may be the child's and not the clone's;
//   - failed with an errno: the errno, a refusal when it is one of
//     UsernsRefusals;
//   - failed without one: "failed without an errno: <error>".
//
// Facts printed before the control existed have none and are read as they
// were then: their errno alone decides.
func ReadUserns(attempt, control *Outcome) (got string, refused bool) {
	switch {
	case attempt == nil:
		return "not attempted (no userNamespace in the facts)", false
	case attempt.OK && attempt.Error != "":
		return "created (" + attempt.Error + ")", false
	case attempt.OK:
		return "created", false
	case control != nil && !control.OK:
		return "inconclusive: " + attempt.failure() + " (the same child without CLONE_NEWUSER failed too: " + control.failure() + ")", false
	case attempt.Errno != "":
		return attempt.Errno, slices.Contains(UsernsRefusals, attempt.Errno)
	}
	return "failed without an errno: " + attempt.Error, false
}

// Sysctl is one file under /proc/sys as a process read it.
type Sysctl struct {
	// Path is the file, for example "/proc/sys/user/max_user_namespaces".
	Path string `json:"path"`
	// Value is the file's content less surrounding white space; empty when
	// it could not be read.
	Value string `json:"value,omitempty"`
	// Read is the outcome of reading it: OK, or why not (Errno "ENOENT":
	// this kernel has no such sysctl; "EACCES": not readable here).
	Read Outcome `json:"read"`
}

// String renders s as its value, or "absent (ENOENT)" / "unreadable
// (EACCES)" / "unreadable (<error>)".
func (s Sysctl) String() string {
	switch {
	case s.Read.OK:
		return s.Value
	case s.Read.Errno == "ENOENT":
		return "absent (ENOENT)"
	case s.Read.Errno != "":
		return "unreadable (" + s.Read.Errno + ")"
	}
	return "unreadable (" + s.Read.Error + ")"
}

// Identity is the process's identity as the kernel reports it.
type Identity struct {
	UID    int   `json:"uid"`
	GID    int   `json:"gid"`
	EUID   int   `json:"euid"`
	EGID   int   `json:"egid"`
	Groups []int `json:"groups"`
}

// Status holds the confinement fields of /proc/self/status. Capability sets
// are the kernel's 16-digit lowercase hexadecimal masks, for example
// "0000000000000000" when all capabilities are dropped.
type Status struct {
	CapInh string `json:"capInh"`
	CapPrm string `json:"capPrm"`
	CapEff string `json:"capEff"`
	CapBnd string `json:"capBnd"`
	CapAmb string `json:"capAmb"`
	// NoNewPrivs is 1 when no_new_privs is set.
	NoNewPrivs int `json:"noNewPrivs"`
	// Seccomp is the seccomp mode: 0 disabled, 1 strict, 2 filter.
	Seccomp int `json:"seccomp"`
	// SeccompFilters is the number of attached filters; -1 when the kernel
	// does not report it (before Linux 5.9).
	SeccompFilters int `json:"seccompFilters"`
}

// Mount is the mount covering one probed path, from /proc/self/mountinfo.
type Mount struct {
	// Path is the probed path.
	Path string `json:"path"`
	// Found is false when no mount covers Path (then the other fields are
	// empty).
	Found bool `json:"found"`
	// MountPoint is the covering mount point: Path itself or its nearest
	// mounted ancestor.
	MountPoint string `json:"mountPoint,omitempty"`
	// FSType is the filesystem type, for example "tmpfs" or "overlay".
	FSType string `json:"fsType,omitempty"`
	// Source is the mount source.
	Source string `json:"source,omitempty"`
	// MountOptions are the per-mount options ("ro", "nosuid", ...).
	MountOptions []string `json:"mountOptions,omitempty"`
	// SuperOptions are the per-superblock options ("size=65536k", ...).
	SuperOptions []string `json:"superOptions,omitempty"`
	// ReadOnly is true when either option list has "ro".
	ReadOnly bool `json:"readOnly"`
	NoSuid   bool `json:"nosuid"`
	NoDev    bool `json:"nodev"`
	NoExec   bool `json:"noexec"`
	// Size, Mode, UID and GID are the super options of that name as the
	// kernel prints them ("65536k", "700", "65534"); empty when absent.
	Size string `json:"size,omitempty"`
	Mode string `json:"mode,omitempty"`
	UID  string `json:"uid,omitempty"`
	GID  string `json:"gid,omitempty"`
	// SizeBytes is Size in bytes; 0 when Size is empty or not a number.
	SizeBytes int64 `json:"sizeBytes,omitempty"`
}

// Interface is one network interface.
type Interface struct {
	Name string `json:"name"`
	// Flags is Go's net.Flags text, for example "up|loopback|running".
	Flags string `json:"flags"`
	// Addrs are the interface addresses in CIDR form.
	Addrs []string `json:"addrs"`
}

// Cgroup holds the limits visible inside the sandbox's cgroup. A nil limit
// means unlimited ("max", -1, or the v1 page-counter maximum) or unreadable;
// Files tells which.
type Cgroup struct {
	// Version is 1 or 2; 0 when no cgroup filesystem is visible.
	Version int `json:"version"`
	// MemoryLimitBytes is memory.limit_in_bytes (v1) or memory.max (v2).
	MemoryLimitBytes *int64 `json:"memoryLimitBytes"`
	// MemoryAndSwapLimitBytes is memory.memsw.limit_in_bytes (v1), or
	// memory.max plus memory.swap.max (v2) when both are finite.
	MemoryAndSwapLimitBytes *int64 `json:"memoryAndSwapLimitBytes"`
	// SwapLimitBytes is memory.swap.max (v2), or memsw minus memory (v1).
	SwapLimitBytes *int64 `json:"swapLimitBytes"`
	// PidsMax is pids.max.
	PidsMax *int64 `json:"pidsMax"`
	// CPUQuotaMicros and CPUPeriodMicros are cpu.cfs_quota_us and
	// cpu.cfs_period_us (v1) or the two fields of cpu.max (v2), in
	// microseconds.
	CPUQuotaMicros  *int64 `json:"cpuQuotaMicros"`
	CPUPeriodMicros *int64 `json:"cpuPeriodMicros"`
	// Files maps each interface file read, relative to /sys/fs/cgroup, to
	// its trimmed content, or to "error: ..." when it could not be read.
	Files map[string]string `json:"files"`
}

// Outcome is the result of one attempted operation.
type Outcome struct {
	OK bool `json:"ok"`
	// Errno is the symbolic errno of the failure, for example "EROFS";
	// empty when OK or when the error carries no errno.
	Errno string `json:"errno,omitempty"`
	// Error is the failure's text; empty when OK.
	Error string `json:"error,omitempty"`
}

// failure names a failed outcome: its errno, else its error's text.
func (o Outcome) failure() string {
	switch {
	case o.Errno != "":
		return o.Errno
	case o.Error != "":
		return o.Error
	}
	return "no error recorded"
}

// Result is the one JSON line a probe workload action prints to stdout on
// completion. Fields that do not apply to an action are omitted.
type Result struct {
	// Action is the subcommand: "alloc", "fork", "write", "echo", "spawn",
	// "sleep", "fill", "connect", "http" or "tree".
	Action string `json:"action"`
	Outcome
	// Requested is the count the action was asked for: MiB (alloc),
	// children (fork, spawn) or bytes (write, fill).
	Requested int64 `json:"requested,omitempty"`
	// Done is how much of Requested completed: MiB touched (alloc),
	// children started (fork, spawn) or bytes written (write, echo, fill).
	Done int64 `json:"done"`
	// Stream is "stdout" or "stderr" (write).
	Stream string `json:"stream,omitempty"`
	// SHA256 is the hex digest of the bytes written (write, echo).
	SHA256 string `json:"sha256,omitempty"`
	// PIDs are the started children's process IDs (fork, spawn).
	PIDs []int `json:"pids,omitempty"`
	// Path is the file written (fill) or the walked directory (tree).
	Path string `json:"path,omitempty"`
	// Address is the dialled TCP address (connect) or the requested URL
	// (http).
	Address string `json:"address,omitempty"`
	// Tree lists the walked directory (tree), sorted by path; nil for
	// other actions and when the walk failed at its root.
	Tree []TreeEntry `json:"tree,omitempty"`
	// Seconds is the slept or requested child lifetime (sleep, fork, spawn).
	Seconds float64 `json:"seconds,omitempty"`
	// HTTP is the reply to an HTTP GET (http); nil when no reply's
	// status line was read (Outcome says why).
	HTTP *HTTPReply `json:"http,omitempty"`
	// ElapsedMillis is the action's wall time in milliseconds.
	ElapsedMillis int64 `json:"elapsedMillis"`
}

// HTTPReply is what the http action read of a reply: enough to tell an
// Engine API (whose every reply, /_ping's included, carries Api-Version
// and a Server header "Docker/<version> (<os>)") from any other server.
type HTTPReply struct {
	// Status is the HTTP status code.
	Status int `json:"status"`
	// APIVersion is the Api-Version header; empty when absent.
	APIVersion string `json:"apiVersion,omitempty"`
	// Server is the Server header; empty when absent.
	Server string `json:"server,omitempty"`
	// Body is the reply body's first 64 bytes at most.
	Body string `json:"body,omitempty"`
}

// EngineAPI reports whether r is an Engine API's reply: it carries the
// Api-Version header, or a Server header naming Docker.
func (r *HTTPReply) EngineAPI() bool {
	return r != nil && (r.APIVersion != "" || strings.HasPrefix(r.Server, "Docker/"))
}

// Progress is a line the alloc action prints to stderr after each touched
// MiB, so that a caller sees how far it got before an OOM kill.
type Progress struct {
	Action string `json:"action"`
	// Done is the MiB touched so far.
	Done int64 `json:"done"`
}

// WritePattern is what the write action repeats: byte i of its output is
// WritePattern[i%len(WritePattern)].
const WritePattern = "qualbox-probe 0123456789 abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ\n"

// TreeEntry is one entry of a directory tree as the probe's tree action
// walks it (lstat, never following a symlink) and as the host-side dataset
// builder expects it, so the two compare with ==.
type TreeEntry struct {
	// Path is relative to the walked root, '/'-separated; "." is the root.
	Path string `json:"path"`
	// Type is "dir", "file", "symlink" or "other".
	Type string `json:"type"`
	// Mode is the permission bits in octal, for example "0644".
	Mode string `json:"mode"`
	// Size is a file's length in bytes; 0 for the other types.
	Size int64 `json:"size,omitempty"`
	// SHA256 is a file's hex content digest; empty for the other types.
	SHA256 string `json:"sha256,omitempty"`
	// Target is a symlink's target as stored; empty for the other types.
	Target string `json:"target,omitempty"`
}

// String renders e as one comparable line.
func (e TreeEntry) String() string {
	s := e.Type + " " + e.Mode + " " + e.Path
	switch e.Type {
	case "file":
		s += fmt.Sprintf(" %d %s", e.Size, e.SHA256)
	case "symlink":
		s += " -> " + e.Target
	}
	return s
}
