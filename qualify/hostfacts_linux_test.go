package qualify_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/qualify"
	"github.com/qualbox/qualbox/qualify/evidence"
)

// HostFacts on this host agrees with what the kernel reports through
// other interfaces: uname(2) for the kernel, statfs(2) for the cgroup
// hierarchy, PID 1's name for the init.
func TestHostFactsOfThisHost(t *testing.T) {
	h := qualify.HostFacts(context.Background(), "/")
	assert.Assert(t, h != nil)
	var u unix.Utsname
	assert.NilError(t, unix.Uname(&u))
	assert.Check(t, is.Equal(h.Kernel, unix.ByteSliceToString(u.Release[:])))
	assert.Check(t, is.Equal(h.KernelBuild, unix.ByteSliceToString(u.Version[:])))

	var st unix.Statfs_t
	assert.NilError(t, unix.Statfs("/sys/fs/cgroup", &st))
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		assert.Check(t, is.Equal(h.Cgroup, "2"))
		assert.Check(t, strings.Contains(h.CgroupControllers, "memory"), "controllers %q", h.CgroupControllers)
	} else {
		assert.Check(t, strings.HasPrefix(h.Cgroup, "1"), "cgroup %q", h.Cgroup)
		assert.Check(t, strings.Contains(" "+h.CgroupControllers+" ", " memory "), "controllers %q", h.CgroupControllers)
	}
	comm, _ := os.ReadFile("/proc/1/comm")
	if strings.TrimSpace(string(comm)) == "systemd" {
		assert.Check(t, strings.HasPrefix(h.Systemd, "systemd "), "systemd %q", h.Systemd)
	} else {
		assert.Check(t, is.Equal(h.Systemd, ""), "PID 1 is %q, not systemd", comm)
	}
	_, err := os.Stat("/sys/module/apparmor/parameters/enabled")
	assert.Check(t, (err == nil) == !strings.HasPrefix(h.AppArmor, "absent"), "appArmor %q, module parameter: %v", h.AppArmor, err)
	// binfmt_misc's state is its status file's, or "not mounted" where
	// statfs(2) finds no binfmt_misc file system.
	var bst unix.Statfs_t
	if unix.Statfs("/proc/sys/fs/binfmt_misc", &bst) == nil && bst.Type == unix.BINFMTFS_MAGIC {
		status, err := os.ReadFile("/proc/sys/fs/binfmt_misc/status")
		assert.NilError(t, err)
		assert.Check(t, is.Equal(h.BinfmtMisc, strings.TrimSpace(string(status))))
	} else {
		assert.Check(t, is.Equal(h.BinfmtMisc, "not mounted"))
		assert.Check(t, is.Len(h.BinfmtHandlers, 0))
	}
}

// Facts read from a root whose files say something else are that root's:
// each is read where its doc comment says, and what is missing is "" (an
// unmounted cgroup directory gives no version at all, not "1").
func TestHostFactsReadTheirFiles(t *testing.T) {
	root := t.TempDir()
	write := func(p, content string) {
		t.Helper()
		assert.NilError(t, os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755))
		assert.NilError(t, os.WriteFile(filepath.Join(root, p), []byte(content), 0o644))
	}
	write("proc/sys/kernel/osrelease", "6.12.57+deb13-amd64\n")
	write("proc/sys/kernel/version", "#1 SMP PREEMPT_DYNAMIC Debian 6.12.57-1 (2026-11-01)\n")
	write("sys/kernel/security/lsm", "lockdown,capability,landlock,yama,apparmor\n")
	write("sys/module/apparmor/parameters/enabled", "N\n")
	write("proc/1/comm", "bash\n")
	assert.NilError(t, os.MkdirAll(filepath.Join(root, "sys/fs/cgroup"), 0o755))
	// binfmt_misc as the kernel shows it: register and status are not
	// handlers, a disabled handler is left out.
	write("proc/sys/fs/binfmt_misc/register", "")
	write("proc/sys/fs/binfmt_misc/status", "enabled\n")
	write("proc/sys/fs/binfmt_misc/qemu-x86_64", "enabled\ninterpreter /usr/bin/qemu-x86_64-static\nflags: F\noffset 0\n"+
		"magic 7f454c4602010100000000000000000002003e00\nmask fffffffffffefe00fffffffffffffffffeffffff\n")
	write("proc/sys/fs/binfmt_misc/qemu-riscv64", "disabled\ninterpreter /usr/bin/qemu-riscv64-static\nflags: F\n")
	h := qualify.HostFacts(context.Background(), root)
	assert.Check(t, is.Equal(h.BinfmtMisc, "enabled"))
	assert.Check(t, is.DeepEqual(h.Binfmt, []string{"qemu-x86_64 /usr/bin/qemu-x86_64-static flags F"}))
	assert.Check(t, is.DeepEqual(h.BinfmtHandlers, []evidence.BinfmtHandler{{Name: "qemu-x86_64", Interpreter: "/usr/bin/qemu-x86_64-static", Flags: "F",
		Magic: "7f454c4602010100000000000000000002003e00", Mask: "fffffffffffefe00fffffffffffffffffeffffff"}}))
	assert.Check(t, is.Equal(h.BinfmtHandlers[0].ELFArchitecture(), "amd64"))
	assert.Check(t, is.Equal(h.Kernel, "6.12.57+deb13-amd64"))
	assert.Check(t, is.Equal(h.KernelBuild, "#1 SMP PREEMPT_DYNAMIC Debian 6.12.57-1 (2026-11-01)"))
	assert.Check(t, is.Equal(h.LSM, "lockdown,capability,landlock,yama,apparmor"))
	assert.Check(t, strings.HasPrefix(h.AppArmor, "disabled"), "appArmor %q", h.AppArmor)
	assert.Check(t, is.Equal(h.Systemd, ""))
	assert.Check(t, is.Equal(h.Cgroup, ""))
	assert.Check(t, is.Equal(h.CgroupControllers, ""))
}

