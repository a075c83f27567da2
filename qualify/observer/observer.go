package observer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/client"

	"github.com/qualbox/qualbox/qualify/guest/facts"
)

// v1Unlimited is the v1 page counter's "no limit" (PAGE_COUNTER_MAX pages
// of 4 KiB, as the kernel prints it on x86_64).
const v1Unlimited = 9223372036854771712

// Scope is a process's cgroup, resolved once from /proc/<pid>/cgroup.
type Scope struct {
	// PID is the process the scope was resolved from (the keeper).
	PID int `json:"pid"`
	// StartTime is field 22 of /proc/<pid>/stat at Resolve (clock ticks
	// after boot): a later /proc/<pid> with another start time is another
	// process that reused the PID.
	StartTime uint64 `json:"startTime"`
	// Version is 1 or 2.
	Version int `json:"version"`
	// ProcCgroup is /proc/<pid>/cgroup verbatim.
	ProcCgroup string `json:"procCgroup"`
	// Dirs maps "memory", "pids" and "cpu" to the scope's directory for
	// that controller, relative to the fs root (no leading slash), e.g.
	// "sys/fs/cgroup/memory/docker/<id>"; on v2 all three are the same.
	// Every directory existed and listed PID when the scope was resolved.
	Dirs map[string]string `json:"dirs"`
}

// controllers are the controllers the observer reads.
var controllers = []string{"memory", "pids", "cpu"}

// Resolve reads proc/<pid>/cgroup, proc/<pid>/stat and proc/self/mountinfo
// in fsys (rooted at the host's "/") and returns the pid's scope. cgroup v1
// is chosen when the memory controller has a v1 line (hybrid hosts keep an
// empty "0::" line too); otherwise the v2 "0::<path>" line is used. Each
// path is mapped through the mount of its hierarchy, honouring the mount's
// root (mountinfo field 4). The scope is resolved only when every
// controller directory exists and lists pid (v1: tasks or cgroup.procs,
// v2: cgroup.procs); a path outside the observer's cgroup namespace ("/.."),
// outside the mounted root, or a directory that does not hold pid is an
// error, so a scope that was never found is never reported gone later.
func Resolve(fsys fs.FS, pid int) (Scope, error) {
	s := Scope{PID: pid, Dirs: map[string]string{}}
	data, err := fs.ReadFile(fsys, fmt.Sprintf("proc/%d/cgroup", pid))
	if err != nil {
		return s, fmt.Errorf("observer: read /proc/%d/cgroup: %w", pid, err)
	}
	s.ProcCgroup = string(data)
	if s.StartTime, err = StartTime(fsys, pid); err != nil {
		return s, err
	}
	mountinfo, _ := fs.ReadFile(fsys, "proc/self/mountinfo")
	s.Version, s.Dirs, err = scopeDirs(pid, data, mountinfo)
	if err != nil {
		return s, err
	}
	for _, c := range controllers {
		d, ok := s.Dirs[c]
		if !ok {
			continue
		}
		if err := s.holds(fsys, d); err != nil {
			return s, fmt.Errorf("observer: %s scope of pid %d: %w", c, pid, err)
		}
	}
	return s, nil
}

