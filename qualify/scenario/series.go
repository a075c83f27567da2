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
func oomKillCount(s observer.Sample) *int64      { return s.OOMKills }
func pidsCurrent(s observer.Sample) *int64       { return s.PidsCurrent }
func pidsLimitRefusals(s observer.Sample) *int64 { return s.PidsLimitRefusals }

// seriesSampled records that the series has at least two samples: one is
// a snapshot, not a series.
func seriesSampled(rec *Record, name string, s observer.Series) bool {
	return rec.Check(name+": observer series sampled the workload", ">= 2 samples", len(s.Samples), len(s.Samples) >= 2)
}

// checkSeriesOOM records that the series' memory usage came to within 90%
// of limit (bytes) and that its oom_kill counter rose while it ran.
func checkSeriesOOM(rec *Record, name string, s observer.Series, limit int64) {
	seriesSampled(rec, name, s)
	peak, _ := s.Peak(memoryUsage)
	rec.Check(name+": observer series: memory usage reached the limit", fmt.Sprintf(">= 90%% of %d", limit), peak, peak >= limit*9/10)
	rise, ok := s.Rise(oomKillCount)
	rec.Check(name+": observer series: oom_kill rose during it", ">= 1", rise, ok && rise >= 1)
}

// checkSeriesPids records that the series counted forks refused at the
// limit while it ran and saw pids.current reach at least least.
func checkSeriesPids(rec *Record, name string, s observer.Series, least int64) {
	seriesSampled(rec, name, s)
	rise, ok := s.Rise(pidsLimitRefusals)
	rec.Check(name+": observer series: forks refused at pids.max during it", ">= 1", rise, ok && rise >= 1)
	peak, _ := s.Peak(pidsCurrent)
	rec.Check(name+": observer series: pids.current peak", fmt.Sprintf(">= %d", least), peak, peak >= least)
}

// checkSeriesRise records that field rose by at least least over the
// series (what names the counter and its unit).
func checkSeriesRise(rec *Record, name, what string, s observer.Series, field func(observer.Sample) *int64, least int64) {
	seriesSampled(rec, name, s)
	rise, ok := s.Rise(field)
	rec.Check(fmt.Sprintf("%s: observer series: %s rose", name, what), fmt.Sprintf(">= %d", least), rise, ok && rise >= least)
}
