package evidence_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/qualify/evidence"
)

// htmlReport is signedReport with the report.html its evidence renders,
// re-signed: a report as a run writes it.
func htmlReport(t *testing.T) (dir, keys string) {
	t.Helper()
	dir, keys = signedReport(t, nil)
	run, failed := fixedRun()
	run.Tuple = evidence.TupleOf(run)
	page, err := evidence.RunHTML(run, scenarioFiles(run, failed))
	assert.NilError(t, err)
	assert.NilError(t, evidence.WriteFile(filepath.Join(dir, evidence.HTMLFile), page))
	resign(t, dir, keys)
	return dir, keys
}

// report.html is signed and re-rendered at verification: the page a
// release manager opens says what the evidence says, or the report is
// refused. A key holder's edit of a verdict, a check or an appended
// sentence is refused naming the line.
func TestVerifyRefusesAnEditedHTMLReport(t *testing.T) {
	dir, keys := htmlReport(t)
	s, err := evidence.VerifyRun(context.Background(), dir, pub(t, keys))
	assert.NilError(t, err)
	assert.Equal(t, s.Subjects, 8, "report.html is a subject")

	for _, tc := range []struct{ name, old, new string }{
		{"scenario verdict", `isolation</a></td><td>failed`, `isolation</a></td><td>passed`},
		{"check outcome", `<td class="got">00000000a80425fb</td><td>no</td>`, `<td class="got">0000000000000000</td><td>yes</td>`},
		{"appended note", `</body></html>`, `<p>The isolation failure is a known flake.</p></body></html>`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refusedFor(t, evidence.HTMLFile, "differs from what the evidence renders: line", func(t *testing.T, dir string) {
				run, failed := fixedRun()
				run.Tuple = evidence.TupleOf(run)
				page, err := evidence.RunHTML(run, scenarioFiles(run, failed))
				assert.NilError(t, err)
				assert.NilError(t, evidence.WriteFile(filepath.Join(dir, evidence.HTMLFile), page))
				edit(t, filepath.Join(dir, evidence.HTMLFile), tc.old, tc.new)
			})
		})
	}
}

// goSeries has the JSON shape of qualify/observer.Series with its fields
// in the observer's order, not the alphabetical order a decoded map
// marshals in: the page rendered from it at write time must be the page
// rendered from its JSON at verification.
type goSeries struct {
	Version          int        `json:"version"`
	IntervalMillis   int64      `json:"intervalMillis"`
	MaxSamples       int        `json:"maxSamples"`
	Thinned          int        `json:"thinned"`
	MemoryLimitBytes *int64     `json:"memoryLimitBytes"`
	PidsMax          *int64     `json:"pidsMax"`
	Samples          []goSample `json:"samples"`
}

type goSample struct {
	T                 int64  `json:"t"`
	MemoryUsageBytes  *int64 `json:"memoryUsageBytes"`
	MemoryPeakBytes   *int64 `json:"memoryPeakBytes,omitempty"`
	OOMKills          *int64 `json:"oomKills"`
	PidsCurrent       *int64 `json:"pidsCurrent"`
	PidsLimitRefusals *int64 `json:"pidsLimitRefusals"`
}

func i64(v int64) *int64 { return &v }

// A memory-exhaustion series: usage climbing to the 64 MiB limit, the
// OOM kill at 150 ms, PIDs flat under pids.max 64.
func exhaustionSeries() goSeries {
	s := goSeries{Version: 2, IntervalMillis: 50, MaxSamples: 1200, MemoryLimitBytes: i64(64 << 20), PidsMax: i64(64)}
	for i, mib := range []int64{1, 20, 60, 2} {
		oom := int64(0)
		if i >= 3 {
			oom = 1
		}
		s.Samples = append(s.Samples, goSample{T: int64(i) * 50, MemoryUsageBytes: i64(mib << 20), MemoryPeakBytes: i64(max(mib, 63) << 20),
			OOMKills: i64(oom), PidsCurrent: i64(3), PidsLimitRefusals: i64(0)})
	}
	return s
}

