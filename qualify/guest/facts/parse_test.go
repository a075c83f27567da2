package facts

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

const recorded = "testdata/docker-20.10-cgroupv1/"

func read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	assert.NilError(t, err)
	return b
}

func ptr(v int64) *int64 { return &v }

func TestParseStatusRecorded(t *testing.T) {
	s, err := ParseStatus(read(t, recorded+"status"))
	assert.NilError(t, err)
	zero := "0000000000000000"
	assert.DeepEqual(t, s, Status{
		CapInh: zero, CapPrm: zero, CapEff: zero, CapBnd: zero, CapAmb: zero,
		NoNewPrivs: 1, Seccomp: 2, SeccompFilters: 1,
	})
}

func TestParseStatusErrors(t *testing.T) {
	for _, tc := range []struct{ name, data, err string }{
		{"missing cap", "CapInh:\t0000000000000000\n", "status: CapPrm missing"},
		{"bad mask", "CapInh:\t00zz\n", `status: CapInh "00zz" is not a 16-digit hex mask`},
		{"missing seccomp", "CapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\nNoNewPrivs:\t0\n", "status: Seccomp missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseStatus([]byte(tc.data))
			assert.Error(t, err, tc.err)
		})
	}
	// Kernels before 5.9 have no Seccomp_filters.
	s, err := ParseStatus([]byte("CapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\n"))
	assert.NilError(t, err)
	assert.Equal(t, s.SeccompFilters, -1)
}

func TestCoveringRecorded(t *testing.T) {
	entries, err := ParseMountinfo(read(t, recorded+"mountinfo"))
	assert.NilError(t, err)
	tmpfs := func(p string) Mount {
		return Mount{
			Path: p, Found: true, MountPoint: p, FSType: "tmpfs", Source: "tmpfs",
			MountOptions: []string{"rw", "nosuid", "nodev", "noexec", "relatime"},
			SuperOptions: []string{"rw", "size=16384k", "mode=700", "uid=65534", "gid=65534"},
			NoSuid:       true, NoDev: true, NoExec: true,
			Size: "16384k", Mode: "700", UID: "65534", GID: "65534", SizeBytes: 16 << 20,
		}
	}
	for _, p := range []string{"/tmp", "/home/sandbox"} {
		assert.DeepEqual(t, Covering(entries, p), tmpfs(p))
	}
	ignoreOptions := cmp.FilterPath(func(p cmp.Path) bool {
		return p.Last().String() == ".SuperOptions"
	}, cmp.Ignore())
	for _, p := range []string{"/", "/workspace", "/workspace/work/../work"} {
		got := Covering(entries, p)
		want := Mount{Path: cleanPath(p), Found: true, MountPoint: "/", FSType: "overlay", Source: "overlay",
			MountOptions: []string{"ro", "relatime"}, ReadOnly: true}
		if diff := cmp.Diff(want, got, ignoreOptions); diff != "" {
			t.Errorf("Covering(%q) (-want +got):\n%s", p, diff)
		}
	}
	cg := Covering(entries, "/sys/fs/cgroup/memory/memory.max")
	assert.Check(t, is.Equal(cg.MountPoint, "/sys/fs/cgroup/memory"))
	assert.Check(t, cg.ReadOnly)
}

func cleanPath(p string) string {
	if p == "/workspace/work/../work" {
		return "/workspace/work"
	}
	return p
}

func TestParseMountinfoEscapesAndErrors(t *testing.T) {
	entries, err := ParseMountinfo([]byte("36 35 98:0 /mnt1 /mnt\\040two rw,noatime master:1 shared:2 - ext3 /dev/root rw,errors=continue\n"))
	assert.NilError(t, err)
	assert.DeepEqual(t, entries, []MountinfoEntry{{
		ID: 36, ParentID: 35, MajorMinor: "98:0", Root: "/mnt1", MountPoint: "/mnt two",
		MountOptions: []string{"rw", "noatime"}, Optional: []string{"master:1", "shared:2"},
		FSType: "ext3", Source: "/dev/root", SuperOptions: []string{"rw", "errors=continue"},
	}})
	assert.Check(t, !Covering(nil, "/").Found)

	_, err = ParseMountinfo([]byte("1 2 3:4 / / rw\n"))
	assert.ErrorContains(t, err, "mountinfo: line 1: malformed")
}