// scopeDirs is Resolve's parsing, pure over the bytes of /proc/<pid>/cgroup
// and /proc/self/mountinfo (nil when unreadable): the cgroup version and
// each controller's directory relative to the fs root. pid is for messages.
func scopeDirs(pid int, procCgroup, mountinfo []byte) (int, map[string]string, error) {
	dirs := map[string]string{}
	mounts := cgroupMounts(mountinfo)
	v1 := map[string][2]string{} // controller: hierarchy, path
	v2 := ""
	haveV2 := false
	for line := range strings.SplitSeq(strings.TrimSpace(string(procCgroup)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			return 0, dirs, fmt.Errorf("observer: /proc/%d/cgroup: malformed line %q", pid, line)
		}
		if parts[1] == "" {
			v2, haveV2 = parts[2], true
			continue
		}
		for c := range strings.SplitSeq(parts[1], ",") {
			v1[c] = [2]string{parts[1], parts[2]}
		}
	}
	if _, ok := v1["memory"]; ok {
		for _, c := range controllers {
			hp, ok := v1[c]
			if !ok {
				continue
			}
			m, ok := mounts[c]
			if !ok {
				m = mount{point: "sys/fs/cgroup/" + hp[0], root: "/"}
			}
			d, err := m.dir(hp[1])
			if err != nil {
				return 1, dirs, fmt.Errorf("observer: /proc/%d/cgroup %s: %w", pid, c, err)
			}
			dirs[c] = d
		}
		return 1, dirs, nil
	}
	if !haveV2 {
		return 0, dirs, fmt.Errorf("observer: /proc/%d/cgroup names neither a v1 memory controller nor a v2 path", pid)
	}
	m, ok := mounts[""]
	if !ok {
		m = mount{point: "sys/fs/cgroup", root: "/"}
	}
	d, err := m.dir(v2)
	if err != nil {
		return 0, dirs, fmt.Errorf("observer: /proc/%d/cgroup: %w", pid, err)
	}
	for _, c := range controllers {
		dirs[c] = d
	}
	return 2, dirs, nil
}

// holds checks that dir is a directory whose cgroup.procs (or, on v1,
// tasks) lists s.PID.
func (s Scope) holds(fsys fs.FS, dir string) error {
	st, err := fs.Stat(fsys, dir)
	if err != nil {
		return fmt.Errorf("directory /%s: %w", dir, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("/%s is not a directory", dir)
	}
	files := []string{"cgroup.procs"}
	if s.Version == 1 {
		files = append(files, "tasks")
	}
	var errs []error
	for _, f := range files {
		data, err := fs.ReadFile(fsys, path.Join(dir, f))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if slices.Contains(pids(string(data)), s.PID) {
			return nil
		}
	}
	if len(errs) == len(files) {
		return fmt.Errorf("/%s: %w", dir, errors.Join(errs...))
	}
	return fmt.Errorf("pid %d is not in /%s/%s", s.PID, dir, strings.Join(files, " or "))
}

// StartTime returns field 22 (starttime) of proc/<pid>/stat in fsys.
func StartTime(fsys fs.FS, pid int) (uint64, error) {
	data, err := fs.ReadFile(fsys, fmt.Sprintf("proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("observer: read /proc/%d/stat: %w", pid, err)
	}
	return parseStartTime(pid, data)
}

// parseStartTime is StartTime's parsing of /proc/<pid>/stat content; pid is
// for messages.
func parseStartTime(pid int, data []byte) (uint64, error) {
	// comm (field 2) may hold spaces and parentheses: fields 3.. follow
	// the last ')'.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0, fmt.Errorf("observer: /proc/%d/stat: no comm field", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 20 {
		return 0, fmt.Errorf("observer: /proc/%d/stat: %d fields after comm, want >= 20", pid, len(f))
	}
	n, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("observer: /proc/%d/stat starttime: %w", pid, err)
	}
	return n, nil
}

// mount is a cgroup hierarchy's mount: its point relative to the fs root
// and the hierarchy path mounted there (mountinfo field 4).
type mount struct {
	point, root string
}

// dir maps the cgroup path p of /proc/<pid>/cgroup to a directory under
// the mount.
func (m mount) dir(p string) (string, error) {
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("cgroup path %q is not absolute", p)
	}
	if slices.Contains(strings.Split(p, "/"), "..") {
		return "", fmt.Errorf("cgroup path %q is outside the observer's cgroup namespace", p)
	}
	rel := p
	if m.root != "/" {
		r, ok := strings.CutPrefix(p, m.root)
		if !ok || r != "" && !strings.HasPrefix(r, "/") {
			return "", fmt.Errorf("cgroup path %q is outside the hierarchy mounted at /%s (root %q)", p, m.point, m.root)
		}
		rel = r
	}
	return path.Join(m.point, rel), nil
}

