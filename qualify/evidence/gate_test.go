package evidence_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/profiles"
	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/evidence"
	"github.com/qualbox/qualbox/qualify/manifest"
	"github.com/qualbox/qualbox/qualify/scenario"
)

var harnessV2 = &evidence.Harness{Module: "github.com/qualbox/qualbox", Version: "(devel)", VCSRevision: "0123456789abcdef",
	CatalogueVersion: 2, CatalogueSHA256: strings.Repeat("c", 64)}

// harnessPin accepts exactly harnessV2's module and catalogue.
var harnessPin = evidence.HarnessRequirement{Module: "github.com/qualbox/qualbox",
	Catalogues: []evidence.Catalogue{{Version: 2, SHA256: strings.Repeat("c", 64)}}}

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
		// Runs of catalogue v9 and later record their posture.
		if r.Posture == nil && r.Harness != nil && r.Harness.CatalogueVersion >= 9 {
			p := evidence.PostureOf(r, nil)
			r.Posture = &p
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
			{Name: "lane-a", Profile: "linux-x64-cgroupv1", Engine: "20.10.", Manifests: []string{"ab"}, Scenarios: []string{"admission", "isolation"}},
			{Name: "lane-b", Profile: "linux-x64-cgroupv1", Engine: "2.0.", Manifests: []string{"bb"}, Scenarios: []string{"admission", "isolation"}},
		},
		Harness: harnessPin,
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

	// A required scenario that was skipped, or not run at all.
	skipped := passedReport(t, harnessV2, func(r *evidence.Run) {
		laneB(r)
		r.Scenarios[1] = evidence.ScenarioSummary{Index: 2, Name: "isolation", Dir: "02-isolation", Verdict: evidence.Verdict{Kind: evidence.NotApplicable, Reason: "no"}}
	})
	assert.DeepEqual(t, gate(a, skipped), []string{"report " + skipped.Dir + ": row lane-b (profile linux-x64-cgroupv1, engine 2.0.): required scenario isolation: not_applicable (no)"})
	dropped := passedReport(t, harnessV2, func(r *evidence.Run) { laneB(r); r.Scenarios = r.Scenarios[:1] })
	assert.DeepEqual(t, gate(a, dropped), []string{"report " + dropped.Dir + ": row lane-b (profile linux-x64-cgroupv1, engine 2.0.): required scenario isolation was not run"})
}

