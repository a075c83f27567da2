package observer_test

import (
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/qualify/observer"
)

const v1ID = "5bbdb0167c71e54f259f04a6ba0af53c5bbdb0167c71e54f259f04a6ba0af53c"

// stat is a /proc/<pid>/stat line whose field 22 (starttime) is start.
func stat(pid, start string) *fstest.MapFile {
	return &fstest.MapFile{Data: []byte(pid + " (sleep (x) y) S 1 " + pid + " " + pid + " 0 -1 4194560 110 0 0 0 0 0 0 0 20 0 1 0 " + start + " 1675264 128 18446744073709551615\n")}
}

func file(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }

// v1Host is a cgroup v1 host whose memory, pids and cpu hierarchies are
// mounted with root "/" (cpu,cpuacct co-mounted), keeper PID 900 in
// /docker/<id>.
func v1Host() fstest.MapFS {
	mem := "sys/fs/cgroup/memory/docker/" + v1ID
	return fstest.MapFS{
		"proc/900/cgroup": file("12:pids:/docker/" + v1ID + "\n4:cpu,cpuacct:/docker/" + v1ID + "\n3:memory:/docker/" + v1ID + "\n1:name=systemd:/docker/" + v1ID + "\n0::/\n"),
		"proc/900/stat":   stat("900", "5000"),
		"proc/self/mountinfo": file(strings.Join([]string{
			"31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755",
			"32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct",
			"35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory",
			"39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids",
		}, "\n") + "\n"),
		mem + "/cgroup.procs": file("900\n"),
		mem + "/tasks":        file("900\n"),
		"sys/fs/cgroup/pids/docker/" + v1ID + "/cgroup.procs":        file("900\n"),
		"sys/fs/cgroup/cpu,cpuacct/docker/" + v1ID + "/tasks":        file("900\n"),
		"sys/fs/cgroup/cpu,cpuacct/docker/" + v1ID + "/cgroup.procs": file(""),
	}
}

func TestResolveV1(t *testing.T) {
	s, err := observer.Resolve(v1Host(), 900)
	assert.NilError(t, err)
	assert.Equal(t, s.Version, 1)
	assert.Equal(t, s.StartTime, uint64(5000))
	assert.DeepEqual(t, s.Dirs, map[string]string{
		"memory": "sys/fs/cgroup/memory/docker/" + v1ID,
		"pids":   "sys/fs/cgroup/pids/docker/" + v1ID,
		"cpu":    "sys/fs/cgroup/cpu,cpuacct/docker/" + v1ID,
	})
}

// The mountinfo root field: a hierarchy mounted from /docker (as inside a
// container) maps /docker/<id> to <mount point>/<id>.
func TestResolveV1MountRoot(t *testing.T) {
	fsys := fstest.MapFS{
		"proc/900/cgroup":                         file("3:memory:/docker/" + v1ID + "\n"),
		"proc/900/stat":                           stat("900", "5000"),
		"proc/self/mountinfo":                     file("35 31 0:32 /docker /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"),
		"sys/fs/cgroup/memory/" + v1ID + "/tasks": file("900\n"),
	}
	s, err := observer.Resolve(fsys, 900)
	assert.NilError(t, err)
	assert.Equal(t, s.Dirs["memory"], "sys/fs/cgroup/memory/"+v1ID)

	// A path outside the mounted root is not visible through the mount.
	fsys["proc/900/cgroup"] = file("3:memory:/other/" + v1ID + "\n")
	_, err = observer.Resolve(fsys, 900)
	assert.ErrorContains(t, err, "outside the hierarchy mounted at /sys/fs/cgroup/memory")
}

func TestResolveUnresolvable(t *testing.T) {
	for name, mutate := range map[string]func(fstest.MapFS){
		// The reviewer's reproduction: /proc/<pid>/cgroup names a scope
		// that does not exist under the root.
		"scope directory missing": func(m fstest.MapFS) {
			for k := range m {
				if strings.HasPrefix(k, "sys/fs/cgroup/memory/") {
					delete(m, k)
				}
			}
		},
		"pid not in the memory scope": func(m fstest.MapFS) {
			m["sys/fs/cgroup/memory/docker/"+v1ID+"/cgroup.procs"] = file("901\n")
			m["sys/fs/cgroup/memory/docker/"+v1ID+"/tasks"] = file("901\n")
		},
		"pid not in the pids scope": func(m fstest.MapFS) {
			m["sys/fs/cgroup/pids/docker/"+v1ID+"/cgroup.procs"] = file("")
		},
		"cgroup namespace relative path": func(m fstest.MapFS) {
			m["proc/900/cgroup"] = file("3:memory:/../../docker/" + v1ID + "\n")
		},
		"no stat": func(m fstest.MapFS) { delete(m, "proc/900/stat") },
	} {
		t.Run(name, func(t *testing.T) {
			m := v1Host()
			mutate(m)
			_, err := observer.Resolve(m, 900)
			assert.Assert(t, err != nil)
		})
	}
}

// Regression: `observe --pid 4242 --root <tree> --until-gone` on a tree
// where /proc/4242 exists but its scope does not said "gone". Resolve now
// refuses the scope, and an Absence of a scope whose keeper is still alive
// is never gone, even when every directory is absent.
func TestFakeRootNeverGone(t *testing.T) {
	fake := fstest.MapFS{
		"proc/4242/cgroup":                 file("0::/system.slice/docker-" + v2ID + ".scope\n"),
		"proc/4242/stat":                   stat("4242", "123456"),
		"proc/self/mountinfo":              file("35 22 0:30 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"),
		"sys/fs/cgroup/system.slice/.keep": file(""),
	}
	_, err := observer.Resolve(fake, 4242)
	assert.Assert(t, is.ErrorContains(err, "sys/fs/cgroup/system.slice/docker-"+v2ID+".scope"))

	s, err := observer.Resolve(os.DirFS("testdata/v2-systemd"), 4242)
	assert.NilError(t, err)
	a := s.Absence(fake)
	assert.Assert(t, !a.Gone && !a.Empty && !a.OK(), "%+v", a)
	assert.Equal(t, a.String(), "occupied (keeper alive)")

	// The PID reused by another process (another start time): gone.
	fake["proc/4242/stat"] = stat("4242", "999999")
	a = s.Absence(fake)
	assert.Assert(t, a.Gone && a.OK(), "%+v", a)

	// An unresolved scope is never gone.
	assert.Assert(t, !(observer.Scope{PID: 4242}).Absence(os.DirFS("testdata/v2-gone")).OK())
}