// binfmt_misc's state tells a host without handlers ("enabled" and none
// listed) from one whose handlers could not be read: not mounted (the
// procfs directory is empty then), a status file or handler that cannot
// be read, or a status that says neither state.
func TestHostFactsBinfmtState(t *testing.T) {
	const handler = "enabled\ninterpreter /usr/bin/qemu-aarch64-static\nflags: F\noffset 0\n" +
		"magic 7f454c460201010000000000000000000200b700\nmask ffffffffffffff00fffffffffffffffffeffffff\n"
	for _, tc := range []struct {
		name     string
		setup    func(t *testing.T, dir string)
		state    string
		handlers int
	}{
		{"no handlers", func(t *testing.T, dir string) {
			writeBinfmtFile(t, dir, "status", "enabled\n")
			writeBinfmtFile(t, dir, "register", "")
		}, "enabled", 0},
		{"disabled", func(t *testing.T, dir string) {
			writeBinfmtFile(t, dir, "status", "disabled\n")
			writeBinfmtFile(t, dir, "qemu-aarch64", handler)
		}, "disabled", 1},
		{"not mounted", func(t *testing.T, dir string) {}, "not mounted", 0},
		{"status unreadable", func(t *testing.T, dir string) { assert.NilError(t, os.Mkdir(filepath.Join(dir, "status"), 0o755)) }, "unreadable (status: EISDIR)", 0},
		{"status says something else", func(t *testing.T, dir string) { writeBinfmtFile(t, dir, "status", "maybe\n") }, `unreadable (status says "maybe")`, 0},
		{"handler unreadable", func(t *testing.T, dir string) {
			writeBinfmtFile(t, dir, "status", "enabled\n")
			assert.NilError(t, os.Symlink("gone", filepath.Join(dir, "qemu-x86_64")))
		}, "unreadable (qemu-x86_64: ENOENT)", 0},
		{"handler too long", func(t *testing.T, dir string) {
			writeBinfmtFile(t, dir, "status", "enabled\n")
			writeBinfmtFile(t, dir, "qemu-aarch64", handler+strings.Repeat("#", 4096))
		}, "unreadable (qemu-aarch64: over 4096 bytes)", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "proc/sys/fs/binfmt_misc")
			assert.NilError(t, os.MkdirAll(dir, 0o755))
			tc.setup(t, dir)
			h := qualify.HostFacts(context.Background(), root)
			assert.Check(t, is.Equal(h.BinfmtMisc, tc.state))
			assert.Check(t, is.Len(h.BinfmtHandlers, tc.handlers))
			assert.Check(t, is.Len(h.Binfmt, tc.handlers))
		})
	}
}

// writeBinfmtFile writes a file of a fake binfmt_misc directory.
func writeBinfmtFile(t *testing.T, dir, name, content string) {
	t.Helper()
	assert.NilError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
}
