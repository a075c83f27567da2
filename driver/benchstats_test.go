package driver_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/qualbox/qualbox/driver/internal/enginetest"
)

// Every benchmark here takes one sample per iteration, and a sample that
// has a reference measures qualbox and the reference back to back in the
// same iteration (qualbox, reference, qualbox, reference, ...), so both see
// the same Engine, image and machine load. Run them with -benchtime 1x and
// -count 5 or more (`make bench`): each run prints one benchstat line, and
// TestMain prints one table of every measure with its median, min, max and
// target over all samples of the process.

// goal is a benchmark target: the median of the samples compared with
// value by op ("<=", ">=" or "<").
type goal struct {
	op    string
	value float64
}

func atMost(v float64) *goal   { return &goal{"<=", v} }
func atLeast(v float64) *goal  { return &goal{">=", v} }
func below(v float64) *goal    { return &goal{"<", v} }
func (g *goal) String() string { return g.op + " " + strconv.FormatFloat(g.value, 'f', -1, 64) }

func (g *goal) met(v float64) bool {
	switch g.op {
	case "<=":
		return v <= g.value
	case ">=":
		return v >= g.value
	case "<":
		return v < g.value
	}
	return false
}

// minSamples is how many samples a target needs before the table calls it met.
const minSamples = 5

// series is one measure of one benchmark over every sample of the process.
type series struct {
	bench, measure string
	goal           *goal
	samples        []float64
	// ours and ref hold the two sides of a ratio's samples, in unit.
	ours, ref []float64
	unit      string
	load      []float64 // 1-minute load average at each sample
}

var results struct {
	mu     sync.Mutex
	order  []*series
	byName map[string]*series
}

func seriesFor(b *testing.B, measure string, g *goal) *series {
	results.mu.Lock()
	defer results.mu.Unlock()
	key := b.Name() + "\x00" + measure
	if results.byName == nil {
		results.byName = map[string]*series{}
	}
	s := results.byName[key]
	if s == nil {
		s = &series{bench: b.Name(), measure: measure, goal: g}
		results.byName[key] = s
		results.order = append(results.order, s)
	}
	return s
}

// loadAverage returns the 1-minute load average, or -1.
func loadAverage() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

// metricName turns a measure into a benchstat unit: no spaces.
func metricName(s string) string { return strings.ReplaceAll(s, " ", "-") }

// recordRatio records one interleaved sample: ratio of qualbox (ours) to the
// reference (ref), both in unit. It reports the three as benchmark metrics
// (the last sample's when b.N > 1; use -benchtime 1x).
func recordRatio(b *testing.B, measure string, g *goal, ratio, ours, ref float64, unit string) {
	b.Helper()
	s := seriesFor(b, measure, g)
	results.mu.Lock()
	s.samples = append(s.samples, ratio)
	s.ours = append(s.ours, ours)
	s.ref = append(s.ref, ref)
	s.unit = unit
	s.load = append(s.load, loadAverage())
	results.mu.Unlock()
	b.ReportMetric(ratio, metricName(measure)+"-ratio")
	b.ReportMetric(ours, "qualbox-"+unit)
	b.ReportMetric(ref, "reference-"+unit)
}

// recordValue records one sample of a measure without a reference.
func recordValue(b *testing.B, measure string, g *goal, v float64, unit string) {
	b.Helper()
	s := seriesFor(b, measure, g)
	results.mu.Lock()
	s.samples = append(s.samples, v)
	s.unit = unit
	s.load = append(s.load, loadAverage())
	results.mu.Unlock()
	b.ReportMetric(v, metricName(measure)+"-"+unit)
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else if n > 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return 0
}

func num(v float64) string {
	switch a := max(v, -v); {
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// writeResults prints the table of every recorded measure to w; it prints
// nothing when no benchmark recorded a sample.
func writeResults(w io.Writer) {
	results.mu.Lock()
	defer results.mu.Unlock()
	if len(results.order) == 0 {
		return
	}
	host, _ := os.Hostname()
	engine := "unknown Engine"
	if cli, err := client.New(client.WithHost("unix://" + enginetest.Socket())); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if v, err := cli.ServerVersion(ctx, client.ServerVersionOptions{}); err == nil {
			engine = fmt.Sprintf("Engine %s (API %s)", v.Version, v.APIVersion)
		}
		cancel()
		cli.Close()
	}
	fmt.Fprintf(w, "\nqualbox benchmarks, %s, host %s (%d CPUs, %s/%s), %s at %s\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), host, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, engine, enginetest.Socket())
	fmt.Fprintf(w, "median, min and max over n samples; a ratio's sample measures qualbox and its reference back to back\n")
	tab := tablewriter.NewTable(w,
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAlignment(tw.AlignLeft),
	)
	tab.Header([]string{"Benchmark", "Measure", "n", "Median", "Min", "Max", "Target", "Met", "Medians: qualbox / reference", "Load (1m)"})
	for _, s := range results.order {
		med := median(s.samples)
		target, met := "-", "-"
		if s.goal != nil {
			target = s.goal.String()
			switch {
			case len(s.samples) < minSamples:
				met = fmt.Sprintf("too few samples (%d < %d)", len(s.samples), minSamples)
			case s.goal.met(med):
				met = "yes"
			default:
				met = "NO"
			}
		}
		measure := s.measure
		sides := "-"
		if len(s.ours) > 0 {
			sides = fmt.Sprintf("%s / %s %s", num(median(s.ours)), num(median(s.ref)), s.unit)
		} else if s.unit != "" {
			measure += " (" + s.unit + ")"
		}
		load := fmt.Sprintf("%s..%s", num(slices.Min(s.load)), num(slices.Max(s.load)))
		_ = tab.Append([]string{
			strings.TrimPrefix(s.bench, "Benchmark"), measure, strconv.Itoa(len(s.samples)),
			num(med), num(slices.Min(s.samples)), num(slices.Max(s.samples)), target, met, sides, load,
		})
	}
	_ = tab.Render()
}

// cpuMark is a point in the machine's and this process's CPU time, read
// by markCPU; the zero cpuMark is one that could not be read.
type cpuMark struct {
	busy, self time.Duration
	ok         bool
}

// markCPU reads the CPU time every CPU of the machine spent busy and the
// CPU time of this process (getrusage). Busy time comes from /proc/stat:
// user, nice, system, irq and softirq, in the kernel's fixed USER_HZ of 100
// ticks per second, so 10 ms resolution; steal is left out, being time the
// hypervisor gave to someone else, and guest time is already in user.
func markCPU() cpuMark {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuMark{}
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuMark{}
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7} { // user nice system irq softirq
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return cpuMark{}
		}
		ticks += v
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return cpuMark{}
	}
	self := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return cpuMark{busy: time.Duration(ticks) * 10 * time.Millisecond, self: self, ok: true}
}

// outside returns the CPU time the machine spent busy outside this process
// since m: on a machine running nothing but the benchmark, the Engine's
// (dockerd, containerd, shims, runc and the containers' processes). It is
// 0 where either mark could not be read, or where the 10 ms ticks leave
// nothing measurable.
func (m cpuMark) outside() time.Duration {
	now := markCPU()
	if !m.ok || !now.ok {
		return 0
	}
	return max(0, (now.busy-m.busy)-(now.self-m.self))
}
