package observer_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/qualify/observer"
)

// The v2-guest-* trees were recorded from real cgroup v2 kernels in the
// lane C guest (systemd cgroup driver; docs/lanes.md#lane-c) by
// scripts/lanec.sh record; each tree's LABEL says how, when and on which
// kernel and Engine: v2-guest-* on Linux 6.1 (Debian 12, lane B's Moby
// build, 2026-12-01), v2-guest-6.1-* on 6.1 again and v2-guest-6.12-* on
// 6.12 (Debian 13), both with Docker Engine 29.7.2 and the parent's pids
// counters recorded (2026-12-03). Every test runs on every set.
var guestSets = []string{"testdata/v2-guest-", "testdata/v2-guest-6.1-", "testdata/v2-guest-6.12-"}

// forEachGuestSet runs test once per recorded set, with guestTrees set to
// that set's prefix.
func forEachGuestSet(t *testing.T, test func(t *testing.T)) {
	for _, set := range guestSets {
		t.Run(filepath.Base(set), func(t *testing.T) {
			guestTrees = set
			test(t)
		})
	}
}

// guestTrees is the prefix of the recorded set a test reads.
var guestTrees string

// guestKeeper finds the recorded keeper: the one proc/<pid> directory of
// the "before" tree besides proc/self, and its docker-<id>.scope.
func guestKeeper(t *testing.T) (pid int, scopeDir string) {
	t.Helper()
	return guestKeeperOf(t, guestTrees)
}

// guestKeeperOf is guestKeeper of the set with prefix guestTrees.
func guestKeeperOf(t *testing.T, guestTrees string) (pid int, scopeDir string) {
	t.Helper()
	entries, err := os.ReadDir(guestTrees + "before/proc")
	assert.NilError(t, err)
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			assert.Equal(t, pid, 0, "more than one recorded pid")
			pid = n
		}
	}
	assert.Assert(t, pid > 0, "no recorded pid")
	scopes, err := filepath.Glob(guestTrees + "before/sys/fs/cgroup/system.slice/docker-*.scope")
	assert.NilError(t, err)
	assert.Equal(t, len(scopes), 1)
	return pid, strings.TrimPrefix(scopes[0], guestTrees+"before/")
}

// Before: the systemd driver's scope is found through the recorded
// mountinfo and /proc/<pid>/cgroup, and holds exactly the limits the
// recording set: --memory 64m --memory-swap 64m (swap 0) --pids-limit 32
// --cpus 0.5.
func TestRecordedGuestBefore(t *testing.T) {
	forEachGuestSet(t, func(t *testing.T) {
		pid, dir := guestKeeper(t)
		fsys := os.DirFS(guestTrees + "before")
		s, err := observer.Resolve(fsys, pid)
		assert.NilError(t, err)
		assert.Equal(t, s.Version, 2)
		assert.Equal(t, s.ProcCgroup, "0::/"+strings.TrimPrefix(dir, "sys/fs/cgroup/")+"\n")
		assert.DeepEqual(t, s.Dirs, map[string]string{"memory": dir, "pids": dir, "cpu": dir})

		snap := s.Read(fsys, "before")
		assert.Equal(t, len(snap.Errors), 0, "%v", snap.Errors)
		assert.DeepEqual(t, snap.MemoryLimitBytes, i64(64<<20))
		assert.DeepEqual(t, snap.MemorySwapLimitBytes, i64(0))
		assert.DeepEqual(t, snap.PidsMax, i64(32))
		assert.DeepEqual(t, snap.CPUQuotaMicros, i64(50000))
		assert.DeepEqual(t, snap.CPUPeriodMicros, i64(100000))
		assert.DeepEqual(t, snap.OOMKills, i64(0))
		assert.DeepEqual(t, snap.PidsMaxEvents, i64(0))
		assert.Assert(t, snap.PeakUsageBytes != nil && snap.MemoryUsageBytes != nil && snap.ShmemBytes != nil)
		assert.Assert(t, snap.LimitHits() == 0)
		assert.Assert(t, slices.Contains(snap.Procs, pid), "procs %v", snap.Procs)
		a := s.Absence(fsys)
		assert.Assert(t, !a.OK())
		assert.Equal(t, a.String(), "occupied (keeper alive)")
	})
}

// During OOM: an exec touching 128 MiB under the 64 MiB limit was killed by
// the kernel; the scope counted the kill and the limit hits, and the
// keeper is still in it.
func TestRecordedGuestOOM(t *testing.T) {
	forEachGuestSet(t, func(t *testing.T) {
		pid, _ := guestKeeper(t)
		s, err := observer.Resolve(os.DirFS(guestTrees+"before"), pid)
		assert.NilError(t, err)
		fsys := os.DirFS(guestTrees + "oom")
		snap := s.Read(fsys, "during")
		assert.Equal(t, len(snap.Errors), 0, "%v", snap.Errors)
		assert.DeepEqual(t, snap.OOMKills, i64(1))
		assert.Assert(t, snap.LimitHits() > 0 && *snap.OOMEvents >= 1, "max %v oom %v", snap.MaxEvents, snap.OOMEvents)
		// The kernel charges a page past memory.max before it OOM-kills, so
		// the recorded peak is the limit plus one page: at the limit, not below.
		assert.Assert(t, *snap.PeakUsageBytes >= 64<<20 && *snap.PeakUsageBytes <= 64<<20+64<<10, "peak %d", *snap.PeakUsageBytes)
		kills, err := s.OOMKills(fsys)
		assert.NilError(t, err)
		assert.Equal(t, kills, int64(1))
		assert.Assert(t, slices.Contains(snap.Procs, pid))
	})
}

