package observer

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// FuzzScopeDirs: the parsing half of Resolve never panics on any
// /proc/<pid>/cgroup and mountinfo content, and a scope it returns is
// version 1 or 2 with a directory per controller the file names; a cgroup
// path never climbs out of its hierarchy's mount (docs/untrusted-inputs.md).
func FuzzScopeDirs(f *testing.F) {
	f.Fuzz(func(t *testing.T, procCgroup, mountinfo []byte) {
		version, dirs, err := scopeDirs(7, procCgroup, mountinfo)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "observer: /proc/7/cgroup") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		switch version {
		case 1:
			if _, ok := dirs["memory"]; !ok {
				t.Fatalf("v1 scope without a memory directory: %v", dirs)
			}
		case 2:
			if len(dirs) != len(controllers) || dirs["memory"] != dirs["pids"] || dirs["memory"] != dirs["cpu"] {
				t.Fatalf("v2 scope with differing directories: %v", dirs)
			}
		default:
			t.Fatalf("version %d", version)
		}
		for c, d := range dirs {
			if !slices.Contains(controllers, c) {
				t.Fatalf("directory for controller %q", c)
			}
			// Mount points and roots come from the kernel's mountinfo; only
			// when they hold no ".." must the result hold none.
			if !bytes.Contains(mountinfo, []byte("..")) && slices.Contains(strings.Split(d, "/"), "..") {
				t.Fatalf("%s directory %q climbs out of its mount\ncgroup: %q\nmountinfo: %q", c, d, procCgroup, mountinfo)
			}
		}
	})
}

// FuzzInterfaceFiles: the parsers of cgroup interface files and of
// /proc/<pid>/stat never panic; limit yields nil or a value below the v1
// page-counter maximum, keyed a value that its file really holds under
// the key, pids only numbers that are fields of the file.
func FuzzInterfaceFiles(f *testing.F) {
	f.Fuzz(func(t *testing.T, content string) {
		if n := limit(strings.TrimSpace(content)); n != nil && (*n < 0 || *n >= v1Unlimited) {
			t.Fatalf("limit(%q) = %d", content, *n)
		}
		for _, k := range []string{"oom_kill", "max", "shmem", "under_oom"} {
			n := keyed(content, k)
			if n == nil {
				continue
			}
			found := false
			for line := range strings.SplitSeq(content, "\n") {
				f := strings.Fields(line)
				if len(f) == 2 && f[0] == k {
					if v, err := strconv.ParseInt(f[1], 10, 64); err == nil && v == *n {
						found = true
						break
					}
				}
			}
			if !found {
				t.Fatalf("keyed(%q, %q) = %d, not in the file", content, k, *n)
			}
		}
		fields := strings.Fields(content)
		for _, p := range pids(content) {
			if !slices.ContainsFunc(fields, func(f string) bool { v, err := strconv.Atoi(f); return err == nil && v == p }) {
				t.Fatalf("pids(%q) holds %d, not a field", content, p)
			}
		}
		_, _ = parseStartTime(7, []byte(content))
	})
}