// A row may pin, beside its current manifest, an older one its committed
// reports ran (a catalogue that grew): the gate requires of each report
// only the row's scenarios that its own pinned manifest lists. A report
// of the older manifest is judged by what it ran; one of the current
// manifest by everything, so a scenario it left not_applicable, or out,
// fails the row. The older manifest lacks datasets, which catalogue
// version 3 added, and the reports are of catalogue v2 (a report of a
// catalogue with datasets owes it: see
// TestGateArchivedManifestExcusesOnlyWhatTheCataloguePredates).
func TestGateRequiresWhatTheReportsOwnManifestLists(t *testing.T) {
	pinned := func(sum string, names ...string) *manifest.Manifest {
		m := &manifest.Manifest{Path: "manifests/" + sum + ".yaml", SHA256: sum, Profile: "linux-x64-cgroupv1", Image: manifest.ImageBuild}
		for _, n := range names {
			m.Scenarios = append(m.Scenarios, manifest.Entry{Name: n, Params: map[string]any{}})
		}
		return m
	}
	current, older := pinned("ab", "admission", "datasets"), pinned("aa", "admission")
	row := evidence.Row{Name: "lane-a", Profile: "linux-x64-cgroupv1", Engine: "20.10.", Manifests: []string{"ab", "aa"},
		Pinned: []*manifest.Manifest{current, older}, Scenarios: []string{"admission", "datasets"}}
	req := &evidence.Requirement{Rows: []evidence.Row{row}, Harness: harnessPin}
	gate := func(s *evidence.Signed) []string {
		return evidence.Gate(evidence.Merge([]*evidence.Signed{s}), []*evidence.Signed{s}, req)
	}
	policy, err := json.Marshal(current.Policy)
	assert.NilError(t, err)
	passedReport := func(t *testing.T, h *evidence.Harness, edit func(*evidence.Run)) *evidence.Signed {
		return passedReport(t, h, func(r *evidence.Run) {
			r.Policy = policy // the run of a manifest records its policy
			r.Scenarios[1].Name, r.Scenarios[1].Dir = "datasets", "02-datasets"
			if edit != nil {
				edit(r)
			}
		})
	}
	const at = ": row lane-a (profile linux-x64-cgroupv1, engine 20.10.): "
	full := passedReport(t, harnessV2, nil)
	assert.Equal(t, strings.Join(gate(full), "\n"), "")
	ranOlder := passedReport(t, harnessV2, func(r *evidence.Run) { r.Manifest.SHA256 = "aa"; r.Scenarios = r.Scenarios[:1] })
	assert.DeepEqual(t, gate(ranOlder), []string(nil))

	notApplicable := passedReport(t, harnessV2, func(r *evidence.Run) {
		r.Scenarios[1] = evidence.ScenarioSummary{Index: 2, Name: "datasets", Dir: "02-datasets", Verdict: evidence.Verdict{Kind: evidence.NotApplicable, Reason: "no"}}
	})
	assert.DeepEqual(t, gate(notApplicable), []string{"report " + notApplicable.Dir + at + "required scenario datasets: not_applicable (no)"})
	dropped := passedReport(t, harnessV2, func(r *evidence.Run) { r.Scenarios = r.Scenarios[:1] })
	assert.DeepEqual(t, gate(dropped), []string{
		"report " + dropped.Dir + at + "lists 1 scenario run(s), but manifest manifests/ab.yaml names 2 scenario(s), run 1 time(s)",
		"report " + dropped.Dir + at + "required scenario datasets was not run"})
}

