package scenario

import (
	"context"
	"fmt"

	"github.com/qualbox/qualbox/qualify/observer"
)

// Time series in evidence (docs/qualification.md#evidence): while an
// exhaustion scenario's workload runs, the observer samples the sandbox's
// cgroup counters every observer.DefaultSeriesInterval, and the series is
// recorded as observed["series:<sandbox>"] with checks that it shows what
// the before/during snapshots claim: the counter reached the limit.

// series starts sampling o's scope. The returned stop ends the sampling,
// records the series and returns it; it is safe to call more than once
// (defer it for the error paths, call it where the workload is done).
func (o *observed) series(ctx context.Context) func() observer.Series {
	sm := o.scope.Sample(ctx, o.env.HostFS(), observer.DefaultSeriesInterval, observer.DefaultMaxSamples)
	return func() observer.Series {
		s := sm.Stop()
		o.rec.Observe("series:"+o.name, s)
		return s
	}
}

func memoryUsage(s observer.Sample) *int64       { return s.MemoryUsageBytes }
func memoryPeak(s observer.Sample) *int64        { return s.MemoryPeakBytes }
func oomKillCount(s observer.Sample) *int64      { return s.OOMKills }
func pidsCurrent(s observer.Sample) *int64       { return s.PidsCurrent }
func pidsLimitRefusals(s observer.Sample) *int64 { return s.PidsLimitRefusals }

// seriesSampled records that at least two samples (the one before the
// workload and Stop's after it, at the least) could read the counter
// field picks: a series whose files were unreadable shows nothing.
func seriesSampled(rec *Record, name, what string, s observer.Series, field func(observer.Sample) *int64) bool {
	n := s.Readable(field)
	return rec.Check(name+": observer series sampled "+what, ">= 2 readable samples", n, n >= 2)
}

// checkSeriesOOM records that the series' memory came to within 90% of
// limit (bytes) and that its oom_kill counter rose while it ran. Memory is
// judged by the kernel's high-water mark (memory.max_usage_in_bytes,
// memory.peak) where the series has it: the usage is at its highest only
// for the last pages before the kill, which a 50 ms tick rarely catches,
// and is freed by the kill. Without the mark (cgroup v2 before Linux
// 5.19) the sampled usage must show it.
func checkSeriesOOM(rec *Record, name string, s observer.Series, limit int64) {
	field, what := memoryUsage, "memory usage"
	if s.Readable(memoryPeak) > 0 {
		field, what = memoryPeak, "memory high-water mark"
	}
	seriesSampled(rec, name, what, s, field)
	peak, ok := s.Peak(field)
	rec.Check(name+": observer series: "+what+" reached the limit", fmt.Sprintf(">= 90%% of %d", limit), peak, ok && peak >= limit*9/10)
	seriesSampled(rec, name, "oom_kill", s, oomKillCount)
	rise, ok := s.Rise(oomKillCount)
	rec.Check(name+": observer series: oom_kill rose during it", ">= 1", rise, ok && rise >= 1)
}

// checkSeriesPids records that the series counted forks refused at the
// limit while it ran and saw pids.current reach at least least.
func checkSeriesPids(rec *Record, name string, s observer.Series, least int64) {
	seriesSampled(rec, name, "fork refusals", s, pidsLimitRefusals)
	rise, ok := s.Rise(pidsLimitRefusals)
	rec.Check(name+": observer series: forks refused at pids.max during it", ">= 1", rise, ok && rise >= 1)
	peak, ok := s.Peak(pidsCurrent)
	rec.Check(name+": observer series: pids.current peak", fmt.Sprintf(">= %d", least), peak, ok && peak >= least && least > 0)
}

// checkSeriesRise records that field rose by at least least over the
// series (what names the counter and its unit).
func checkSeriesRise(rec *Record, name, what string, s observer.Series, field func(observer.Sample) *int64, least int64) {
	seriesSampled(rec, name, what, s, field)
	rise, ok := s.Rise(field)
	rec.Check(fmt.Sprintf("%s: observer series: %s rose", name, what), fmt.Sprintf(">= %d", least), rise, ok && rise >= least)
}

// memcgChargeBatchPages is the most pages the kernel's memory cgroup
// charges ahead per CPU (MEMCG_CHARGE_BATCH, 64 since Linux 5.x; 32
// before): a counter sampled before a write may already hold up to that
// many pages per CPU of it, so its rise over the write can fall short of
// the bytes written by at most nCPU of these batches.
const memcgChargeBatchPages = 64

// chargeSlack returns the bytes a cgroup memory counter's rise may fall
// short by on an Engine host of ncpu CPUs with pages of page bytes.
func chargeSlack(ncpu, page int64) int64 {
	if ncpu < 1 {
		ncpu = 1
	}
	return ncpu * memcgChargeBatchPages * page
}

// checkSeriesRiseBatched records that field rose over the series by at
// least least bytes less slack (what names the counter and its unit). It
// is the check for a counter the kernel keeps in per-CPU batches (cgroup
// v1's memory.usage_in_bytes; see chargeSlack): a rise fell a few hundred
// KiB short of what was written on a 2-CPU host. The slack is capped at
// half of least, so that on a host with many CPUs or large pages (96 CPUs
// of 4 KiB pages hold 24 MiB of batches) a flat series still fails; the
// want states the tolerance so that a reader can see how much was allowed.
func checkSeriesRiseBatched(rec *Record, name, what string, s observer.Series, field func(observer.Sample) *int64, least, slack int64) {
	seriesSampled(rec, name, what, s, field)
	rise, ok := s.Rise(field)
	want := fmt.Sprintf(">= %d (written %d less %d of per-CPU charge batches)", least-slack, least, slack)
	if slack > least/2 {
		want = fmt.Sprintf(">= %d (written %d less %d of per-CPU charge batches, capped at half of it from %d)", least-least/2, least, least/2, slack)
		slack = least / 2
	}
	rec.Check(fmt.Sprintf("%s: observer series: %s rose", name, what), want,
		rise, ok && least > 0 && rise >= least-slack)
}