func TestRunHTMLPlotsSeriesAgainstTheirLimits(t *testing.T) {
	run, failed := fixedRun()
	run.Tuple = evidence.TupleOf(run)
	scenarios := scenarioFiles(run, failed)
	scenarios[0].Observed = map[string]any{"series:qb-1": exhaustionSeries(), "other": 1}
	scenarios[0].Checks = append(scenarios[0].Checks, evidence.Check{Name: `<script>alert("x")</script>`, Want: "a & b", Got: "<b>", OK: true})
	page, err := evidence.RunHTML(run, scenarios)
	assert.NilError(t, err)
	html := string(page)
	assert.Check(t, strings.HasPrefix(html, "<!DOCTYPE html>\n"))
	assert.Check(t, is.Equal(strings.Count(html, `<svg xmlns="http://www.w3.org/2000/svg" class="plot"`), 2), "a memory and a PID plot")
	assert.Check(t, is.Contains(html, `aria-label="memory of qb-1"`))
	assert.Check(t, is.Contains(html, `memory limit 64.0 MiB`))
	assert.Check(t, is.Contains(html, `pids.max 64.0 tasks`))
	assert.Check(t, is.Equal(strings.Count(html, `<line class="mark"`), 1), "one OOM kill, at the sample where oom_kill rose")
	assert.Check(t, is.Contains(html, `>OOM kill</text>`))
	assert.Check(t, is.Contains(html, `<polyline class="l2"`), "the high-water mark is drawn")
	// Text from evidence is escaped; the page runs no script and loads
	// nothing.
	assert.Check(t, !strings.Contains(html, "<script"), "unescaped script")
	assert.Check(t, is.Contains(html, "&lt;script&gt;"))
	for _, ref := range []string{"src=", "@import", "url(", "http://", "https://"} {
		n := strings.Count(html, ref)
		if ref == "http://" {
			n -= strings.Count(html, `xmlns="http://www.w3.org/2000/svg"`)
		}
		assert.Check(t, n == 0, "%d references %q", n, ref)
	}

	// Rendered again from the JSON a verifier reads: the same bytes.
	var parsed []*evidence.Scenario
	for _, s := range scenarios {
		data, err := json.Marshal(s)
		assert.NilError(t, err)
		var p evidence.Scenario
		assert.NilError(t, json.Unmarshal(data, &p))
		parsed = append(parsed, &p)
	}
	again, err := evidence.RunHTML(run, parsed)
	assert.NilError(t, err)
	assert.Equal(t, string(again), html)
}

// A series value that is not a series (a forger's or an older shape) is a
// note on the page, never a failed rendering.
func TestRunHTMLNotesAnUnreadableSeries(t *testing.T) {
	run, failed := fixedRun()
	run.Tuple = evidence.TupleOf(run)
	scenarios := scenarioFiles(run, failed)
	scenarios[0].Observed = map[string]any{"series:qb-1": "not a series"}
	page, err := evidence.RunHTML(run, scenarios)
	assert.NilError(t, err)
	assert.Check(t, is.Contains(string(page), `series of qb-1 is not readable: json: cannot unmarshal string`))
	assert.Check(t, !strings.Contains(string(page), "<svg"))
}

// The page a run writes is deterministic: Go's random map order does not
// reach it (series are plotted in sandbox order), so rendering it again
// gives the same bytes.
func TestRunHTMLIsDeterministic(t *testing.T) {
	run, failed := fixedRun()
	run.Tuple = evidence.TupleOf(run)
	scenarios := scenarioFiles(run, failed)
	obs := map[string]any{}
	for _, k := range []string{"series:qb-3", "series:qb-1", "series:qb-2"} {
		obs[k] = exhaustionSeries()
	}
	scenarios[0].Observed = obs
	first, err := evidence.RunHTML(run, scenarios)
	assert.NilError(t, err)
	for range 5 {
		again, err := evidence.RunHTML(run, scenarios)
		assert.NilError(t, err)
		assert.Equal(t, string(again), string(first))
	}
	i1, i2, i3 := strings.Index(string(first), "memory of qb-1"), strings.Index(string(first), "memory of qb-2"), strings.Index(string(first), "memory of qb-3")
	assert.Check(t, i1 > 0 && i1 < i2 && i2 < i3, "plots in sandbox order")
}

// A scenario listed as not run has no section, so its row names it
// without a link that would lead nowhere; a run one links its section.
func TestRunHTMLLinksOnlyScenariosWithASection(t *testing.T) {
	run, failed := fixedRun()
	run.Tuple = evidence.TupleOf(run)
	scenarios := scenarioFiles(run, failed)
	assert.Assert(t, len(run.Scenarios) >= 2)
	page, err := evidence.RunHTML(run, scenarios[:1])
	assert.NilError(t, err)
	first, second := run.Scenarios[0], run.Scenarios[1]
	assert.Check(t, is.Contains(string(page), `<a href="#s`+itoa(first.Index)+`">`+first.Name+`</a>`))
	assert.Check(t, !strings.Contains(string(page), `href="#s`+itoa(second.Index)+`"`), "a link to the missing section of %s", second.Name)
	assert.Check(t, is.Contains(string(page), `<td>`+second.Name+`</td>`))
}

func itoa(i int) string { return strconv.Itoa(i) }