// The harness pin is exact: a forger who holds a trusted key and claims a
// newer catalogue, a listed version with other scenario code, a foreign
// module, or (under cleanRevision) a dirty build or one without a VCS
// revision, is refused with a message naming what is wrong.
func TestGateHarnessPinIsExact(t *testing.T) {
	row := evidence.Row{Name: "lane-a", Profile: "linux-x64-cgroupv1", Engine: "20.10.", Manifests: []string{"ab"}, Scenarios: []string{"admission"}}
	clean := harnessPin
	clean.CleanRevision = true
	forged := func(edit func(h *evidence.Harness)) *evidence.Harness {
		h := *harnessV2
		edit(&h)
		return &h
	}
	for _, tc := range []struct {
		name    string
		harness *evidence.Harness
		pin     evidence.HarnessRequirement
		want    string
	}{
		{"catalogue v99", forged(func(h *evidence.Harness) { h.CatalogueVersion = 99 }), harnessPin,
			"catalogue version 99 is not an accepted catalogue (accepted: v2 sha256 " + strings.Repeat("c", 64) + ")"},
		{"listed version, unknown digest", forged(func(h *evidence.Harness) { h.CatalogueSHA256 = strings.Repeat("e", 64) }), harnessPin,
			"catalogue sha256 " + strings.Repeat("e", 64) + " is not an accepted digest of catalogue version 2"},
		{"foreign module", forged(func(h *evidence.Harness) { h.Module = "example.com/fork" }), harnessPin,
			`module "example.com/fork" is not the required "github.com/qualbox/qualbox"`},
		{"dirty build", forged(func(h *evidence.Harness) { h.VCSModified = true }), clean,
			"the build of VCS revision 0123456789abcdef has local modifications, and a clean VCS revision is required"},
		{"no VCS revision", forged(func(h *evidence.Harness) { h.VCSRevision = "" }), clean,
			"the build carries no VCS revision and no module version, and a clean VCS revision is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := passedReport(t, tc.harness, nil)
			req := &evidence.Requirement{Rows: []evidence.Row{row}, Harness: tc.pin}
			v := evidence.Gate(evidence.Merge([]*evidence.Signed{rep}), []*evidence.Signed{rep}, req)
			assert.Equal(t, len(v), 1, "%v", v)
			assert.Check(t, is.Contains(v[0], "report "+rep.Dir+": harness identity "))
			assert.Check(t, is.Contains(v[0], tc.want))
			// The honest build passes the same requirement.
			honest := passedReport(t, harnessV2, nil)
			assert.DeepEqual(t, evidence.Gate(evidence.Merge([]*evidence.Signed{honest}), []*evidence.Signed{honest}, req), []string(nil))
		})
	}
	// A module build of a tagged version (go install ...@v1.2.3) carries
	// no VCS stamp and meets cleanRevision; "(devel)" without one does not.
	release := forged(func(h *evidence.Harness) { h.VCSRevision, h.Version = "", "v1.2.3" })
	rep := passedReport(t, release, nil)
	req := &evidence.Requirement{Rows: []evidence.Row{row}, Harness: clean}
	assert.DeepEqual(t, evidence.Gate(evidence.Merge([]*evidence.Signed{rep}), []*evidence.Signed{rep}, req), []string(nil))
	// Go stamps a build of modified source "+dirty" in its version: with or
	// without a VCS revision beside it, that is not clean.
	for _, h := range []*evidence.Harness{
		forged(func(h *evidence.Harness) { h.VCSRevision, h.Version = "", "v0.0.0-20261202182105-a32e32eee20c+dirty" }),
		forged(func(h *evidence.Harness) { h.Version = "v0.0.0-20261202182105-a32e32eee20c+dirty" }),
	} {
		rep := passedReport(t, h, nil)
		v := evidence.Gate(evidence.Merge([]*evidence.Signed{rep}), []*evidence.Signed{rep}, req)
		assert.Assert(t, is.Len(v, 1), "%v", v)
		assert.Check(t, is.Contains(v[0], "carries build metadata +dirty, and a clean VCS revision is required"))
	}
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
			// The failure's text kept as a system-err, its attributes
			// dropped (junit.xml's layout allows none there).
			edit(t, filepath.Join(dir, "junit.xml"), `<failure message="CapEff: want 0000000000000000, got 00000000a80425fb and a tail long enough to be cut short" type="failed">`, `<system-err>`)
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
		Rows:         []evidence.Row{{Name: "lane-a", Profile: "linux-x64-cgroupv1", Engine: "20.10.", Manifests: []string{"ab"}, Scenarios: []string{"admission"}}},
		Harness:      harnessPin,
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

