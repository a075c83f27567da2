package observer_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"
	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"

	"github.com/qualbox/qualbox/qualify/observer"
)

// liveScope is a v2 scope directory the test rewrites while a sampler
// reads it, as the kernel updates a real one.
type liveScope struct {
	t    *testing.T
	root string
	dir  string
}

func newLiveScope(t *testing.T) (*liveScope, observer.Scope) {
	root := t.TempDir()
	dir := "sys/fs/cgroup/system.slice/docker-" + v2ID + ".scope"
	l := &liveScope{t: t, root: root, dir: dir}
	assert.NilError(t, os.MkdirAll(filepath.Join(root, dir), 0o755))
	l.write("memory.max", "67108864")
	l.write("pids.max", "64")
	l.set(1<<20, 0, 1, 0)
	return l, observer.Scope{PID: 4242, Version: 2, Dirs: map[string]string{"memory": dir, "pids": dir, "cpu": dir}}
}

func (l *liveScope) write(name, v string) {
	// Rename over the file so a concurrent reader sees the old or the new
	// content, never a torn write.
	p := filepath.Join(l.root, l.dir, name)
	assert.NilError(l.t, os.WriteFile(p+".new", []byte(v+"\n"), 0o644))
	assert.NilError(l.t, os.Rename(p+".new", p))
}

func (l *liveScope) set(usage, oomKills, pids, refusals int64) {
	l.write("memory.current", strconv.FormatInt(usage, 10))
	l.write("memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill "+strconv.FormatInt(oomKills, 10))
	l.write("pids.current", strconv.FormatInt(pids, 10))
	l.write("pids.events", "max "+strconv.FormatInt(refusals, 10))
}

func TestSeriesFollowsTheCounters(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	l, scope := newLiveScope(t)
	fsys := os.DirFS(l.root)
	sm := scope.Sample(context.Background(), fsys, 2*time.Millisecond, 1000)
	samples := func() int { return len(sm.Peek().Samples) }
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if samples() >= 3 {
			return poll.Success()
		}
		return poll.Continue("%d samples", samples())
	})
	l.set(64<<20, 1, 64, 5)
	n := samples()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if samples() >= n+3 {
			return poll.Success()
		}
		return poll.Continue("%d samples", samples())
	})
	ser := sm.Stop()
	assert.Equal(t, ser.Version, 2)
	assert.Equal(t, *ser.MemoryLimitBytes, int64(64<<20))
	assert.Equal(t, *ser.PidsMax, int64(64))
	assert.Equal(t, len(ser.Errors), 0, "%v", ser.Errors)
	peak, ok := ser.Peak(func(s observer.Sample) *int64 { return s.MemoryUsageBytes })
	assert.Assert(t, ok)
	assert.Equal(t, peak, int64(64<<20))
	rise, ok := ser.Rise(func(s observer.Sample) *int64 { return s.OOMKills })
	assert.Assert(t, ok)
	assert.Equal(t, rise, int64(1))
	rise, _ = ser.Rise(func(s observer.Sample) *int64 { return s.PidsLimitRefusals })
	assert.Equal(t, rise, int64(5))
	assert.Equal(t, *ser.Samples[0].MemoryUsageBytes, int64(1<<20), "the first sample is taken before Sample returns")
	for i := 1; i < len(ser.Samples); i++ {
		assert.Assert(t, ser.Samples[i].OffsetMillis >= ser.Samples[i-1].OffsetMillis, "offsets go forward")
	}
	// Stop's last sample sees a change the interval had no tick for.
	slow := scope.Sample(context.Background(), fsys, time.Hour, 10)
	l.set(2<<20, 1, 3, 7)
	end := slow.Stop()
	assert.Equal(t, len(end.Samples), 2)
	assert.Equal(t, *end.Samples[1].PidsLimitRefusals, int64(7))
	// Stopped is stopped: nothing more arrives.
	again := sm.Stop()
	assert.Equal(t, len(again.Samples), len(ser.Samples))
}

