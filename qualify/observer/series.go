package observer

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
)

// Series bounds (docs/qualification.md#evidence).
const (
	// DefaultSeriesInterval is the sampling interval a scenario uses
	// unless told otherwise.
	DefaultSeriesInterval = 50 * time.Millisecond
	// DefaultMaxSamples bounds a series: 1,200 samples is a minute at
	// the default interval before the series starts thinning.
	DefaultMaxSamples = 1200
	// maxSeriesErrors bounds the distinct read errors a series keeps.
	maxSeriesErrors = 8
)

// Series is a scope's counters sampled at a fixed interval while a workload
// runs: how memory and PIDs moved on the way to a limit, which snapshots
// before and after cannot show. Limits are read once, at the start.
//
// A series holds at most its MaxSamples: on reaching that many, every
// second sample is dropped and the interval doubles, so the series keeps
// covering the whole run at a coarser grain (Thinned counts the halvings).
// The bound in use is odd (an even MaxSamples is lowered by one), so a
// thinning keeps the first and the newest sample and the kept samples
// stay IntervalMillis apart; only Stop's final sample falls between ticks.
type Series struct {
	Version int `json:"version"`
	// Start is when the first sample was taken (UTC); sample offsets are
	// from it, measured on the monotonic clock (a wall-clock step does not
	// move them).
	Start time.Time `json:"start"`
	// IntervalMillis is the interval between kept samples, in ms: the
	// requested one times 2^Thinned.
	IntervalMillis int64 `json:"intervalMillis"`
	MaxSamples     int   `json:"maxSamples"`
	Thinned        int   `json:"thinned"`
	// MemoryLimitBytes and PidsMax are the scope's limits at Start; nil is
	// unlimited or unreadable.
	MemoryLimitBytes *int64 `json:"memoryLimitBytes"`
	PidsMax          *int64 `json:"pidsMax"`
	// Files are the interface files each sample reads, relative to the
	// fs root.
	Files   []string `json:"files"`
	Samples []Sample `json:"samples"`
	// Errors are the first distinct read errors (at most 8); a sample
	// whose file could not be read has that value nil.
	Errors []string `json:"errors,omitempty"`
}

// Sample is one reading of a series. Nil values were unreadable.
type Sample struct {
	// OffsetMillis is the time since the series' Start, in ms.
	OffsetMillis int64 `json:"t"`
	// MemoryUsageBytes is memory.usage_in_bytes (v1) or memory.current
	// (v2): the usage at the moment of reading.
	MemoryUsageBytes *int64 `json:"memoryUsageBytes"`
	// MemoryPeakBytes is the kernel's high-water mark of the usage since
	// the cgroup was created: memory.max_usage_in_bytes (v1) or
	// memory.peak (v2, Linux 5.19 and later; nil before). A usage spike
	// between two ticks (the last pages before an OOM kill) shows here
	// when MemoryUsageBytes missed it.
	MemoryPeakBytes *int64 `json:"memoryPeakBytes,omitempty"`
	// OOMKills is the scope's oom_kill counter (v1 memory.oom_control, v2
	// memory.events).
	OOMKills *int64 `json:"oomKills"`
	// PidsCurrent is pids.current.
	PidsCurrent *int64 `json:"pidsCurrent"`
	// PidsLimitRefusals is the count Snapshot.PidsLimitRefusals reads:
	// pids.events.local max where the kernel has it, else pids.events max.
	PidsLimitRefusals *int64 `json:"pidsLimitRefusals"`
}

// Readable returns how many samples have a non-nil value of field.
func (s *Series) Readable(field func(Sample) *int64) int {
	n := 0
	for _, x := range s.Samples {
		if field(x) != nil {
			n++
		}
	}
	return n
}

// Peak returns the largest non-nil value field picks out of the samples,
// and false when every one is nil.
func (s *Series) Peak(field func(Sample) *int64) (int64, bool) {
	var peak int64
	found := false
	for _, x := range s.Samples {
		if v := field(x); v != nil && (!found || *v > peak) {
			peak, found = *v, true
		}
	}
	return peak, found
}

// Rise returns the last non-nil value of field minus the first, and false
// when fewer than one sample has it.
func (s *Series) Rise(field func(Sample) *int64) (int64, bool) {
	var first, last *int64
	for _, x := range s.Samples {
		if v := field(x); v != nil {
			if first == nil {
				first = v
			}
			last = v
		}
	}
	if first == nil {
		return 0, false
	}
	return *last - *first, true
}

// Sampler samples a scope in the background until Stop.
type Sampler struct {
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	series Series
	fsys   fs.FS
	reader sampleReader
	t0     time.Time // the series' start with its monotonic reading
}

