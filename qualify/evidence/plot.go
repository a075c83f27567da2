package evidence

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strconv"
	"strings"
)

// The series plots are drawn here rather than by a plotting library: each
// is one or two polylines, a limit line and event marks on one linear
// axis, which is a few dozen lines of SVG, while the plotting libraries
// that draw SVG offline bring fonts and raster image packages into every
// binary that renders a report.

// plotSeries is the part of an observer series (qualify/observer.Series,
// decoded from a scenario's observed["series:<sandbox>"]) a plot reads.
// Numbers are float64, as any JSON reader sees them.
type plotSeries struct {
	IntervalMillis   float64  `json:"intervalMillis"`
	Thinned          int      `json:"thinned"`
	MemoryLimitBytes *float64 `json:"memoryLimitBytes"`
	PidsMax          *float64 `json:"pidsMax"`
	Samples          []struct {
		T                 float64  `json:"t"`
		MemoryUsageBytes  *float64 `json:"memoryUsageBytes"`
		MemoryPeakBytes   *float64 `json:"memoryPeakBytes"`
		OOMKills          *float64 `json:"oomKills"`
		PidsCurrent       *float64 `json:"pidsCurrent"`
		PidsLimitRefusals *float64 `json:"pidsLimitRefusals"`
	} `json:"samples"`
}

// plotLine is one drawn series of (ms, value) points.
type plotLine struct {
	label, class string
	x, y         []float64
}

// plot is one chart: lines, an optional limit, and the offsets (ms) of
// events marked on the time axis.
type plot struct {
	title, unit      string
	scale            float64 // value units per displayed unit
	lines            []plotLine
	limit            *float64
	limitLabel       string
	marks            []float64
	markLabel        string
	spanMs, interval float64
	thinned          int
}

// seriesPlots returns the SVG figures of one sandbox's series: memory
// (usage and high-water mark against the memory limit, OOM kills marked)
// and PIDs (pids.current against pids.max, refused forks marked), each
// only when some sample read it. A value that is not a series renders as
// a note saying so.
func seriesPlots(sandbox string, raw any) []template.HTML {
	var s plotSeries
	if err := roundTrip(raw, &s); err != nil {
		return []template.HTML{template.HTML(`<p class="note">series of ` + html.EscapeString(sandbox) + ` is not readable: ` + html.EscapeString(err.Error()) + `</p>`)}
	}
	var span float64
	if n := len(s.Samples); n > 0 {
		span = s.Samples[n-1].T
	}
	mem := plot{title: "memory of " + sandbox, unit: "MiB", scale: 1 << 20, limit: s.MemoryLimitBytes,
		limitLabel: "memory limit", markLabel: "OOM kill", spanMs: span, interval: s.IntervalMillis, thinned: s.Thinned}
	pids := plot{title: "PIDs of " + sandbox, unit: "tasks", scale: 1, limit: s.PidsMax,
		limitLabel: "pids.max", markLabel: "fork refused", spanMs: span, interval: s.IntervalMillis, thinned: s.Thinned}
	usage := plotLine{label: "usage", class: "l1"}
	peak := plotLine{label: "high-water mark", class: "l2"}
	current := plotLine{label: "pids.current", class: "l1"}
	var lastOOM, lastRefused *float64
	for _, x := range s.Samples {
		add := func(l *plotLine, v *float64) {
			if v != nil {
				l.x, l.y = append(l.x, x.T), append(l.y, *v)
			}
		}
		add(&usage, x.MemoryUsageBytes)
		add(&peak, x.MemoryPeakBytes)
		add(&current, x.PidsCurrent)
		if x.OOMKills != nil {
			if lastOOM != nil && *x.OOMKills > *lastOOM {
				mem.marks = append(mem.marks, x.T)
			}
			lastOOM = x.OOMKills
		}
		if x.PidsLimitRefusals != nil {
			if lastRefused != nil && *x.PidsLimitRefusals > *lastRefused {
				pids.marks = append(pids.marks, x.T)
			}
			lastRefused = x.PidsLimitRefusals
		}
	}
	var out []template.HTML
	for _, l := range []plotLine{usage, peak} {
		if len(l.x) > 0 {
			mem.lines = append(mem.lines, l)
		}
	}
	if len(mem.lines) > 0 {
		out = append(out, mem.svg())
	}
	if len(current.x) > 0 {
		pids.lines = []plotLine{current}
		out = append(out, pids.svg())
	}
	return out
}

// The plot's geometry, in SVG user units (px).
const (
	plotW, plotH                             = 640.0, 240.0
	plotLeft, plotRight, plotTop, plotBottom = 64.0, 16.0, 28.0, 36.0
)