// A full series halves itself and samples at twice the interval, so it
// keeps the whole run within its bound.
func TestSeriesThinsAtItsBound(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	l, scope := newLiveScope(t)
	sm := scope.Sample(context.Background(), os.DirFS(l.root), time.Millisecond, 8)
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if s := sm.Peek(); s.Thinned >= 2 {
			return poll.Success()
		}
		return poll.Continue("not thinned twice yet")
	})
	ser := sm.Stop()
	// An even bound is lowered to the odd 7, so a thinning keeps the
	// first and the newest sample; Stop's last one still fits.
	assert.Assert(t, len(ser.Samples) <= 7, "%d samples", len(ser.Samples))
	assert.Equal(t, ser.IntervalMillis, int64(1)<<ser.Thinned)
	assert.Equal(t, ser.Samples[0].OffsetMillis, int64(0), "thinning keeps the first sample")
	for i := 1; i < len(ser.Samples); i++ {
		assert.Assert(t, ser.Samples[i].OffsetMillis >= ser.Samples[i-1].OffsetMillis, "offsets go forward: %+v", ser.Samples)
	}
}

// memory.peak, the kernel's high-water mark, is sampled where the kernel
// has it (Linux 5.19 and later) and is no error where it does not.
func TestSeriesReadsTheMemoryPeak(t *testing.T) {
	l, scope := newLiveScope(t)
	fsys := os.DirFS(l.root)
	ser := scope.Sample(context.Background(), fsys, time.Hour, 10).Stop()
	assert.Assert(t, ser.Samples[0].MemoryPeakBytes == nil)
	assert.Equal(t, len(ser.Errors), 0, "%v", ser.Errors)
	l.write("memory.peak", "66060288")
	ser = scope.Sample(context.Background(), fsys, time.Hour, 10).Stop()
	assert.Equal(t, *ser.Samples[0].MemoryPeakBytes, int64(66060288))
	assert.Equal(t, ser.Readable(func(s observer.Sample) *int64 { return s.MemoryPeakBytes }), 2)
}

// Where pids.events.local exists (Linux 6.11+) it is the refusal count;
// a scope whose files vanish (compute removed) records bounded errors.
func TestSeriesLocalRefusalsAndVanishedScope(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	l, scope := newLiveScope(t)
	l.write("pids.events.local", "max 3")
	sm := scope.Sample(context.Background(), os.DirFS(l.root), time.Millisecond, 100)
	first := sm.Peek().Samples[0]
	assert.Equal(t, *first.PidsLimitRefusals, int64(3), "pids.events.local, not pids.events")
	assert.NilError(t, os.RemoveAll(filepath.Join(l.root, l.dir)))
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if len(sm.Peek().Errors) > 0 {
			return poll.Success()
		}
		return poll.Continue("no read error yet")
	})
	time.Sleep(20 * time.Millisecond)
	ser := sm.Stop()
	assert.Assert(t, len(ser.Errors) <= 8)
	assert.Equal(t, ser.Readable(func(s observer.Sample) *int64 { return s.PidsCurrent }) < len(ser.Samples), true)
	last := ser.Samples[len(ser.Samples)-1]
	assert.Assert(t, last.MemoryUsageBytes == nil && last.PidsCurrent == nil, "unreadable values are nil, not zero")
}

func TestSeriesStopsWithItsContext(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	l, scope := newLiveScope(t)
	ctx, cancel := context.WithCancel(context.Background())
	sm := scope.Sample(ctx, os.DirFS(l.root), time.Millisecond, 1000)
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if n := len(sm.Peek().Samples); n >= 3 {
			return poll.Success()
		}
		return poll.Continue("ticks not sampled yet")
	})
	cancel()
	// The sampling ends with ctx, before Stop: the count stops growing.
	var n int
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		n = len(sm.Peek().Samples)
		time.Sleep(20 * time.Millisecond)
		if len(sm.Peek().Samples) == n {
			return poll.Success()
		}
		return poll.Continue("still sampling after ctx ended")
	})
	ser := sm.Stop()
	assert.Equal(t, len(ser.Samples), n+1, "Stop adds its one last sample")
}