// Sample starts sampling s in fsys every interval, keeping at most
// maxSamples (see Series), and takes the first sample before it returns.
// It panics on an interval below 1 ms or maxSamples below 3: those are
// programming errors, not inputs. Stop ends it; ctx ending stops the
// sampling too, keeping what was taken.
func (s Scope) Sample(ctx context.Context, fsys fs.FS, interval time.Duration, maxSamples int) *Sampler {
	if interval < time.Millisecond || maxSamples < 3 {
		panic(fmt.Sprintf("observer: Sample(interval %v, maxSamples %d): want >= 1ms and >= 3", interval, maxSamples))
	}
	// An odd bound: thinning n samples to the even indices keeps index 0
	// and n-1 only when n is odd.
	bound := maxSamples - (1 - maxSamples%2)
	ctx, cancel := context.WithCancel(ctx)
	r := s.sampleReader()
	t0 := time.Now() // keeps its monotonic reading; Start is its wall time
	sm := &Sampler{cancel: cancel, done: make(chan struct{}), fsys: fsys, reader: r, t0: t0}
	ser := &sm.series
	*ser = Series{Version: s.Version, Start: t0.UTC(), IntervalMillis: interval.Milliseconds(), MaxSamples: maxSamples, Files: r.files()}
	limits := s.Read(fsys, "series start")
	ser.MemoryLimitBytes, ser.PidsMax = limits.MemoryLimitBytes, limits.PidsMax
	ser.Samples = append(ser.Samples, r.read(fsys, ser, 0))
	go func() {
		defer close(sm.done)
		step := interval
		t := time.NewTicker(step)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				sm.mu.Lock()
				ser.Samples = append(ser.Samples, r.read(fsys, ser, now.Sub(t0).Milliseconds()))
				full := len(ser.Samples) >= bound
				if full {
					ser.thin()
				}
				sm.mu.Unlock()
				if full {
					step *= 2
					t.Reset(step)
				}
			}
		}
	}()
	return sm
}

// thin keeps the samples at even indices (the first, and the newest when
// their count is odd, as Sample's bound makes it) and doubles the
// interval.
func (ser *Series) thin() {
	kept := ser.Samples[:0]
	for i, x := range ser.Samples {
		if i%2 == 0 {
			kept = append(kept, x)
		}
	}
	ser.Samples = kept
	ser.Thinned++
	ser.IntervalMillis *= 2
}

// Stop ends the sampling, takes one last sample (the counters as the
// workload left them, which the interval's last tick may have missed) and
// returns the series. It may be called more than once; every call returns
// the same series.
func (sm *Sampler) Stop() Series {
	sm.once.Do(func() {
		sm.cancel()
		<-sm.done
		sm.mu.Lock()
		ser := &sm.series
		// The ticker keeps fewer than the bound, so this one fits.
		ser.Samples = append(ser.Samples, sm.reader.read(sm.fsys, ser, time.Since(sm.t0).Milliseconds()))
		sm.mu.Unlock()
	})
	return sm.Peek()
}

// Peek returns a copy of the series so far, for a caller that waits on
// it; the sampling goes on.
func (sm *Sampler) Peek() Series {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	s := sm.series
	s.Samples = slices.Clone(s.Samples)
	s.Errors = slices.Clone(s.Errors)
	return s
}

// sampleReader names the few files a sample reads; Read reads them all
// and more, which is too much every 50 ms.
type sampleReader struct {
	usage, peak, oom, pidsCurrent, pidsEvents, pidsEventsLocal string
}

func (s Scope) sampleReader() sampleReader {
	join := func(ctrl, name string) string {
		if dir, ok := s.Dirs[ctrl]; ok {
			return path.Join(dir, name)
		}
		return ""
	}
	r := sampleReader{
		pidsCurrent: join("pids", "pids.current"),
		pidsEvents:  join("pids", "pids.events"),
	}
	if s.Version == 1 {
		r.usage, r.oom = join("memory", "memory.usage_in_bytes"), join("memory", "memory.oom_control")
		r.peak = join("memory", "memory.max_usage_in_bytes")
	} else {
		r.usage, r.oom = join("memory", "memory.current"), join("memory", "memory.events")
		r.peak = join("memory", "memory.peak")
		r.pidsEventsLocal = join("pids", "pids.events.local")
	}
	return r
}

func (r sampleReader) files() []string {
	var out []string
	for _, f := range []string{r.usage, r.peak, r.oom, r.pidsCurrent, r.pidsEvents, r.pidsEventsLocal} {
		if f != "" {
			out = append(out, f)
		}
	}
	return out
}

func (r sampleReader) read(fsys fs.FS, ser *Series, offset int64) Sample {
	get := func(p string, optional bool) (string, bool) {
		if p == "" {
			ser.noteError("controller not in /proc/<pid>/cgroup")
			return "", false
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			if !optional {
				ser.noteError(fmt.Sprintf("%s: %v", p, err))
			}
			return "", false
		}
		return strings.TrimSpace(string(data)), true
	}
	x := Sample{OffsetMillis: offset}
	if v, ok := get(r.usage, false); ok {
		x.MemoryUsageBytes = limit(v)
	}
	// memory.peak is absent before Linux 5.19.
	if v, ok := get(r.peak, r.peak != "" && strings.HasSuffix(r.peak, "memory.peak")); ok {
		x.MemoryPeakBytes = limit(v)
	}
	if v, ok := get(r.oom, false); ok {
		x.OOMKills = keyed(v, "oom_kill")
	}
	if v, ok := get(r.pidsCurrent, false); ok {
		x.PidsCurrent = limit(v)
	}
	// pids.events.local is absent before Linux 6.11 (and on v1).
	if r.pidsEventsLocal != "" {
		if v, ok := get(r.pidsEventsLocal, true); ok {
			x.PidsLimitRefusals = keyed(v, "max")
		}
	}
	if x.PidsLimitRefusals == nil {
		if v, ok := get(r.pidsEvents, false); ok {
			x.PidsLimitRefusals = keyed(v, "max")
		}
	}
	return x
}

func (ser *Series) noteError(e string) {
	if len(ser.Errors) < maxSeriesErrors && !slices.Contains(ser.Errors, e) {
		ser.Errors = append(ser.Errors, e)
	}
}