func TestReadCgroupV1Recorded(t *testing.T) {
	c, err := ReadCgroup(os.DirFS(recorded + "cgroupv1"))
	assert.NilError(t, err)
	assert.DeepEqual(t, c, Cgroup{
		Version:                 1,
		MemoryLimitBytes:        ptr(64 << 20),
		MemoryAndSwapLimitBytes: ptr(64 << 20),
		SwapLimitBytes:          ptr(0),
		PidsMax:                 ptr(64),
		CPUQuotaMicros:          ptr(100000),
		CPUPeriodMicros:         ptr(100000),
		Files: map[string]string{
			"memory/memory.limit_in_bytes":       "67108864",
			"memory/memory.memsw.limit_in_bytes": "67108864",
			"pids/pids.max":                      "64",
			"cpu/cpu.cfs_quota_us":               "100000",
			"cpu/cpu.cfs_period_us":              "100000",
		},
	})
}

func TestReadCgroupV1Unlimited(t *testing.T) {
	c, err := ReadCgroup(os.DirFS("testdata/unlimited-v1"))
	assert.NilError(t, err)
	assert.Check(t, is.Equal(c.Version, 1))
	assert.Check(t, c.MemoryLimitBytes == nil && c.MemoryAndSwapLimitBytes == nil && c.SwapLimitBytes == nil)
	assert.Check(t, c.PidsMax == nil && c.CPUQuotaMicros == nil)
	assert.Check(t, is.DeepEqual(c.CPUPeriodMicros, ptr(100000)))
	assert.Check(t, is.Equal(c.Files["cpu,cpuacct/cpu.cfs_quota_us"], "-1"))
}

func TestReadCgroupV2(t *testing.T) {
	c, err := ReadCgroup(os.DirFS("testdata/cgroupv2-sample"))
	assert.NilError(t, err)
	assert.DeepEqual(t, c, Cgroup{
		Version:                 2,
		MemoryLimitBytes:        ptr(64 << 20),
		MemoryAndSwapLimitBytes: ptr(64 << 20),
		SwapLimitBytes:          ptr(0),
		PidsMax:                 ptr(64),
		CPUQuotaMicros:          ptr(100000),
		CPUPeriodMicros:         ptr(100000),
		Files: map[string]string{
			"memory.max":      "67108864",
			"memory.swap.max": "0",
			"pids.max":        "64",
			"cpu.max":         "100000 100000",
		},
	})
}

func TestReadCgroupProblems(t *testing.T) {
	c, err := ReadCgroup(fstest.MapFS{
		"cgroup.controllers": {Data: []byte("memory pids\n")},
		"memory.max":         {Data: []byte("max\n")},
		"pids.max":           {Data: []byte("lots\n")},
	})
	assert.Error(t, err, `pids.max: cgroup limit "lots" is not a number or max`)
	assert.Check(t, c.MemoryLimitBytes == nil)
	assert.Check(t, is.Contains(c.Files["cpu.max"], "error: "))

	c, err = ReadCgroup(fstest.MapFS{})
	assert.NilError(t, err)
	assert.Equal(t, c.Version, 0)
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"16384k": 16 << 20, "64m": 64 << 20, "1g": 1 << 30, "512": 512} {
		got, err := ParseSize(in)
		assert.NilError(t, err)
		assert.Check(t, is.Equal(got, want), in)
	}
	_, err := ParseSize("12x")
	assert.ErrorContains(t, err, "not a byte count")
}