// cgroupMounts maps each v1 controller (and "" for cgroup2) to its mount
// relative to the fs root, from proc/self/mountinfo content; missing
// (nil) or malformed mountinfo yields an empty map (callers use the
// conventional /sys/fs/cgroup layout, whose guesses Resolve still checks).
func cgroupMounts(data []byte) map[string]mount {
	out := map[string]mount{}
	entries, err := facts.ParseMountinfo(data)
	if err != nil {
		return out
	}
	for _, e := range entries {
		m := mount{point: strings.TrimPrefix(e.MountPoint, "/"), root: e.Root}
		switch e.FSType {
		case "cgroup2":
			// Keep the first: the unified mount of a hybrid host or the v2 root.
			if _, ok := out[""]; !ok {
				out[""] = m
			}
		case "cgroup":
			for _, o := range e.SuperOptions {
				if _, ok := out[o]; !ok && (slices.Contains(controllers, o) || o == "cpuacct") {
					out[o] = m
				}
			}
		}
	}
	return out
}

// Snapshot is one reading of a scope's interface files. Nil numbers are
// unlimited ("max", -1 or the v1 page-counter maximum) or not readable;
// Files and Errors tell which.
type Snapshot struct {
	// Label says when it was taken, e.g. "before", "during", "after".
	Label   string    `json:"label"`
	Time    time.Time `json:"time"`
	Version int       `json:"version"`
	// MemoryLimitBytes is memory.limit_in_bytes (v1) or memory.max (v2).
	MemoryLimitBytes *int64 `json:"memoryLimitBytes"`
	// MemorySwapLimitBytes is memory.memsw.limit_in_bytes (v1: memory plus
	// swap) or memory.swap.max (v2: swap alone).
	MemorySwapLimitBytes *int64 `json:"memorySwapLimitBytes"`
	// MemoryUsageBytes is memory.usage_in_bytes (v1) or memory.current (v2).
	MemoryUsageBytes *int64 `json:"memoryUsageBytes"`
	// PeakUsageBytes is memory.max_usage_in_bytes (v1) or memory.peak (v2,
	// Linux 5.19+).
	PeakUsageBytes *int64 `json:"peakUsageBytes"`
	// ShmemBytes is memory.stat shmem: tmpfs and shared memory pages
	// charged to the scope.
	ShmemBytes *int64 `json:"shmemBytes"`
	// FailCount is memory.failcnt (v1 only): times the memory limit was hit.
	FailCount *int64 `json:"failCount"`
	// MemSwapFailCount is memory.memsw.failcnt (v1 only): times the
	// memory+swap limit was hit (the one that trips when both are equal).
	MemSwapFailCount *int64 `json:"memSwapFailCount"`
	// MaxEvents is memory.events max (v2 only): times the limit was hit.
	MaxEvents *int64 `json:"maxEvents"`
	// OOMEvents is memory.events oom (v2) or memory.oom_control under_oom
	// (v1, a state rather than a count).
	OOMEvents *int64 `json:"oomEvents"`
	// OOMKills is memory.oom_control oom_kill (v1) or memory.events
	// oom_kill (v2): processes the kernel's OOM killer killed in the scope.
	OOMKills *int64 `json:"oomKills"`
	// PidsMax, PidsCurrent and PidsMaxEvents are pids.max, pids.current and
	// pids.events "max". Before Linux 6.11 that counts, in the forking
	// task's cgroup, the forks refused to it by whichever limit refused
	// them (its own or an ancestor's). From 6.11 it is hierarchical: a
	// refusal counts in the cgroup whose limit refused it and in every
	// ancestor, and PidsMaxEventsLocal, pids.events.local "max", counts
	// only the refusals of this cgroup's own limit (nil where the kernel
	// has no pids.events.local, v1 included). Mounted with
	// pids_localevents, a 6.11+ pids.events shows the local count too.
	PidsMax            *int64 `json:"pidsMax"`
	PidsCurrent        *int64 `json:"pidsCurrent"`
	PidsMaxEvents      *int64 `json:"pidsMaxEvents"`
	PidsMaxEventsLocal *int64 `json:"pidsMaxEventsLocal,omitempty"`
	// CPUQuotaMicros and CPUPeriodMicros are cpu.cfs_quota_us and
	// cpu.cfs_period_us (v1) or the two fields of cpu.max (v2).
	CPUQuotaMicros  *int64 `json:"cpuQuotaMicros"`
	CPUPeriodMicros *int64 `json:"cpuPeriodMicros"`
	// Procs are the PIDs in the memory scope's cgroup.procs.
	Procs []int `json:"procs"`
	// Files maps each file read (relative to the fs root) to its trimmed
	// content; Errors lists files that could not be read.
	Files  map[string]string `json:"files"`
	Errors []string          `json:"errors,omitempty"`
}

