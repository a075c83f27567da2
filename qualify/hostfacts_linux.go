package qualify

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/qualbox/qualbox/qualify/evidence"
)

// HostFacts reads the controller host's kernel, init, AppArmor and cgroup
// facts under root (the file system root, "/" outside tests). It returns
// nil on a controller that is not Linux (hostfacts_other.go). Each command it runs
// (`systemctl --version`, `apparmor_parser --version`) is bounded by ctx
// and by 5 s; a fact that cannot be read is "".
func HostFacts(ctx context.Context, root string) *evidence.Host {
	at := func(p string) string { return filepath.Join(root, p) }
	h := &evidence.Host{
		Kernel:      readLine(at("proc/sys/kernel/osrelease")),
		KernelBuild: readLine(at("proc/sys/kernel/version")),
		LSM:         readLine(at("sys/kernel/security/lsm")),
	}
	if readLine(at("proc/1/comm")) == "systemd" {
		h.Systemd = firstLine(ctx, "systemctl", "--version")
	}
	switch readLine(at("sys/module/apparmor/parameters/enabled")) {
	case "Y":
		h.AppArmor = "enabled"
	case "":
		h.AppArmor = "absent"
	default:
		h.AppArmor = "disabled"
	}
	if v := firstLine(ctx, "apparmor_parser", "--version"); v != "" {
		h.AppArmor += ", " + v
	}
	h.Cgroup, h.CgroupControllers = cgroupFacts(at("sys/fs/cgroup"))
	h.BinfmtMisc, h.BinfmtHandlers = binfmtHandlers(at("proc/sys/fs/binfmt_misc"))
	for _, b := range h.BinfmtHandlers {
		h.Binfmt = append(h.Binfmt, b.String())
	}
	return h
}

// binfmtHandlers reads the binfmt_misc file system at dir: its state
// (Host.BinfmtMisc: the status file's "enabled" or "disabled", "not
// mounted" where dir has no status file, "unreadable (...)" naming a
// file that could not be read) and its enabled handlers, sorted by name
// (Host.BinfmtHandlers). A handler that cannot be read, or whose file is
// over 4 KiB, makes the state unreadable: the list would be incomplete.
func binfmtHandlers(dir string) (string, []evidence.BinfmtHandler) {
	status, err := os.ReadFile(filepath.Join(dir, "status"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "not mounted", nil
	case err != nil:
		return unreadable("status", err), nil
	}
	state := strings.TrimSpace(string(status))
	if state != evidence.BinfmtEnabled && state != evidence.BinfmtDisabled {
		return fmt.Sprintf("unreadable (status says %.40q)", state), nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return unreadable(".", err), nil
	}
	var out []evidence.BinfmtHandler
	for _, e := range entries {
		if e.Name() == "register" || e.Name() == "status" || e.IsDir() {
			continue
		}
		data, err := readSmall(filepath.Join(dir, e.Name()), 4096)
		if err != nil {
			return unreadable(e.Name(), err), out
		}
		h := evidence.BinfmtHandler{Name: e.Name()}
		var enabled bool
		for _, line := range strings.Split(string(data), "\n") {
			key, val, _ := strings.Cut(line, " ")
			switch {
			case line == "enabled":
				enabled = true
			case key == "interpreter":
				h.Interpreter = val
			case strings.HasPrefix(line, "flags:"):
				h.Flags = strings.TrimSpace(strings.TrimPrefix(line, "flags:"))
			case key == "offset":
				h.Offset, _ = strconv.Atoi(val)
			case key == "magic":
				h.Magic = val
			case key == "mask":
				h.Mask = val
			}
		}
		if enabled {
			out = append(out, h)
		}
	}
	slices.SortFunc(out, func(a, b evidence.BinfmtHandler) int { return strings.Compare(a.Name, b.Name) })
	return state, out
}

// unreadable renders a binfmt_misc file's read error as Host.BinfmtMisc
// states it: "unreadable (NAME: ERRNO)", the errno's name where there is
// one.
func unreadable(name string, err error) string {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return fmt.Sprintf("unreadable (%s: %s)", name, unix.ErrnoName(errno))
	}
	return fmt.Sprintf("unreadable (%s: %v)", name, err)
}

// readSmall reads a file of at most limit bytes; a longer one is an
// error.
func readSmall(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(data)) > limit {
		err = fmt.Errorf("over %d bytes", limit)
	}
	return data, err
}

// cgroupFacts names the cgroup version mounted at dir and its
// controllers: cgroup.controllers of a unified hierarchy, or the v1
// hierarchies' directory names.
func cgroupFacts(dir string) (version, controllers string) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return "", ""
	}
	switch st.Type {
	case unix.CGROUP2_SUPER_MAGIC:
		return "2", readLine(filepath.Join(dir, "cgroup.controllers"))
	case unix.TMPFS_MAGIC, unix.CGROUP_SUPER_MAGIC:
		// v1: a tmpfs holding one mount per hierarchy.
	default:
		return "", ""
	}
	version = "1"
	var un unix.Statfs_t
	if unix.Statfs(filepath.Join(dir, "unified"), &un) == nil && un.Type == unix.CGROUP2_SUPER_MAGIC {
		version += " hybrid"
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return version, ""
	}
	var names []string
	for _, e := range entries {
		// Hierarchies are directories; co-mounted ones ("cpu,cpuacct")
		// also appear as symlinks to them, which are skipped.
		if e.IsDir() && e.Name() != "unified" && e.Name() != "systemd" {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return version, strings.Join(names, " ")
}

// readLine returns the first line of a small kernel file, trimmed; "" when
// it cannot be read.
func readLine(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if sc.Scan() {
		return strings.TrimSpace(sc.Text())
	}
	return ""
}

// firstLine runs name with args for at most 5 s and returns the first
// line it printed; "" when it is not installed or fails.
func firstLine(ctx context.Context, name string, args ...string) string {
	if _, err := exec.LookPath(name); err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).Output()
	if err != nil {
		return ""
	}
	line, _, _ := bytes.Cut(out, []byte("\n"))
	return strings.TrimSpace(string(line))
}