func TestParseLSMAttr(t *testing.T) {
	for in, want := range map[string]string{
		"docker-default (enforce)\n":     "docker-default (enforce)",
		"docker-default (enforce)\x00\n": "docker-default (enforce)",
		"unconfined\n":                   "unconfined",
		"":                               "",
	} {
		if got := ParseLSMAttr([]byte(in)); got != want {
			t.Errorf("ParseLSMAttr(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAtCgroupNamespaceRoot(t *testing.T) {
	for in, want := range map[string]bool{
		"0::/\n": true,
		"0::/":   true,
		"13:misc:/\n12:pids:/\n1:name=systemd:/\n0::/\n": true,
		"0::/system.slice/docker-0123.scope\n":           false,
		"12:pids:/docker/0123\n0::/\n":                   false,
		"":                                               false,
		"\n":                                             false,
		"garbage\n":                                      false,
	} {
		if got := AtCgroupNamespaceRoot(in); got != want {
			t.Errorf("AtCgroupNamespaceRoot(%q) = %v, want %v", in, got, want)
		}
	}
}

// A sysctl reads as its trimmed value; one the kernel does not have is
// recorded as absent with ENOENT, whether the error carries the errno
// (os.DirFS) or only fs.ErrNotExist (another fs.FS), and any other
// failure keeps its errno.
func TestReadSysctl(t *testing.T) {
	fsys := fstest.MapFS{
		"proc/sys/user/max_user_namespaces":         {Data: []byte("96369\n")},
		"proc/sys/kernel/unprivileged_userns_clone": {Data: []byte(" 0 \n")},
	}
	s := ReadSysctl(fsys, "/proc/sys/user/max_user_namespaces")
	assert.DeepEqual(t, s, Sysctl{Path: "/proc/sys/user/max_user_namespaces", Value: "96369", Read: Outcome{OK: true}})
	assert.Equal(t, s.String(), "96369")
	assert.Equal(t, ReadSysctl(fsys, "/proc/sys/kernel/unprivileged_userns_clone").String(), "0")

	absent := ReadSysctl(fsys, "/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
	assert.Equal(t, absent.Path, "/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
	assert.Check(t, !absent.Read.OK && absent.Value == "")
	assert.Equal(t, absent.Read.Errno, "ENOENT")
	assert.Equal(t, absent.String(), "absent (ENOENT)")

	dir := t.TempDir()
	onDisk := ReadSysctl(os.DirFS(dir), "/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
	assert.Equal(t, onDisk.Read.Errno, "ENOENT")

	assert.Equal(t, Sysctl{Read: OutcomeOf(&fs.PathError{Op: "open", Path: "x", Err: syscall.EACCES})}.String(), "unreadable (EACCES)")
	assert.Equal(t, Sysctl{Read: OutcomeOf(errors.New("short read"))}.String(), "unreadable (short read)")
}

// OutcomeOf names the errno an error wraps, as exec reports a refused
// clone(2).
func TestOutcomeOf(t *testing.T) {
	assert.DeepEqual(t, OutcomeOf(nil), Outcome{OK: true})
	err := &fs.PathError{Op: "fork/exec", Path: "/usr/local/bin/qualbox-probe", Err: syscall.EPERM}
	assert.DeepEqual(t, OutcomeOf(err), Outcome{Errno: "EPERM", Error: err.Error()})
	assert.DeepEqual(t, OutcomeOf(errors.New("no errno")), Outcome{Error: "no errno"})
}

// The posture fields decode from the probe's output, and facts printed
// before they existed still decode, without them.
func TestDecodePosture(t *testing.T) {
	f, err := Decode([]byte(`{"schema":"qualbox.probe.facts.v1","usernsSysctls":[` +
		`{"path":"/proc/sys/kernel/apparmor_restrict_unprivileged_userns","read":{"ok":false,"errno":"ENOENT","error":"open x: no such file or directory"}},` +
		`{"path":"/proc/sys/user/max_user_namespaces","value":"96369","read":{"ok":true}}],` +
		`"userNamespace":{"ok":false,"errno":"EPERM","error":"fork/exec /usr/local/bin/qualbox-probe: operation not permitted"},` +
		`"userNamespaceControl":{"ok":true}}`))
	assert.NilError(t, err)
	assert.Equal(t, len(f.UsernsSysctls), 2)
	assert.Equal(t, f.UsernsSysctls[0].String(), "absent (ENOENT)")
	assert.Equal(t, f.UsernsSysctls[1].String(), "96369")
	assert.Assert(t, f.UserNamespace != nil)
	assert.Equal(t, f.UserNamespace.Errno, "EPERM")
	assert.DeepEqual(t, f.UserNamespaceControl, &Outcome{OK: true})

	old, err := Decode(read(t, recorded+"facts.json"))
	assert.NilError(t, err)
	assert.Check(t, old.UserNamespace == nil && old.UsernsSysctls == nil && old.UserNamespaceControl == nil)

	_, err = Decode([]byte(`{"userNamespace":{"OK":true}}`))
	assert.ErrorContains(t, err, `unknown key "userNamespace.OK"`)
}