// PidsLimitRefusals is how many forks were refused at this cgroup, and the
// file and key it read: pids.events.local "max" where the kernel has it
// (6.11 and later: refusals by this cgroup's own pids.max, where
// pids.events also counts its descendants' limits), else pids.events
// "max" (before 6.11: refusals to this cgroup's tasks, by its own limit
// or an ancestor's; a caller ties them to this cgroup's limit by
// pids.current at pids.max). The count is -1 when neither was readable.
func (s Snapshot) PidsLimitRefusals() (n int64, source string) {
	switch {
	case s.PidsMaxEventsLocal != nil:
		return *s.PidsMaxEventsLocal, "pids.events.local max"
	case s.PidsMaxEvents != nil:
		return *s.PidsMaxEvents, "pids.events max"
	}
	return -1, "pids.events max"
}

// LimitHits is how often the memory limit was hit: on v1 the larger of
// memory.failcnt and memory.memsw.failcnt, on v2 memory.events max; -1 when
// unreadable.
func (s Snapshot) LimitHits() int64 {
	v := int64(-1)
	for _, p := range []*int64{s.FailCount, s.MemSwapFailCount, s.MaxEvents} {
		if p != nil && *p > v {
			v = *p
		}
	}
	return v
}

// Read takes a snapshot of s labelled label.
func (s Scope) Read(fsys fs.FS, label string) Snapshot {
	snap := Snapshot{Label: label, Time: time.Now().UTC(), Version: s.Version, Files: map[string]string{}}
	read := func(ctrl, name string) (string, bool) {
		dir, ok := s.Dirs[ctrl]
		if !ok {
			snap.Errors = append(snap.Errors, ctrl+": controller not in /proc/<pid>/cgroup")
			return "", false
		}
		p := path.Join(dir, name)
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			snap.Errors = append(snap.Errors, fmt.Sprintf("%s: %v", p, err))
			return "", false
		}
		v := strings.TrimSpace(string(data))
		if name != "memory.stat" {
			snap.Files[p] = v
		}
		return v, true
	}
	num := func(ctrl, name string) *int64 {
		v, ok := read(ctrl, name)
		if !ok {
			return nil
		}
		return limit(v)
	}
	key := func(ctrl, name, k string) *int64 {
		v, ok := read(ctrl, name)
		if !ok {
			return nil
		}
		return keyed(v, k)
	}
	if s.Version == 1 {
		snap.MemoryLimitBytes = num("memory", "memory.limit_in_bytes")
		snap.MemorySwapLimitBytes = num("memory", "memory.memsw.limit_in_bytes")
		snap.MemoryUsageBytes = num("memory", "memory.usage_in_bytes")
		snap.PeakUsageBytes = num("memory", "memory.max_usage_in_bytes")
		snap.FailCount = num("memory", "memory.failcnt")
		snap.MemSwapFailCount = num("memory", "memory.memsw.failcnt")
		if oc, ok := read("memory", "memory.oom_control"); ok {
			snap.OOMEvents, snap.OOMKills = keyed(oc, "under_oom"), keyed(oc, "oom_kill")
		}
		snap.ShmemBytes = key("memory", "memory.stat", "shmem")
		snap.CPUQuotaMicros = num("cpu", "cpu.cfs_quota_us")
		snap.CPUPeriodMicros = num("cpu", "cpu.cfs_period_us")
	} else {
		snap.MemoryLimitBytes = num("memory", "memory.max")
		snap.MemorySwapLimitBytes = num("memory", "memory.swap.max")
		snap.MemoryUsageBytes = num("memory", "memory.current")
		snap.PeakUsageBytes = num("memory", "memory.peak")
		if ev, ok := read("memory", "memory.events"); ok {
			snap.MaxEvents, snap.OOMEvents, snap.OOMKills = keyed(ev, "max"), keyed(ev, "oom"), keyed(ev, "oom_kill")
		}
		snap.ShmemBytes = key("memory", "memory.stat", "shmem")
		if cm, ok := read("cpu", "cpu.max"); ok {
			if f := strings.Fields(cm); len(f) == 2 {
				snap.CPUQuotaMicros, snap.CPUPeriodMicros = limit(f[0]), limit(f[1])
			}
		}
	}
	snap.PidsMax = num("pids", "pids.max")
	snap.PidsCurrent = num("pids", "pids.current")
	snap.PidsMaxEvents = key("pids", "pids.events", "max")
	if s.Version == 2 {
		// Absent before Linux 6.11: not an error there.
		if dir, ok := s.Dirs["pids"]; ok {
			p := path.Join(dir, "pids.events.local")
			if data, err := fs.ReadFile(fsys, p); err == nil {
				v := strings.TrimSpace(string(data))
				snap.Files[p] = v
				snap.PidsMaxEventsLocal = keyed(v, "max")
			} else if !errors.Is(err, fs.ErrNotExist) {
				snap.Errors = append(snap.Errors, fmt.Sprintf("%s: %v", p, err))
			}
		}
	}
	if procs, ok := read("memory", "cgroup.procs"); ok {
		snap.Procs = pids(procs)
	}
	return snap
}