// A Desktop report that passes the eight scenarios its manifest runs
// passes its row of the CI policy; the same report without one of them
// (re-signed by its key holder) fails the row, naming the scenario.
func TestDesktopRowRequiresItsManifestsScenarios(t *testing.T) {
	p, err := evidence.LoadPolicy(filepath.Join("..", "..", ".github", "gate-policy.yaml"), scenario.Default())
	assert.NilError(t, err)
	var row evidence.Row
	for _, r := range p.Requirement.Rows {
		if r.Name == "desktop-native-arm64" {
			row = r
		}
	}
	assert.Equal(t, len(row.Scenarios), 8)
	// This fixture is not a run of the pinned manifest (its params, policy
	// and user differ); the manifest comparison has tests of its own.
	row.Pinned = nil
	// Informational in CI's policy until hosted rows can pass; judged here
	// as the required row it becomes.
	row.Informational = false
	req := &evidence.Requirement{Rows: []evidence.Row{row}, Harness: p.Requirement.Harness}
	pin := p.Requirement.Harness.Catalogues[0]
	desktop := func(drop string) *evidence.Signed {
		h := &evidence.Harness{Module: "github.com/qualbox/qualbox", Version: "(devel)", VCSRevision: "0123456789abcdef",
			CatalogueVersion: pin.Version, CatalogueSHA256: pin.SHA256}
		return passedReport(t, h, func(r *evidence.Run) {
			r.Profile, r.Controller.OS, r.Controller.Arch = row.Profile, "darwin", "arm64"
			r.Runtime = "runc" // the row pins the profile's runtime
			e := &r.Engine
			e.OperatingSystem, e.CgroupVersion, e.CgroupDriver = "Docker Desktop", "2", "cgroupfs"
			e.Arch, e.Architecture, e.APIVersion, e.MinAPIVersion = "arm64", "aarch64", "1.52", "1.24"
			e.SecurityOptions = []string{"name=seccomp,profile=builtin", "name=cgroupns"}
			r.Manifest.SHA256 = row.Manifests[0]
			r.Scenarios = nil
			for _, name := range row.Scenarios {
				if name == drop {
					continue
				}
				i := len(r.Scenarios) + 1
				r.Scenarios = append(r.Scenarios, evidence.ScenarioSummary{Index: i, Name: name, Dir: fmt.Sprintf("%02d-%s", i, name),
					Verdict: evidence.Verdict{Kind: evidence.Passed}, Checks: 2, Passed: 2})
			}
		})
	}
	gate := func(s *evidence.Signed) []string {
		return evidence.Gate(evidence.Merge([]*evidence.Signed{s}), []*evidence.Signed{s}, req)
	}
	assert.DeepEqual(t, gate(desktop("")), []string(nil))
	missing := desktop("datasets")
	assert.DeepEqual(t, gate(missing), []string{"report " + missing.Dir + ": row desktop-native-arm64 (profile desktop-apple-virtualization-native-arm64, runtime runc, controller os darwin, controller arch arm64): required scenario datasets was not run"})
}

// A row pinned to one Engine tuple matches exactly that tuple: an exact
// engine version refuses its release candidates and later patches, a
// prefix ending in "." or "-" keeps matching a series, and each pinned
// commit or storage driver must be the tuple's.
func TestRowPinsOneEngineTuple(t *testing.T) {
	ref := evidence.Row{Name: "ref-29.1.4", Profile: "linux-x64", Engine: "29.1.4", EngineCommit: "08440b6",
		Containerd: "301b2dac98f15c27117da5c8af12118a041a31d9", Runc: "d6d73eb8c60246978da649ffe75ce5c8bca8f856",
		StorageDriver: "overlayfs", OperatingSystem: "Debian GNU/Linux"}
	tuple := evidence.Tuple{Profile: "linux-x64", EngineVersion: "29.1.4", EngineCommit: "08440b6",
		Containerd: ref.Containerd, Runc: ref.Runc, StorageDriver: "overlayfs", OperatingSystem: "Debian GNU/Linux 12 (bookworm)"}
	assert.Check(t, ref.Matches(tuple))
	for name, edit := range map[string]func(t *evidence.Tuple){
		"release candidate":   func(t *evidence.Tuple) { t.EngineVersion = "29.1.4-rc.1" },
		"later patch":         func(t *evidence.Tuple) { t.EngineVersion = "29.1.40" },
		"other Engine commit": func(t *evidence.Tuple) { t.EngineCommit = "fbf3ed2" },
		"Debian's containerd": func(t *evidence.Tuple) { t.Containerd = "1.6.20~ds1-1+deb12u3" },
		"other runc":          func(t *evidence.Tuple) { t.Runc = "module-v1.3.4" },
		"classic image store": func(t *evidence.Tuple) { t.StorageDriver = "overlay2" },
	} {
		other := tuple
		edit(&other)
		assert.Check(t, !ref.Matches(other), name)
	}
	series := evidence.Row{Name: "lane-a", Profile: "linux-x64", Engine: "20.10."}
	assert.Check(t, series.Matches(evidence.Tuple{Profile: "linux-x64", EngineVersion: "20.10.24+dfsg1"}))
	assert.Check(t, !series.Matches(evidence.Tuple{Profile: "linux-x64", EngineVersion: "20.1.0"}))
	assert.Check(t, is.Contains(ref.String(), "engine 29.1.4, engine commit 08440b6, containerd 301b2dac98f1"))
}

