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

// The v2-guest-* trees were recorded from a real cgroup v2 kernel: the lane
// C guest (Debian 12, systemd cgroup driver; docs/lanes.md#lane-c), by
// scripts/lanec.sh record. testdata/v2-guest-LABEL says how and when.
const guestTrees = "testdata/v2-guest-"

// guestKeeper finds the recorded keeper: the one proc/<pid> directory of
// the "before" tree besides proc/self, and its docker-<id>.scope.
func guestKeeper(t *testing.T) (pid int, scopeDir string) {
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
}

// During OOM: an exec touching 128 MiB under the 64 MiB limit was killed by
// the kernel; the scope counted the kill and the limit hits, and the
// keeper is still in it.
func TestRecordedGuestOOM(t *testing.T) {
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
}

// Pids exhaustion: the refused fork at pids.max is counted in pids.events,
// and the count stays after the spawning exec ended and its children were
// reaped (the recording shows pids.current back at the keeper and its
// sleep).
func TestRecordedGuestPids(t *testing.T) {
	pid, _ := guestKeeper(t)
	s, err := observer.Resolve(os.DirFS(guestTrees+"before"), pid)
	assert.NilError(t, err)
	snap := s.Read(os.DirFS(guestTrees+"pids"), "during")
	assert.Equal(t, len(snap.Errors), 0, "%v", snap.Errors)
	assert.DeepEqual(t, snap.PidsMax, i64(32))
	assert.Assert(t, snap.PidsCurrent != nil && *snap.PidsCurrent <= 32)
	assert.Assert(t, snap.PidsMaxEvents != nil && *snap.PidsMaxEvents > 0)
}

// After cleanup (`docker rm -f`): the scope directory and /proc/<pid> are
// gone, so the keeper resolved before is reported gone, and resolving it
// again fails.
func TestRecordedGuestAfter(t *testing.T) {
	pid, _ := guestKeeper(t)
	s, err := observer.Resolve(os.DirFS(guestTrees+"before"), pid)
	assert.NilError(t, err)
	fsys := os.DirFS(guestTrees + "after")
	a := s.Absence(fsys)
	assert.Assert(t, a.Gone && a.OK(), "%s", a)
	assert.Equal(t, a.String(), "gone")
	_, err = observer.Resolve(fsys, pid)
	assert.ErrorContains(t, err, "/proc/"+strconv.Itoa(pid)+"/cgroup")
}