// OOMKills reads only the scope's oom_kill counter: memory.oom_control
// oom_kill (v1) or memory.events oom_kill (v2). It is cheap enough to
// poll while a scope is being torn down.
func (s Scope) OOMKills(fsys fs.FS) (int64, error) {
	dir, ok := s.Dirs["memory"]
	if !ok {
		return 0, errors.New("observer: no memory scope")
	}
	name := "memory.events"
	if s.Version == 1 {
		name = "memory.oom_control"
	}
	data, err := fs.ReadFile(fsys, path.Join(dir, name))
	if err != nil {
		return 0, err
	}
	v := keyed(string(data), "oom_kill")
	if v == nil {
		return 0, fmt.Errorf("observer: /%s/%s has no oom_kill", dir, name)
	}
	return *v, nil
}

// limit parses a number; "max", negative values and the v1 page-counter
// maximum are nil (unlimited), as is anything unparsable.
func limit(v string) *int64 {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n >= v1Unlimited {
		return nil
	}
	return &n
}

// keyed returns the value of "<k> <n>" in a flat-keyed file.
func keyed(content, k string) *int64 {
	for line := range strings.SplitSeq(content, "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == k {
			if n, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				return &n
			}
		}
	}
	return nil
}

func pids(content string) []int {
	out := []int{}
	for f := range strings.FieldsSeq(content) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// Absence is the state of a scope after cleanup.
type Absence struct {
	// Gone is true when every directory of the scope is absent and the
	// keeper is not alive.
	Gone bool `json:"gone"`
	// Empty is true when every remaining directory has no process in
	// cgroup.procs (and, on v1, tasks) and the keeper is not alive.
	Empty bool `json:"empty"`
	// Keeper is "alive" when /proc/<pid> still shows the keeper (same
	// start time), "exited" when it does not (absent, or the PID was
	// reused), or "unreadable: <error>".
	Keeper string `json:"keeper"`
	// Dirs maps each directory to "absent", "empty" or "procs: <pids>".
	Dirs map[string]string `json:"dirs"`
}

// OK reports whether the scope is gone or empty.
func (a Absence) OK() bool { return a.Gone || a.Empty }

func (a Absence) String() string {
	switch {
	case a.Gone:
		return "gone"
	case a.Empty:
		return "empty"
	case a.Keeper != "" && a.Keeper != "exited":
		return "occupied (keeper " + a.Keeper + ")"
	}
	return "occupied"
}

// Absence checks, without waiting, that the keeper has exited and every
// directory of s is gone or has no processes. A keeper still alive (its
// /proc/<pid> with the start time seen at Resolve) is never gone or empty,
// whatever the directories say.
func (s Scope) Absence(fsys fs.FS) Absence {
	a := Absence{Gone: true, Empty: true, Keeper: "exited", Dirs: map[string]string{}}
	if len(s.Dirs) == 0 {
		a.Gone, a.Empty, a.Keeper = false, false, "unresolved scope"
		return a
	}
	switch st, err := StartTime(fsys, s.PID); {
	case err == nil && st == s.StartTime:
		a.Keeper = "alive"
	case err == nil, errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ESRCH):
		// exited (ESRCH: while being read), or the PID now belongs to a
		// later process
	default:
		a.Keeper = "unreadable: " + err.Error()
	}
	seen := map[string]bool{}
	for _, c := range controllers {
		dir, ok := s.Dirs[c]
		if !ok || seen[dir] {
			continue
		}
		seen[dir] = true
		if _, err := fs.Stat(fsys, dir); errors.Is(err, fs.ErrNotExist) {
			a.Dirs[dir] = "absent"
			continue
		}
		a.Gone = false
		var procs []int
		files := []string{"cgroup.procs"}
		if s.Version == 1 {
			files = append(files, "tasks")
		}
		for _, f := range files {
			data, err := fs.ReadFile(fsys, path.Join(dir, f))
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed between the stat and the read
			}
			if err != nil {
				a.Empty = false
				a.Dirs[dir] = "unreadable: " + err.Error()
				continue
			}
			procs = append(procs, pids(string(data))...)
		}
		if _, bad := a.Dirs[dir]; bad {
			continue
		}
		if len(procs) > 0 {
			a.Empty = false
			a.Dirs[dir] = fmt.Sprintf("procs: %v", procs)
		} else {
			a.Dirs[dir] = "empty"
		}
	}
	if a.Gone {
		a.Empty = true
	}
	if a.Keeper != "exited" {
		a.Gone, a.Empty = false, false
	}
	return a
}

// WaitAbsent polls s.Absence every interval until it is OK or ctx ends,
// and returns the last reading.
func (s Scope) WaitAbsent(ctx context.Context, fsys fs.FS, interval time.Duration) Absence {
	for {
		a := s.Absence(fsys)
		if a.OK() {
			return a
		}
		select {
		case <-ctx.Done():
			return a
		case <-time.After(interval):
		}
	}
}

// KeeperPID resolves a running container's keeper (PID 1) host PID through
// the Engine: the one Engine call the observer makes, before any reading.
func KeeperPID(ctx context.Context, cli *client.Client, containerID string) (int, error) {
	res, err := cli.ContainerInspect(ctx, containerID, client.ContainerInspectOptions{})
	if err != nil {
		return 0, fmt.Errorf("observer: inspect container %s: %w", containerID, err)
	}
	st := res.Container.State
	if st == nil || !st.Running || st.Pid <= 0 {
		return 0, fmt.Errorf("observer: container %s is not running", containerID)
	}
	return st.Pid, nil
}
