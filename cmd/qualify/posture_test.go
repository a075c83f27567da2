package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/internal/exitcode"
	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/evidence"
)

// A key holder drops every advisory from the recorded posture of a run
// on the synthetic lane A Engine, whose runc 1.3.4 falls under
// CVE-2026-41579, and re-signs: verification accepts the shorter list
// (an older harness knew fewer advisories) and summary.md says "none
// known". What verify and merge show is this build's reading of the
// Engine facts, with the advisory marked as one the report did not
// record, in every rendering; the record stays as the harness wrote it.
func TestVerifyAndMergeShowAdvisoriesTheRecordDropped(t *testing.T) {
	report, keys, policy := pinnedRun(t, 1, true)
	rewrite(t, report, keys, func(r *evidence.Run, files []*evidence.Scenario) []*evidence.Scenario {
		assert.Assert(t, r.Posture != nil)
		assert.Assert(t, is.Len(r.Posture.Advisories, 1), "%+v", r.Posture.Advisories)
		assert.Equal(t, r.Posture.Advisories[0].ID, "CVE-2026-41579")
		r.Posture.Advisories = []evidence.AdvisoryMatch{}
		return files
	})
	summary, err := os.ReadFile(filepath.Join(report, "summary.md"))
	assert.NilError(t, err)
	assert.Assert(t, is.Contains(string(summary), "advisories: none known for these versions"), "the forged record")
	pub := filepath.Join(keys, attest.PublicKeyFile)
	const advisory = "advisory: CVE-2026-41579 runc 1.3.4 (fixed in 1.3.6, 1.4.3, 1.5.0-rc.3)"

	var stdout, stderr bytes.Buffer
	assert.Equal(t, run(context.Background(), []string{"verify", "--key", pub, report}, &stdout, &stderr), exitcode.OK, stderr.String())
	out := stdout.String()
	assert.Check(t, is.Contains(out, "\n  posture: this verifier's reading of the Engine facts; the report's record differs (each difference marked)\n"), out)
	assert.Check(t, is.Contains(out, "\n  "+advisory+": limited writes to the host filesystem from an image with a /dev symlink (not recorded by the report; this verifier's list)\n"), out)
	assert.Check(t, !strings.Contains(out, "none known"), out)

	stdout.Reset()
	assert.Equal(t, run(context.Background(), []string{"verify", "--json", "--key", pub, report}, &stdout, &stderr), exitcode.OK, stderr.String())
	var line struct {
		OK      bool
		Posture evidence.PostureReading
	}
	assert.NilError(t, json.Unmarshal(stdout.Bytes(), &line))
	assert.Check(t, line.OK)
	assert.Check(t, line.Posture.Recorded)
	assert.Assert(t, is.Len(line.Posture.Advisories, 1))
	a := line.Posture.Advisories[0]
	assert.Check(t, a.ID == "CVE-2026-41579" && a.Known && !a.Recorded, "%+v", a)

	const brief = "not recorded by the report (this verifier's list): CVE-2026-41579"
	html := filepath.Join(t.TempDir(), "gate.html")
	for _, format := range [][]string{{"--ascii"}, {"--markdown"}, {"--json"}, {"--html", html}} {
		stdout.Reset()
		stderr.Reset()
		args := append(append([]string{"merge", "--policy", policy}, format...), report)
		assert.Equal(t, run(context.Background(), args, &stdout, &stderr), exitcode.OK, "%v: %s", format, stderr.String())
		out := stdout.String()
		switch format[0] {
		case "--ascii":
			assert.Check(t, is.Contains(out, "\n    "+brief+"\n"), out)
		case "--markdown":
			assert.Check(t, is.Contains(strings.Join(strings.Fields(out), " "), "; advisories: runc 1.3.4: CVE-2026-41579; "+brief), out)
		case "--json":
			var g struct {
				Columns []struct{ Reports []evidence.GateReport }
			}
			assert.NilError(t, json.Unmarshal(stdout.Bytes(), &g))
			assert.Assert(t, is.Len(g.Columns[0].Reports, 1), out)
			p := g.Columns[0].Reports[0].Posture
			assert.Assert(t, p != nil, out)
			assert.Check(t, is.DeepEqual(p.Unrecorded(), []string{"CVE-2026-41579"}))
		case "--html":
			page, err := os.ReadFile(html)
			assert.NilError(t, err)
			// html/template writes the apostrophe as &#39;.
			text := strings.ReplaceAll(string(page), "&#39;", "'")
			assert.Check(t, is.Contains(text, brief), "the column's report line")
			assert.Check(t, is.Contains(text, "CVE-2026-41579 runc 1.3.4 (fixed in 1.3.6, 1.4.3, 1.5.0-rc.3)"), "the report's own facts")
			assert.Check(t, is.Contains(text, "(not recorded by the report; this verifier's list)"))
			assert.Check(t, !strings.Contains(text, "none known"), "the record's posture, shown instead of the reading")
		}
	}
}