// A row that pins the OCI runtime matches only a tuple that records that
// runtime: not one under another runtime, nor a report made before
// tuples recorded it; a row without the pin matches either.
func TestRowRuntimePin(t *testing.T) {
	row := evidence.Row{Name: "lane-a", Profile: "linux-x64-cgroupv1", Engine: "20.10.", Runtime: "runc"}
	tu := evidence.Tuple{Profile: "linux-x64-cgroupv1", EngineVersion: "20.10.24+dfsg1", Runtime: "runc"}
	assert.Check(t, row.Matches(tu))
	assert.Check(t, is.Equal(row.String(), "row lane-a (profile linux-x64-cgroupv1, engine 20.10., runtime runc)"))
	for _, other := range []string{"runsc", ""} {
		tu.Runtime = other
		assert.Check(t, !row.Matches(tu), "runtime %q", other)
	}
	assert.Check(t, !strings.Contains(strings.Join(tu.Lines(), "\n"), "runtime:"), "a tuple without a runtime has no runtime line: %v", tu.Lines())
	row.Runtime = ""
	assert.Check(t, row.Matches(tu))
}

// Forger: a row pins, beside its current manifest, the archived one its
// committed reports ran before the catalogue added warm-pool (catalogue
// version 10). Running that archived manifest today, with a catalogue
// that has warm-pool, must not excuse warm-pool: the archived manifest
// excuses only what the report's own catalogue predates.
func TestGateArchivedManifestExcusesOnlyWhatTheCataloguePredates(t *testing.T) {
	pinned := func(sum string, names ...string) *manifest.Manifest {
		m := &manifest.Manifest{Path: "manifests/" + sum + ".yaml", SHA256: sum, Profile: "linux-x64-cgroupv1", Image: manifest.ImageBuild}
		for _, n := range names {
			m.Scenarios = append(m.Scenarios, manifest.Entry{Name: n, Params: map[string]any{}})
		}
		return m
	}
	current, archived := pinned("ab", "admission", "warm-pool"), pinned("aa", "admission")
	harnessV11 := &evidence.Harness{Module: "github.com/qualbox/qualbox", Version: "(devel)", VCSRevision: "0123456789abcdef",
		CatalogueVersion: 11, CatalogueSHA256: strings.Repeat("d", 64)}
	pin := harnessPin
	pin.Catalogues = append(slices.Clone(pin.Catalogues), evidence.Catalogue{Version: 11, SHA256: strings.Repeat("d", 64)})
	row := evidence.Row{Name: "lane-a", Profile: "linux-x64-cgroupv1", Engine: "20.10.", Manifests: []string{"ab", "aa"},
		Pinned: []*manifest.Manifest{current, archived}, Scenarios: []string{"admission", "warm-pool"}}
	req := &evidence.Requirement{Rows: []evidence.Row{row}, Harness: pin}
	gate := func(s *evidence.Signed) []string {
		return evidence.Gate(evidence.Merge([]*evidence.Signed{s}), []*evidence.Signed{s}, req)
	}
	policy, err := json.Marshal(current.Policy)
	assert.NilError(t, err)
	ranArchived := func(h *evidence.Harness) *evidence.Signed {
		return passedReport(t, h, func(r *evidence.Run) { r.Policy = policy; r.Manifest.SHA256 = "aa"; r.Scenarios = r.Scenarios[:1] })
	}
	// A report of catalogue v2, which has no warm-pool, is judged by what
	// its manifest ran.
	assert.DeepEqual(t, gate(ranArchived(harnessV2)), []string(nil))
	// The same manifest run by catalogue v11 owes warm-pool.
	today := ranArchived(harnessV11)
	assert.DeepEqual(t, gate(today), []string{"report " + today.Dir +
		": row lane-a (profile linux-x64-cgroupv1, engine 20.10.): required scenario warm-pool was not run: its manifest manifests/aa.yaml does not list it, but its catalogue v11 has it (since v10)"})
}