// Pids exhaustion: the refused fork at pids.max is counted in pids.events,
// and the count stays after the spawning exec ended and its children were
// reaped (the recording shows pids.current back at the keeper and its
// sleep).
func TestRecordedGuestPids(t *testing.T) {
	forEachGuestSet(t, func(t *testing.T) {
		pid, _ := guestKeeper(t)
		s, err := observer.Resolve(os.DirFS(guestTrees+"before"), pid)
		assert.NilError(t, err)
		snap := s.Read(os.DirFS(guestTrees+"pids"), "during")
		assert.Equal(t, len(snap.Errors), 0, "%v", snap.Errors)
		assert.DeepEqual(t, snap.PidsMax, i64(32))
		assert.Assert(t, snap.PidsCurrent != nil && *snap.PidsCurrent <= 32)
		assert.Assert(t, snap.PidsMaxEvents != nil && *snap.PidsMaxEvents > 0)
	})
}

// After cleanup (`docker rm -f`): the scope directory and /proc/<pid> are
// gone, so the keeper resolved before is reported gone, and resolving it
// again fails.
func TestRecordedGuestAfter(t *testing.T) {
	forEachGuestSet(t, func(t *testing.T) {
		pid, _ := guestKeeper(t)
		s, err := observer.Resolve(os.DirFS(guestTrees+"before"), pid)
		assert.NilError(t, err)
		fsys := os.DirFS(guestTrees + "after")
		a := s.Absence(fsys)
		assert.Assert(t, a.Gone && a.OK(), "%s", a)
		assert.Equal(t, a.String(), "gone")
		_, err = observer.Resolve(fsys, pid)
		assert.ErrorContains(t, err, "/proc/"+strconv.Itoa(pid)+"/cgroup")
	})
}

// The two pids.events semantics, as the kernels recorded them after the
// scope's forks hit its pids.max 32. On 6.1 the refusal counts in the
// scope only, and the parent (system.slice) counts none: no
// pids.events.local exists. On 6.12 it counts in the scope's
// pids.events.local and, hierarchically, in the parent's pids.events,
// while the parent's pids.events.local stays 0 (its own limit refused
// nothing). The observer reads the scope's own refusals from
// pids.events.local there and from pids.events on 6.1.
func TestRecordedPidsEventsSemantics(t *testing.T) {
	parentMax := func(t *testing.T, set, file string) *int64 {
		t.Helper()
		_, dir := guestKeeperOf(t, set)
		data, err := os.ReadFile(filepath.Join(set+"pids", filepath.Dir(dir), file))
		if os.IsNotExist(err) {
			return nil
		}
		assert.NilError(t, err)
		f := strings.Fields(string(data))
		assert.Assert(t, len(f) == 2 && f[0] == "max", "%s: %q", file, data)
		n, err := strconv.ParseInt(f[1], 10, 64)
		assert.NilError(t, err)
		return &n
	}
	read := func(t *testing.T, set string) observer.Snapshot {
		t.Helper()
		pid, _ := guestKeeperOf(t, set)
		s, err := observer.Resolve(os.DirFS(set+"before"), pid)
		assert.NilError(t, err)
		snap := s.Read(os.DirFS(set+"pids"), "during")
		assert.Equal(t, len(snap.Errors), 0, "%v", snap.Errors)
		return snap
	}

	old := read(t, "testdata/v2-guest-6.1-")
	assert.Check(t, old.PidsMaxEventsLocal == nil)
	n, source := old.PidsLimitRefusals()
	assert.Check(t, n >= 1 && source == "pids.events max", "%d from %s", n, source)
	assert.DeepEqual(t, parentMax(t, "testdata/v2-guest-6.1-", "pids.events"), i64(0))
	assert.Check(t, parentMax(t, "testdata/v2-guest-6.1-", "pids.events.local") == nil)

	cur := read(t, "testdata/v2-guest-6.12-")
	assert.Assert(t, cur.PidsMaxEventsLocal != nil)
	n, source = cur.PidsLimitRefusals()
	assert.Check(t, n >= 1 && source == "pids.events.local max", "%d from %s", n, source)
	assert.Check(t, *cur.PidsMaxEvents >= n)
	hier := parentMax(t, "testdata/v2-guest-6.12-", "pids.events")
	assert.Check(t, hier != nil && *hier >= n, "parent pids.events max %v counts the scope's %d refusals", hier, n)
	assert.DeepEqual(t, parentMax(t, "testdata/v2-guest-6.12-", "pids.events.local"), i64(0))
}
