package evidence_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/profiles"
	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/evidence"
)

var harnessV2 = &evidence.Harness{Module: "github.com/qualbox/qualbox", Version: "(devel)", VCSRevision: "0123456789abcdef",
	CatalogueVersion: 2, CatalogueSHA256: strings.Repeat("c", 64)}

// passedReport is a verified report in which every scenario passed, with
// harness identity h, edited by edit.
func passedReport(t *testing.T, h *evidence.Harness, edit func(*evidence.Run)) *evidence.Signed {
	t.Helper()
	dir, keys := signedReport(t, func(r *evidence.Run) {
		r.Harness = h
		r.Scenarios = r.Scenarios[:2]
		r.Scenarios[1].Verdict, r.Scenarios[1].Passed, r.Scenarios[1].Detail = evidence.Verdict{Kind: evidence.Passed}, 2, ""
		r.Verdict = evidence.Verdict{Kind: evidence.Passed}
		if edit != nil {
			edit(r)
		}
	})
	s, err := evidence.VerifyRun(context.Background(), dir, pub(t, keys))
	assert.NilError(t, err)
	return s
}

func laneB(r *evidence.Run) { r.Engine.Version = "2.0.0-beta.24"; r.Manifest.SHA256 = "bb" }

// asLinuxX64 makes the fixture a consistent linux-x64 run: the profile,
// the Engine facts lane C records (docs/lanes.md) and their admission.
func asLinuxX64(r *evidence.Run) {
	r.Profile = "linux-x64"
	e := &r.Engine
	e.Version, e.APIVersion, e.MinAPIVersion = "2.0.0-beta.24", "1.56", "1.40"
	e.CgroupVersion, e.CgroupDriver = "2", "systemd"
	e.SecurityOptions = []string{"name=apparmor,profile=default", "name=seccomp,profile=builtin", "name=cgroupns"}
	prof, err := profiles.Load(r.Profile)
	if err != nil {
		panic(err)
	}
	r.Admission = evidence.Admission{OK: true, Checks: driver.CheckEngineFacts(prof, r.Engine)}
}

func TestGateRequirement(t *testing.T) {
	req := &evidence.Requirement{
		Rows: []evidence.Row{
			{Name: "lane-a", Profile: "linux-x64-cgroupv1", Engine: "20.10.", Manifests: []string{"ab"}},
			{Name: "lane-b", Profile: "linux-x64-cgroupv1", Engine: "2.0.", Manifests: []string{"bb"}},
		},
		Scenarios: []string{"admission", "isolation"},
		Harness:   evidence.HarnessRequirement{MinimumCatalogueVersion: 2},
	}
	gate := func(reports ...*evidence.Signed) []string {
		return evidence.Gate(evidence.Merge(reports), reports, req)
	}
	a, b := passedReport(t, harnessV2, nil), passedReport(t, harnessV2, laneB)
	assert.DeepEqual(t, gate(a, b), []string(nil))

	// One lane alone does not pass a gate meant for two; the message names the row.
	assert.DeepEqual(t, gate(a), []string{"row lane-b (profile linux-x64-cgroupv1, engine 2.0.): no report with a pinned manifest"})

	// A report without harness identity is refused, saying why.
	old := passedReport(t, nil, laneB)
	v := gate(a, old)
	assert.Equal(t, len(v), 1, "%v", v)
	assert.Check(t, is.Contains(v[0], "no harness identity in its signed statement"))

	// An older catalogue is below the minimum.
	v1 := *harnessV2
	v1.CatalogueVersion = 1
	v = gate(a, passedReport(t, &v1, laneB))
	assert.Equal(t, len(v), 1, "%v", v)
	assert.Check(t, is.Contains(v[0], "catalogue version 1 is below the required minimum 2"))

	// Exact catalogue code and a clean revision can be pinned too.
	pinned := *req
	pinned.Harness = evidence.HarnessRequirement{MinimumCatalogueVersion: 2, CatalogueSHA256: []string{strings.Repeat("d", 64)}, CleanRevision: true}
	dirty := *harnessV2
	dirty.VCSModified = true
	v = evidence.Gate(evidence.Merge([]*evidence.Signed{a}), []*evidence.Signed{a}, &pinned)
	assert.Check(t, is.Contains(strings.Join(v, "\n"), "is not one of "+strings.Repeat("d", 64)))
	clean := evidence.HarnessRequirement{MinimumCatalogueVersion: 2, CleanRevision: true}
	assert.Check(t, is.Contains(clean.Check(&dirty), "a clean VCS revision is required"))
	assert.Equal(t, clean.Check(harnessV2), "")

	// A manifest the row does not pin (say, one that narrowed a scenario).
	narrowed := passedReport(t, harnessV2, func(r *evidence.Run) { laneB(r); r.Manifest.SHA256 = "cc" })
	v = gate(a, narrowed)
	assert.Check(t, is.Contains(strings.Join(v, "\n"), "manifest sha256 cc is not one the row pins (bb)"))
	assert.Check(t, is.Contains(strings.Join(v, "\n"), "row lane-b (profile linux-x64-cgroupv1, engine 2.0.): no report"))

	// A report of no required row.
	desktop := passedReport(t, harnessV2, asLinuxX64)
	v = gate(a, b, desktop)
	assert.Equal(t, len(v), 1, "%v", v)
	assert.Check(t, is.Contains(v[0], "matches no required row"))

	// A required scenario that was skipped.
	skipped := passedReport(t, harnessV2, func(r *evidence.Run) {
		laneB(r)
		r.Scenarios[1] = evidence.ScenarioSummary{Index: 2, Name: "isolation", Dir: "02-isolation", Verdict: evidence.Verdict{Kind: evidence.NotApplicable, Reason: "no"}}
	})
	assert.DeepEqual(t, gate(a, skipped), []string{"T2: isolation: not_applicable (no)"})
}

