package scenario

import (
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/qualify/observer"
)

func i64p(v int64) *int64 { return &v }

func memSeries(usage ...int64) observer.Series {
	var s observer.Series
	for i, u := range usage {
		kills := int64(0)
		if u < 0 {
			u, kills = -u, 1
		}
		s.Samples = append(s.Samples, observer.Sample{OffsetMillis: int64(i) * 50, MemoryUsageBytes: i64p(u), OOMKills: i64p(kills)})
	}
	return s
}

// Each series check fails for the reason it exists: a series that
// stopped short of the limit, one without the kill, one whose counters
// were unreadable; and the high-water mark decides where it was sampled.
func TestSeriesChecksFailForTheirReason(t *testing.T) {
	const limit = 64 << 20
	rec := NewRecord()
	checkSeriesOOM(rec, "oom", memSeries(1<<20, 40<<20, 63<<20, -2<<20), limit)
	assert.DeepEqual(t, failed(rec.Snapshot().Checks), []string(nil))

	rec = NewRecord()
	checkSeriesOOM(rec, "oom", memSeries(1<<20, 30<<20, -2<<20), limit)
	assert.DeepEqual(t, failed(rec.Snapshot().Checks), []string{"oom: observer series: memory usage reached the limit"})

	rec = NewRecord()
	checkSeriesOOM(rec, "oom", memSeries(1<<20, 63<<20, 2<<20), limit)
	assert.DeepEqual(t, failed(rec.Snapshot().Checks), []string{"oom: observer series: oom_kill rose during it"})

	rec = NewRecord()
	checkSeriesOOM(rec, "oom", memSeries(-(63 << 20)), limit)
	assert.DeepEqual(t, failed(rec.Snapshot().Checks), []string{
		"oom: observer series sampled memory usage", "oom: observer series sampled oom_kill", "oom: observer series: oom_kill rose during it"})

	// The kill came between ticks: usage never showed the limit, the
	// kernel's high-water mark did.
	between := memSeries(1<<20, 20<<20, -2<<20)
	for i, peak := range []int64{1 << 20, 20 << 20, 62 << 20} {
		between.Samples[i].MemoryPeakBytes = i64p(peak)
	}
	rec = NewRecord()
	checkSeriesOOM(rec, "oom", between, limit)
	assert.DeepEqual(t, failed(rec.Snapshot().Checks), []string(nil))
	for i := range between.Samples {
		between.Samples[i].MemoryPeakBytes = i64p(20 << 20)
	}
	rec = NewRecord()
	checkSeriesOOM(rec, "oom", between, limit)
	assert.DeepEqual(t, failed(rec.Snapshot().Checks), []string{"oom: observer series: memory high-water mark reached the limit"})

	pids := func(cur, ref int64) observer.Sample {
		return observer.Sample{PidsCurrent: i64p(cur), PidsLimitRefusals: i64p(ref)}
	}
	rec = NewRecord()
	checkSeriesPids(rec, "bomb", observer.Series{Samples: []observer.Sample{pids(1, 0), pids(64, 9), pids(40, 9)}}, 40)
	assert.DeepEqual(t, failed(rec.Snapshot().Checks), []string(nil))
	rec = NewRecord()
	checkSeriesPids(rec, "bomb", observer.Series{Samples: []observer.Sample{pids(1, 0), pids(30, 0)}}, 40)
	assert.DeepEqual(t, failed(rec.Snapshot().Checks), []string{
		"bomb: observer series: forks refused at pids.max during it",
		"bomb: observer series: pids.current peak",
	})
	// No readable pids.current is no peak, whatever the bound.
	rec = NewRecord()
	checkSeriesPids(rec, "bomb", observer.Series{Samples: []observer.Sample{{PidsLimitRefusals: i64p(0)}, {PidsLimitRefusals: i64p(3)}}}, 0)
	assert.DeepEqual(t, failed(rec.Snapshot().Checks), []string{"bomb: observer series: pids.current peak"})
	// Unreadable counters are not a rise of zero that happens to pass.
	rec = NewRecord()
	checkSeriesRise(rec, "tree", "pids.current", observer.Series{Samples: []observer.Sample{{}, {}}}, pidsCurrent, 0)
	assert.DeepEqual(t, failed(rec.Snapshot().Checks), []string{"tree: observer series sampled pids.current", "tree: observer series: pids.current rose"})
	rec = NewRecord()
	checkSeriesRise(rec, "tree", "pids.current", observer.Series{Samples: []observer.Sample{pids(2, 0), pids(5, 0)}}, pidsCurrent, 3)
	assert.DeepEqual(t, failed(rec.Snapshot().Checks), []string(nil))
	assert.Assert(t, strings.Contains(rec.Snapshot().Checks[1].Want, ">= 3"))

	// tmpfs pages: the rise must reach what was written less the per-CPU
	// charge batches (2 CPUs of 4 KiB pages: 512 KiB); a rise short of
	// that fails, and so does an unreadable counter or nothing written.
	const written = 24 << 20
	slack := chargeSlack(2, 4096)
	assert.Equal(t, slack, int64(512<<10))
	rec = NewRecord()
	checkSeriesRiseBatched(rec, "fill", "memory usage", memSeries(3<<20, 20<<20, 3<<20+written-slack), memoryUsage, written, slack)
	assert.DeepEqual(t, failed(rec.Snapshot().Checks), []string(nil))
	assert.Assert(t, strings.Contains(rec.Snapshot().Checks[1].Want, "less 524288"))
	rec = NewRecord()
	checkSeriesRiseBatched(rec, "fill", "memory usage", memSeries(3<<20, 20<<20, 3<<20+written-slack-1), memoryUsage, written, slack)
	assert.DeepEqual(t, failed(rec.Snapshot().Checks), []string{"fill: observer series: memory usage rose"})
	// A high level from a high baseline is not a rise: the level check
	// this replaced passed here.
	rec = NewRecord()
	checkSeriesRiseBatched(rec, "fill", "memory usage", memSeries(30<<20, 31<<20, 32<<20), memoryUsage, written, slack)
	assert.DeepEqual(t, failed(rec.Snapshot().Checks), []string{"fill: observer series: memory usage rose"})
	rec = NewRecord()
	checkSeriesRiseBatched(rec, "fill", "memory usage", observer.Series{Samples: []observer.Sample{{}, {}}}, memoryUsage, written, slack)
	assert.DeepEqual(t, failed(rec.Snapshot().Checks), []string{"fill: observer series sampled memory usage", "fill: observer series: memory usage rose"})
	rec = NewRecord()
	checkSeriesRiseBatched(rec, "fill", "memory usage", memSeries(3<<20, 4<<20), memoryUsage, 0, slack)
	assert.DeepEqual(t, failed(rec.Snapshot().Checks), []string{"fill: observer series: memory usage rose"})
	assert.Equal(t, chargeSlack(0, 4096), int64(256<<10))

	// 96 CPUs of 4 KiB pages hold 24 MiB of batches, all that was
	// written: uncapped, a flat series passed. The cap at half keeps the
	// check able to fail, and says so in its want.
	big := chargeSlack(96, 4096)
	assert.Equal(t, big, int64(written))
	rec = NewRecord()
	checkSeriesRiseBatched(rec, "fill", "memory usage", memSeries(3<<20, 3<<20, 3<<20), memoryUsage, written, big)
	assert.DeepEqual(t, failed(rec.Snapshot().Checks), []string{"fill: observer series: memory usage rose"})
	assert.Assert(t, strings.Contains(rec.Snapshot().Checks[1].Want, "capped at half of it from 25165824"), rec.Snapshot().Checks[1].Want)
	rec = NewRecord()
	checkSeriesRiseBatched(rec, "fill", "memory usage", memSeries(3<<20, 3<<20+written/2), memoryUsage, written, big)
	assert.DeepEqual(t, failed(rec.Snapshot().Checks), []string(nil))
}