func num(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

// svg draws p. Values above the axis (a limit far above the usage) are
// left off the axis range when the limit is more than ten times the
// largest value, and the limit is then written, not drawn.
func (p plot) svg() template.HTML {
	maxV, maxT := 0.0, p.spanMs
	for _, l := range p.lines {
		for i, v := range l.y {
			maxV = math.Max(maxV, v)
			maxT = math.Max(maxT, l.x[i])
		}
	}
	drawLimit := p.limit != nil && *p.limit > 0 && *p.limit <= 10*math.Max(maxV, 1)
	if drawLimit {
		maxV = math.Max(maxV, *p.limit)
	}
	if maxV <= 0 {
		maxV = 1
	}
	maxV *= 1.08
	if maxT <= 0 {
		maxT = 1
	}
	w, h := plotW-plotLeft-plotRight, plotH-plotTop-plotBottom
	px := func(t float64) float64 { return plotLeft + t/maxT*w }
	py := func(v float64) float64 { return plotTop + h - v/maxV*h }
	var b strings.Builder
	esc := html.EscapeString
	fmt.Fprintf(&b, `<figure class="series"><svg xmlns="http://www.w3.org/2000/svg" class="plot" viewBox="0 0 %s %s" width="%s" height="%s" role="img" aria-label="%s">`,
		num(plotW), num(plotH), num(plotW), num(plotH), esc(p.title))
	fmt.Fprintf(&b, `<text class="title" x="%s" y="16">%s</text>`, num(plotLeft), esc(p.title))
	// Axes and four gridlines with their values in the display unit.
	for i := 0; i <= 4; i++ {
		v := maxV * float64(i) / 4
		y := py(v)
		fmt.Fprintf(&b, `<line class="grid" x1="%s" y1="%s" x2="%s" y2="%s"/>`, num(plotLeft), num(y), num(plotW-plotRight), num(y))
		fmt.Fprintf(&b, `<text class="tick" x="%s" y="%s" text-anchor="end">%s</text>`, num(plotLeft-6), num(y+4), num(v/p.scale))
	}
	fmt.Fprintf(&b, `<text class="tick" x="%s" y="%s" text-anchor="start">0 s</text>`, num(plotLeft), num(plotH-plotBottom+16))
	fmt.Fprintf(&b, `<text class="tick" x="%s" y="%s" text-anchor="end">%s s</text>`, num(plotW-plotRight), num(plotH-plotBottom+16), strconv.FormatFloat(maxT/1000, 'f', 2, 64))
	fmt.Fprintf(&b, `<text class="tick" x="%s" y="%s" text-anchor="middle">%s; every %s ms%s</text>`, num(plotLeft+w/2), num(plotH-6), esc(p.unit),
		strconv.FormatFloat(p.interval, 'f', 0, 64), thinnedText(p.thinned))
	if drawLimit {
		y := py(*p.limit)
		fmt.Fprintf(&b, `<line class="limit" x1="%s" y1="%s" x2="%s" y2="%s"/>`, num(plotLeft), num(y), num(plotW-plotRight), num(y))
		fmt.Fprintf(&b, `<text class="limit-label" x="%s" y="%s" text-anchor="end">%s %s %s</text>`, num(plotW-plotRight), num(y-4), esc(p.limitLabel), num(*p.limit/p.scale), esc(p.unit))
	} else if p.limit != nil {
		fmt.Fprintf(&b, `<text class="limit-label" x="%s" y="%s" text-anchor="end">%s %s %s (off the axis)</text>`, num(plotW-plotRight), num(plotTop+10), esc(p.limitLabel), num(*p.limit/p.scale), esc(p.unit))
	}
	for i, t := range p.marks {
		x := px(t)
		fmt.Fprintf(&b, `<line class="mark" x1="%s" y1="%s" x2="%s" y2="%s"/>`, num(x), num(plotTop), num(x), num(plotTop+h))
		if i == 0 {
			// Right of the mark, or left of it near the right edge.
			lx, anchor := x+3, "start"
			if x > plotLeft+w*0.75 {
				lx, anchor = x-3, "end"
			}
			fmt.Fprintf(&b, `<text class="mark-label" x="%s" y="%s" text-anchor="%s">%s</text>`, num(lx), num(plotTop+h-4), anchor, esc(p.markLabel))
		}
	}
	for i, l := range p.lines {
		pts := make([]string, len(l.x))
		for k := range l.x {
			pts[k] = num(px(l.x[k])) + "," + num(py(l.y[k]))
		}
		fmt.Fprintf(&b, `<polyline class="%s" points="%s"/>`, l.class, strings.Join(pts, " "))
		fmt.Fprintf(&b, `<text class="legend %s" x="%s" y="16" text-anchor="end">%s</text>`, l.class, num(plotW-plotRight-float64(len(p.lines)-1-i)*130), esc(l.label))
	}
	b.WriteString(`</svg></figure>`)
	// Every value above is a number or escaped text.
	return template.HTML(b.String())
}

func thinnedText(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (thinned %d×)", n)
}