// resign re-signs dir after its files were edited, with the predicate of
// its evidence.json: only the cross-checks can then find the edit.
func resign(t *testing.T, dir, keys string) {
	t.Helper()
	assert.NilError(t, os.Remove(filepath.Join(dir, attest.EnvelopeFile)))
	data, err := os.ReadFile(filepath.Join(dir, "evidence.json"))
	assert.NilError(t, err)
	var run evidence.Run
	assert.NilError(t, json.Unmarshal(data, &run))
	key, err := attest.LoadPrivateKey(filepath.Join(keys, attest.PrivateKeyFile))
	assert.NilError(t, err)
	_, err = attest.Sign(context.Background(), dir, key, evidence.PredicateType, evidence.PredicateOf(&run))
	assert.NilError(t, err)
}

func edit(t *testing.T, path, old, new string) {
	t.Helper()
	data, err := os.ReadFile(path)
	assert.NilError(t, err)
	assert.Assert(t, bytes.Contains(data, []byte(old)), "%s has no %q", path, old)
	assert.NilError(t, os.WriteFile(path, bytes.Replace(data, []byte(old), []byte(new), 1), 0o644))
}

// A validly signed report whose files disagree with evidence.json, or
// whose verdicts do not follow from their checks, does not verify; the
// problem names the file.
func TestVerifyCrossChecksEverySignedFile(t *testing.T) {
	for _, tc := range []struct {
		name, file, want string
		tamper           func(t *testing.T, dir string)
	}{
		{"summary row says passed", "summary.md", "row 2 is 2 | isolation | passed | 1/2", func(t *testing.T, dir string) {
			edit(t, filepath.Join(dir, "summary.md"), "| isolation | failed         |", "| isolation | passed         |")
		}},
		{"summary verdict line", "summary.md", `has no line "- Verdict: **failed**"`, func(t *testing.T, dir string) {
			edit(t, filepath.Join(dir, "summary.md"), "- Verdict: **failed**", "- Verdict: **passed**")
		}},
		{"junit drops the failure", "junit.xml", "test case 2 is isolation passed", func(t *testing.T, dir string) {
			edit(t, filepath.Join(dir, "junit.xml"), `<failure message=`, `<system-err message=`)
			edit(t, filepath.Join(dir, "junit.xml"), `</failure>`, `</system-err>`)
		}},
		{"junit counts", "junit.xml", "testsuite failures=0, evidence.json says 1", func(t *testing.T, dir string) {
			edit(t, filepath.Join(dir, "junit.xml"), `tests="4" failures="1" errors="0" skipped`, `tests="4" failures="0" errors="0" skipped`)
		}},
		{"scenario passed over a failed check", "02-isolation/evidence.json", `verdict passed, but check "CapEff" failed`, func(t *testing.T, dir string) {
			edit(t, filepath.Join(dir, "02-isolation", "evidence.json"), `"kind": "failed"`, `"kind": "passed"`)
		}},
		{"scenario check counts", "02-isolation/evidence.json", "2/2 checks passed, but evidence.json says 1/2", func(t *testing.T, dir string) {
			edit(t, filepath.Join(dir, "02-isolation", "evidence.json"), `"ok": false`, `"ok": true`)
		}},
		{"passed with no checks", "01-admission/evidence.json", "verdict passed with no checks recorded", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "01-admission", "evidence.json")
			data, _ := os.ReadFile(p)
			var s map[string]any
			assert.NilError(t, json.Unmarshal(data, &s))
			s["checks"] = []any{}
			assert.NilError(t, evidence.WriteJSON(p, s))
		}},
		{"run verdict passed over a failed scenario", "evidence.json", "run verdict passed, but scenario isolation failed", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "evidence.json")
			data, _ := os.ReadFile(p)
			var r evidence.Run
			assert.NilError(t, json.Unmarshal(data, &r))
			r.Verdict = evidence.Verdict{Kind: evidence.Passed}
			assert.NilError(t, evidence.WriteJSON(p, &r))
		}},
		{"scenario file nobody lists", "09-extra/evidence.json", "scenario evidence that evidence.json does not list", func(t *testing.T, dir string) {
			assert.NilError(t, os.Mkdir(filepath.Join(dir, "09-extra"), 0o755))
			assert.NilError(t, evidence.WriteJSON(filepath.Join(dir, "09-extra", "evidence.json"), &evidence.Scenario{
				Schema: evidence.Schema, Index: 9, Name: "extra", Checks: []evidence.Check{{Name: "x", OK: true}}, Verdict: evidence.Verdict{Kind: evidence.Passed}}))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, keys := signedReport(t, nil)
			tc.tamper(t, dir)
			resign(t, dir, keys)
			_, err := evidence.VerifyRun(context.Background(), dir, pub(t, keys))
			ps := problems(t, err)
			found := false
			for _, p := range ps {
				found = found || p.File == tc.file && strings.Contains(p.Problem, tc.want)
			}
			assert.Assert(t, found, "want %s: %s, got %v", tc.file, tc.want, ps)
		})
	}
}

