package facts

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ParseStatus extracts Status from /proc/<pid>/status content. It returns an
// error naming the first required field (Cap*, NoNewPrivs, Seccomp) that is
// missing or malformed.
func ParseStatus(data []byte) (Status, error) {
	fields := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	s := Status{SeccompFilters: -1}
	for _, c := range []struct {
		key string
		dst *string
	}{{"CapInh", &s.CapInh}, {"CapPrm", &s.CapPrm}, {"CapEff", &s.CapEff}, {"CapBnd", &s.CapBnd}, {"CapAmb", &s.CapAmb}} {
		v, ok := fields[c.key]
		if !ok {
			return Status{}, fmt.Errorf("status: %s missing", c.key)
		}
		if _, err := strconv.ParseUint(v, 16, 64); err != nil || len(v) != 16 {
			return Status{}, fmt.Errorf("status: %s %q is not a 16-digit hex mask", c.key, v)
		}
		*c.dst = v
	}
	for _, c := range []struct {
		key      string
		dst      *int
		optional bool
	}{{"NoNewPrivs", &s.NoNewPrivs, false}, {"Seccomp", &s.Seccomp, false}, {"Seccomp_filters", &s.SeccompFilters, true}} {
		v, ok := fields[c.key]
		if !ok {
			if c.optional {
				continue
			}
			return Status{}, fmt.Errorf("status: %s missing", c.key)
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return Status{}, fmt.Errorf("status: %s %q is not a number", c.key, v)
		}
		*c.dst = n
	}
	return s, nil
}

// MountinfoEntry is one line of /proc/<pid>/mountinfo (proc(5)).
type MountinfoEntry struct {
	ID, ParentID int
	// MajorMinor is the device, "major:minor".
	MajorMinor string
	// Root is the mounted directory within the filesystem.
	Root string
	// MountPoint is the mount point, octal escapes decoded.
	MountPoint   string
	MountOptions []string
	// Optional are the optional fields, for example "shared:1".
	Optional     []string
	FSType       string
	Source       string
	SuperOptions []string
}

// ParseMountinfo parses /proc/<pid>/mountinfo content, in file order. It
// returns an error naming the line number of a malformed line.
func ParseMountinfo(data []byte) ([]MountinfoEntry, error) {
	var entries []MountinfoEntry
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" {
			continue
		}
		fields := strings.Fields(line)
		sep := -1
		for i := 6; i < len(fields); i++ {
			if fields[i] == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 10 || sep < 0 || len(fields) < sep+4 {
			return nil, fmt.Errorf("mountinfo: line %d: malformed %q", n, line)
		}
		id, err1 := strconv.Atoi(fields[0])
		parent, err2 := strconv.Atoi(fields[1])
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("mountinfo: line %d: %w", n, err)
		}
		entries = append(entries, MountinfoEntry{
			ID:           id,
			ParentID:     parent,
			MajorMinor:   fields[2],
			Root:         unescape(fields[3]),
			MountPoint:   unescape(fields[4]),
			MountOptions: strings.Split(fields[5], ","),
			Optional:     fields[6:sep],
			FSType:       fields[sep+1],
			Source:       unescape(fields[sep+2]),
			SuperOptions: strings.Split(fields[sep+3], ","),
		})
	}
	return entries, sc.Err()
}

// unescape decodes the kernel's octal escapes (\040 for space, ...).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Covering returns the mount that covers p: the last-mounted entry whose
// mount point is p or its nearest ancestor. found is false when none does.
func Covering(entries []MountinfoEntry, p string) (m Mount) {
	p = path.Clean(p)
	m.Path = p
	best := -1
	for i, e := range entries {
		mp := path.Clean(e.MountPoint)
		if mp != p && mp != "/" && !strings.HasPrefix(p, mp+"/") {
			continue
		}
		if best < 0 || len(mp) >= len(path.Clean(entries[best].MountPoint)) {
			best = i
		}
	}
	if best < 0 {
		return m
	}
	e := entries[best]
	m.Found = true
	m.MountPoint = e.MountPoint
	m.FSType = e.FSType
	m.Source = e.Source
	m.MountOptions = e.MountOptions
	m.SuperOptions = e.SuperOptions
	for _, list := range [][]string{e.MountOptions, e.SuperOptions} {
		for _, o := range list {
			k, v, _ := strings.Cut(o, "=")
			switch k {
			case "ro":
				m.ReadOnly = true
			case "nosuid":
				m.NoSuid = true
			case "nodev":
				m.NoDev = true
			case "noexec":
				m.NoExec = true
			case "size":
				m.Size = v
			case "mode":
				m.Mode = v
			case "uid":
				m.UID = v
			case "gid":
				m.GID = v
			}
		}
	}
	m.SizeBytes, _ = ParseSize(m.Size)
	return m
}

// ParseSize parses a tmpfs size as the kernel prints it: bytes with an
// optional k, m or g suffix (binary multiples).
func ParseSize(s string) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "k"):
		mult = 1 << 10
	case strings.HasSuffix(s, "m"):
		mult = 1 << 20
	case strings.HasSuffix(s, "g"):
		mult = 1 << 30
	}
	if mult != 1 {
		s = s[:len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("size %q is not a byte count", s)
	}
	return n * mult, nil
}

// v1Unlimited is the smallest value treated as "no limit" in cgroup v1
// files; the kernel prints its page-counter maximum, 9223372036854771712
// with 4 KiB pages.
const v1Unlimited = int64(1) << 62