// A flaky cell fails the gate even without a requirement and with a run
// verdict that says passed: flaky ranks with failed.
func TestGateRefusesAFlakyCell(t *testing.T) {
	m := &evidence.Matrix{
		Scenarios: []string{"isolation"},
		Columns:   []evidence.MatrixColumn{{Key: "T1", RunVerdicts: []evidence.Verdict{{Kind: evidence.Passed}}, Reports: []string{"r"}}},
		Cells:     [][]evidence.Cell{{{Kind: evidence.Flaky, Reason: "passed 19 of 20", Passed: 0, Runs: 1}}},
	}
	got := evidence.Gate(m, nil, nil)
	assert.Assert(t, is.Len(got, 1), "%v", got)
	assert.Check(t, is.Contains(got[0], "T1: isolation: flaky"))
}

// A policy's maxReportAge refuses a report whose run ended longer ago.
func TestGateRefusesAReportOlderThanMaxReportAge(t *testing.T) {
	a := passedReport(t, harnessV2, nil)
	req := &evidence.Requirement{
		Rows:      []evidence.Row{{Name: "lane-a", Profile: "linux-x64-cgroupv1", Engine: "20.10.", Manifests: []string{"ab"}}},
		Scenarios: []string{"admission"}, Harness: evidence.HarnessRequirement{MinimumCatalogueVersion: 2},
		MaxReportAge: time.Hour,
	}
	reports := []*evidence.Signed{a}
	v := evidence.Gate(evidence.Merge(reports), reports, req)
	assert.Assert(t, is.Len(v, 1), "%v", v)
	assert.Check(t, is.Contains(v[0], "run ended 2026-11-29T10:00:02Z"))
	assert.Check(t, is.Contains(v[0], "beyond the policy's maxReportAge 1h0m0s"))
	req.MaxReportAge = 100 * 365 * 24 * time.Hour
	assert.DeepEqual(t, evidence.Gate(evidence.Merge(reports), reports, req), []string(nil))
}