// ParseLimit parses one cgroup limit value: "max" and "-1" (v1 CFS quota)
// are unlimited (nil), as are v1 values from 2^62 up.
func ParseLimit(s string) (*int64, error) {
	s = strings.TrimSpace(s)
	if s == "max" || s == "-1" {
		return nil, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("cgroup limit %q is not a number or max", s)
	}
	if n >= v1Unlimited {
		return nil, nil
	}
	return &n, nil
}

// ReadCgroup reads the limits from a cgroup filesystem root (normally
// os.DirFS("/sys/fs/cgroup") inside the sandbox, where the sandbox's own
// cgroup is the root). Unreadable files are recorded in Files, not
// returned as errors; the error reports malformed content.
func ReadCgroup(fsys fs.FS) (Cgroup, error) {
	c := Cgroup{Files: map[string]string{}}
	read := func(name string) (string, bool) {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			c.Files[name] = "error: " + err.Error()
			return "", false
		}
		v := strings.TrimSpace(string(data))
		c.Files[name] = v
		return v, true
	}
	var errs []error
	limit := func(name string) *int64 {
		v, ok := read(name)
		if !ok {
			return nil
		}
		n, err := ParseLimit(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
		return n
	}
	if _, err := fs.Stat(fsys, "cgroup.controllers"); err == nil {
		c.Version = 2
		c.MemoryLimitBytes = limit("memory.max")
		c.SwapLimitBytes = limit("memory.swap.max")
		if c.MemoryLimitBytes != nil && c.SwapLimitBytes != nil {
			sum := *c.MemoryLimitBytes + *c.SwapLimitBytes
			c.MemoryAndSwapLimitBytes = &sum
		}
		c.PidsMax = limit("pids.max")
		if v, ok := read("cpu.max"); ok {
			quota, period, _ := strings.Cut(v, " ")
			var err1, err2 error
			c.CPUQuotaMicros, err1 = ParseLimit(quota)
			c.CPUPeriodMicros, err2 = ParseLimit(period)
			if err := errors.Join(err1, err2); err != nil {
				errs = append(errs, fmt.Errorf("cpu.max: %w", err))
			}
		}
		return c, errors.Join(errs...)
	}
	if _, err := fs.Stat(fsys, "memory"); err != nil {
		if _, err := fs.Stat(fsys, "pids"); err != nil {
			return c, nil // No cgroup filesystem visible.
		}
	}
	c.Version = 1
	c.MemoryLimitBytes = limit("memory/memory.limit_in_bytes")
	c.MemoryAndSwapLimitBytes = limit("memory/memory.memsw.limit_in_bytes")
	if c.MemoryLimitBytes != nil && c.MemoryAndSwapLimitBytes != nil {
		swap := *c.MemoryAndSwapLimitBytes - *c.MemoryLimitBytes
		c.SwapLimitBytes = &swap
	}
	c.PidsMax = limit("pids/pids.max")
	cpu := "cpu"
	if _, err := fs.Stat(fsys, cpu); err != nil {
		cpu = "cpu,cpuacct"
	}
	c.CPUQuotaMicros = limit(cpu + "/cpu.cfs_quota_us")
	c.CPUPeriodMicros = limit(cpu + "/cpu.cfs_period_us")
	return c, errors.Join(errs...)
}

// ParseLSMAttr trims an LSM attribute file's content (/proc/self/attr/
// current): the kernel ends it with a newline, and some LSMs with a NUL.
func ParseLSMAttr(data []byte) string {
	return strings.TrimRight(string(data), "\x00\n")
}

// AtCgroupNamespaceRoot reports whether every hierarchy line of
// /proc/self/cgroup ("ID:CONTROLLERS:PATH") shows the path "/": the
// process's cgroup is the root of its cgroup namespace, as in a container
// created with a private cgroup namespace. In the host's namespace the
// paths name the container's cgroup ("/system.slice/docker-<id>.scope",
// "/docker/<id>"). It is false for empty or malformed content.
func AtCgroupNamespaceRoot(procSelfCgroup string) bool {
	lines := strings.Split(strings.TrimRight(procSelfCgroup, "\n"), "\n")
	for _, l := range lines {
		parts := strings.SplitN(l, ":", 3)
		if len(parts) != 3 || parts[2] != "/" {
			return false
		}
	}
	return len(lines) > 0 && lines[0] != ""
}

// OutcomeOf describes err with its symbolic errno ("EROFS", "ENOSPC", ...)
// when it carries one; an fs.ErrNotExist without one is "ENOENT".
func OutcomeOf(err error) Outcome {
	if err == nil {
		return Outcome{OK: true}
	}
	o := Outcome{Error: err.Error()}
	var errno syscall.Errno
	switch {
	case errors.As(err, &errno):
		o.Errno = unix.ErrnoName(errno)
	case errors.Is(err, fs.ErrNotExist):
		o.Errno = "ENOENT"
	}
	return o
}

// ReadSysctl reads the sysctl file name (an absolute /proc/sys path) from
// fsys, the root filesystem (os.DirFS("/") in the probe): its trimmed
// value, or why it could not be read.
func ReadSysctl(fsys fs.FS, name string) Sysctl {
	s := Sysctl{Path: name}
	data, err := fs.ReadFile(fsys, strings.TrimPrefix(name, "/"))
	s.Read = OutcomeOf(err)
	if err == nil {
		s.Value = strings.TrimSpace(string(data))
	}
	return s
}
