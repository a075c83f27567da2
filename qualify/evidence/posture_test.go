package evidence_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/qualify/evidence"
)

func TestParseUpstream(t *testing.T) {
	for _, tc := range []struct{ in, up, dist string }{
		{"1.1.5+ds1", "1.1.5", "+ds1"},
		{"1.6.20~ds1", "1.6.20", "~ds1"},
		{"v1.3.3", "1.3.3", ""},
		{"1.4.0-rc.3", "1.4.0-rc.3", ""},
		{"1.4.0-rc3", "1.4.0-rc.3", ""},
		{"1.1.12-0ubuntu3", "1.1.12", "-0ubuntu3"},
	} {
		up, dist, ok := evidence.ParseUpstream(tc.in)
		assert.Check(t, ok, tc.in)
		assert.Check(t, is.Equal(up, tc.up), tc.in)
		assert.Check(t, is.Equal(dist, tc.dist), tc.in)
	}
	for _, bad := range []string{"", "1.1", "main", "d6d73eb8c602", "1.2.8~rc1", "1.4.0~rc2+ds1", "1.2.8-beta", "1.2.8-dev", "1.2.8.1", "1.2.8 (actually 1.1.5)"} {
		_, _, ok := evidence.ParseUpstream(bad)
		assert.Check(t, !ok, bad)
	}
}

// A release line with its own fix is affected below it; a line without
// one is affected below the highest fix; a release candidate is below
// its release.
func TestAdvisoryAffected(t *testing.T) {
	a := evidence.Advisory{ID: "X", Component: "runc", Fixed: []string{"1.2.8", "1.3.3", "1.4.0-rc.3"}}
	for v, want := range map[string]bool{
		"1.1.5": true, "1.2.7": true, "1.2.8": false, "1.2.9": false, "1.3.2": true, "1.3.3": false,
		"1.4.0-rc.2": true, "1.4.0-rc.3": false, "1.4.0": false, "1.5.0": false, "": false, "bogus": false,
	} {
		assert.Check(t, is.Equal(a.Affected(v), want), v)
	}
	assert.Check(t, evidence.Advisory{ID: "Z", Component: "runc"}.Affected("9.9.9"), "nothing fixed yet")
	b := evidence.Advisory{ID: "Y", Component: "runc", Fixed: []string{"1.3.6", "1.4.3", "1.5.0-rc.3"}}
	for v, want := range map[string]bool{"1.2.8": true, "1.3.5": true, "1.3.6": false, "1.4.0-rc.3": true, "1.4.2": true, "1.4.3": false, "1.5.0-rc.2": true, "1.5.0": false} {
		assert.Check(t, is.Equal(b.Affected(v), want), v)
	}
}

// laneAEngine gives the fixture lane A's Engine facts (Debian 12's
// packages, as lane A's /version and /info report them).
func laneAEngine(r *evidence.Run) {
	r.Engine.Components = []string{"Engine 20.10.24+dfsg1", "containerd 1.6.20~ds1", "runc 1.1.5+ds1", "docker-init 0.19.0"}
	r.Engine.RuncCommit, r.Engine.ContainerdCommit = "1.1.5+ds1-1+deb12u1", "1.6.20~ds1-1+deb12u3"
	r.Engine.DefaultRuntime, r.Engine.Runtimes = "runc", []string{"io.containerd.runc.v2=io.containerd.runc.v2", "runc=runc"}
}

// Lane A's Debian runc falls under every runc advisory by version number
// (its changelog backports only CVE-2024-21626), and the posture says the
// build may carry backports; an upstream 1.4.3 falls under none.
func TestPostureOfLaneA(t *testing.T) {
	r := &evidence.Run{}
	laneAEngine(r)
	p := evidence.PostureOf(r, nil)
	runc, ok := p.Component("runc")
	assert.Assert(t, ok)
	assert.Check(t, is.DeepEqual(runc, evidence.Component{Name: "runc", Version: "1.1.5+ds1", Build: "1.1.5+ds1-1+deb12u1", Upstream: "1.1.5", Distribution: "+ds1"}))
	var ids []string
	for _, a := range p.Advisories {
		ids = append(ids, a.ID)
		assert.Check(t, a.Backports, a.ID)
	}
	assert.Check(t, is.DeepEqual(ids, []string{"CVE-2024-21626", "CVE-2025-31133", "CVE-2025-52565", "CVE-2025-52881", "CVE-2026-41579"}))
	lines := strings.Join(p.Lines(), "\n")
	assert.Check(t, is.Contains(lines, "runtime: runc (of io.containerd.runc.v2=io.containerd.runc.v2, runc=runc)"))
	assert.Check(t, is.Contains(lines, "runc: 1.1.5+ds1 (upstream 1.1.5, distribution build 1.1.5+ds1-1+deb12u1)"))
	assert.Check(t, is.Contains(lines, "advisory: CVE-2025-31133 runc 1.1.5+ds1 (fixed in 1.2.8, 1.3.3, 1.4.0-rc.3)"))
	assert.Check(t, is.Contains(lines, "the distribution may have backported the fix"))
	assert.Check(t, is.DeepEqual(p.Brief(), []string{"runtime: runc (of io.containerd.runc.v2=io.containerd.runc.v2, runc=runc)",
		"advisories: runc 1.1.5+ds1: CVE-2024-21626, CVE-2025-31133, CVE-2025-52565, CVE-2025-52881, CVE-2026-41579 by version number (a distribution build: fixes may be backported)"}))

	r.Engine.Components = []string{"runc 1.4.3", "containerd v2.2.1"}
	p = evidence.PostureOf(r, nil)
	assert.Check(t, is.Len(p.Advisories, 0))
	assert.Check(t, is.Contains(strings.Join(p.Lines(), "\n"), "advisories: none known for these versions"))
	assert.Check(t, is.Equal(p.Brief()[1], "advisories: none known for these versions"))
}

// Verification recomputes the recorded posture: a header whose posture
// names another runc, drops a runtime, or lists an advisory that does not
// follow from its own fixed releases is refused, even re-signed.
func TestVerifyRefusesAPostureThatContradictsTheEngineFacts(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		edit       func(*evidence.Posture)
	}{
		{"other runc", "posture components", func(p *evidence.Posture) { p.Components[0].Version = "1.4.3" }},
		{"runtime dropped", "posture runtimes", func(p *evidence.Posture) { p.Runtimes = p.Runtimes[:1] }},
		{"advisory invented", "posture advisory CVE-2099-1 for runc", func(p *evidence.Posture) {
			p.Advisories = append(p.Advisories, evidence.AdvisoryMatch{ID: "CVE-2099-1", Component: "runc", Version: "1.1.5+ds1", Fixed: []string{"1.0.0"}, Backports: true})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, keys := signedReport(t, func(r *evidence.Run) {
				laneAEngine(r)
				p := evidence.PostureOf(r, nil)
				tc.edit(&p)
				r.Posture = &p
			})
			_, err := evidence.VerifyRun(context.Background(), dir, pub(t, keys))
			assert.ErrorContains(t, err, tc.want)
		})
	}
	// The posture as derived verifies.
	dir, keys := signedReport(t, func(r *evidence.Run) {
		laneAEngine(r)
		p := evidence.PostureOf(r, nil)
		r.Posture = &p
	})
	s, err := evidence.VerifyRun(context.Background(), dir, pub(t, keys))
	assert.NilError(t, err)
	summary, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	assert.NilError(t, err)
	assert.Check(t, is.Contains(string(summary), "  - advisory: CVE-2024-21626 runc 1.1.5+ds1"))
	assert.Check(t, s.Run.Posture != nil)
}

// A policy floor refuses lane A's runc by its Engine facts, whatever the
// recorded posture says; naming the exact Debian build accepts it, and
// an upstream release at the floor passes. A version that names no
// release cannot be shown to hold.
func TestGateRefusesARuntimeBelowTheFloor(t *testing.T) {
	req := &evidence.Requirement{
		Rows:    []evidence.Row{{Name: "lane-a", Profile: "linux-x64-cgroupv1", Engine: "20.10.", Manifests: []string{"ab"}, Scenarios: []string{"admission"}}},
		Harness: harnessPin,
		Floors:  []evidence.Floor{{Component: "runc", Minimum: "1.2.8"}},
	}
	gate := func(edit func(*evidence.Run)) []string {
		a := passedReport(t, harnessV2, func(r *evidence.Run) {
			laneAEngine(r)
			edit(r)
		})
		reports := []*evidence.Signed{a}
		return evidence.Gate(evidence.Merge(reports), reports, req)
	}
	v := gate(func(r *evidence.Run) {
		// A recorded posture that leaves its advisories out (which
		// verification cannot see: they are the harness's list) changes
		// nothing.
		p := evidence.PostureOf(r, nil)
		p.Advisories = nil
		r.Posture = &p
	})
	assert.Assert(t, is.Len(v, 1), "%v", v)
	assert.Check(t, is.Contains(v[0], `runc "1.1.5+ds1" (build "1.1.5+ds1-1+deb12u1"): below the policy's floor 1.2.8 and not one of its accepted builds`))
	assert.Check(t, is.Contains(v[0], "falls under CVE-2024-21626, CVE-2025-31133"))

	req.Floors[0].Builds = []string{"1.1.5+ds1-1+deb12u1"}
	assert.Check(t, is.Len(gate(func(*evidence.Run) {}), 0))
	req.Floors[0].Builds = nil
	upstream := func(version string) func(*evidence.Run) {
		return func(r *evidence.Run) {
			r.Engine.Components, r.Engine.RuncCommit = []string{"runc " + version}, "v"+version+"-0-g0123456"
		}
	}
	assert.Check(t, is.Len(gate(upstream("1.4.3")), 0))
	// Fixes come per release line: 1.3.1 is above the floor and still
	// carries the November 2025 escapes, which the floor refuses.
	v = gate(upstream("1.3.1"))
	assert.Assert(t, is.Len(v, 1), "%v", v)
	assert.Check(t, is.Contains(v[0], "at or above the policy's floor 1.2.8, but by version number it falls under CVE-2025-31133"))
	for name, tc := range map[string]struct {
		edit func(*evidence.Run)
		want string
	}{
		"no version":      {func(r *evidence.Run) { r.Engine.Components = []string{"Engine 20.10.24"} }, "the version names no upstream release"},
		"pre-release":     {func(r *evidence.Run) { r.Engine.Components = []string{"runc 1.4.3~rc1"} }, "the version names no upstream release"},
		"listed twice":    {func(r *evidence.Run) { r.Engine.Components = []string{"runc 1.4.3", "runc 1.1.5+ds1"} }, "the Engine lists runc 2 times"},
		"build disagrees": {func(r *evidence.Run) { r.Engine.Components = []string{"runc 1.4.3"} }, "the version names 1.4.3 and the build 1.1.5"},
		"other runtime":   {func(r *evidence.Run) { upstream("1.4.3")(r); r.Engine.DefaultRuntime = "crun" }, `the default runtime is "crun", not runc`},
	} {
		// An accepted build does not excuse any of these.
		req.Floors[0].Builds = []string{"1.1.5+ds1-1+deb12u1", "v1.4.3-0-g0123456"}
		v = gate(tc.edit)
		assert.Check(t, is.Len(v, 1), "%s: %v", name, v)
		if len(v) == 1 {
			assert.Check(t, is.Contains(v[0], tc.want), name)
		}
	}
}

// A key holder's Engine facts that name a vulnerable runc beside the one
// the floor reads are refused, each by its own rule: a build that names
// its release in a form the version check skipped, a second runc spelled
// with other white space or case, and no default runtime recorded (with
// runc not even configured). Builds as real Engines report them (an
// upstream describe, a bare commit, a Go module build, Debian's and
// Ubuntu's package versions, none) still pass.
func TestGateFloorRefusesAHiddenRunc(t *testing.T) {
	req := &evidence.Requirement{
		Rows:    []evidence.Row{{Name: "lane-a", Profile: "linux-x64-cgroupv1", Engine: "20.10.", Manifests: []string{"ab"}, Scenarios: []string{"admission"}}},
		Harness: harnessPin,
		Floors:  []evidence.Floor{{Component: "runc", Minimum: "1.2.8"}},
	}
	gate := func(edit func(*evidence.Run)) []string {
		a := passedReport(t, harnessV2, func(r *evidence.Run) {
			laneAEngine(r)
			r.Engine.Components, r.Engine.RuncCommit = []string{"runc 1.4.3"}, "v1.4.3-0-g0123456"
			edit(r)
			p := evidence.PostureOf(r, nil)
			r.Posture = &p
		})
		reports := []*evidence.Signed{a}
		return evidence.Gate(evidence.Merge(reports), reports, req)
	}
	for name, tc := range map[string]struct {
		edit func(*evidence.Run)
		want string
	}{
		"build with a trailing space": {func(r *evidence.Run) { r.Engine.RuncCommit = "1.1.5+ds1-1+deb12u1 " }, "white space"},
		"build after a prefix":        {func(r *evidence.Run) { r.Engine.RuncCommit = "debian/1.1.5+ds1-1+deb12u1" }, "the version names 1.4.3 and the build 1.1.5"},
		"module build of another":     {func(r *evidence.Run) { r.Engine.RuncCommit = "module-v1.1.5" }, "the version names 1.4.3 and the build 1.1.5"},
		"build of four numbers":       {func(r *evidence.Run) { r.Engine.RuncCommit = "1.1.5.1" }, "the version names 1.4.3 and the build 1.1.5"},
		"build of free text":          {func(r *evidence.Run) { r.Engine.RuncCommit = "old-one" }, "names no release and is not a commit ID"},
		"second runc after a tab": {func(r *evidence.Run) { r.Engine.Components = append(r.Engine.Components, "runc\t1.1.5+ds1") },
			"the Engine lists runc 2 times"},
		"second runc after a no-break space": {func(r *evidence.Run) { r.Engine.Components = append(r.Engine.Components, "runc\u00a01.1.5+ds1") },
			"the Engine lists runc 2 times"},
		"runc in capitals only": {func(r *evidence.Run) { r.Engine.Components = []string{"RUNC 1.4.3"} }, `in another form than "runc <version>"`},
		"no default runtime": {func(r *evidence.Run) { r.Engine.DefaultRuntime, r.Engine.Runtimes = "", []string{"crun=/usr/bin/crun"} },
			"record no default runtime"},
	} {
		req.Floors[0].Builds = []string{"v1.4.3-0-g0123456"}
		v := gate(tc.edit)
		assert.Check(t, is.Len(v, 1), "%s: %v", name, v)
		if len(v) == 1 {
			assert.Check(t, is.Contains(v[0], tc.want), name)
		}
	}
	req.Floors[0].Builds = nil
	for _, build := range []string{"v1.4.3-0-g0123456", "d6d73eb8c60246978da649ffe75ce5c8bca8f856", "module-v1.4.3", "1.4.3-0ubuntu2~22.04.1", ""} {
		v := gate(func(r *evidence.Run) { r.Engine.RuncCommit = build })
		assert.Check(t, is.Len(v, 0), "build %q: %v", build, v)
	}
}

// A verified report's posture is read with this build's advisories: over
// lane A's runc, a record that dropped some of them (re-signed, it still
// verifies: an older harness knew fewer) shows each dropped one marked as
// not recorded, in Lines and in Brief; a record listing one this build
// does not know keeps it, marked as the report's alone; the honest record
// agrees; a report without a record is read all the same; and a run
// without an Engine has nothing to read.
func TestReadPostureMarksWhatTheRecordLeavesOut(t *testing.T) {
	read := func(edit func(*evidence.Posture)) *evidence.PostureReading {
		t.Helper()
		dir, keys := signedReport(t, func(r *evidence.Run) {
			laneAEngine(r)
			if edit != nil {
				p := evidence.PostureOf(r, nil)
				edit(&p)
				r.Posture = &p
			}
		})
		s, err := evidence.VerifyRun(context.Background(), dir, pub(t, keys))
		assert.NilError(t, err)
		return evidence.ReadPosture(s.Run)
	}
	all := []string{"CVE-2024-21626", "CVE-2025-31133", "CVE-2025-52565", "CVE-2025-52881", "CVE-2026-41579"}

	dropped := read(func(p *evidence.Posture) { p.Advisories = p.Advisories[:1] })
	assert.Check(t, dropped.Recorded)
	assert.Check(t, is.DeepEqual(dropped.Unrecorded(), all[1:]))
	lines := strings.Join(dropped.Lines(), "\n")
	assert.Check(t, is.Contains(lines, "posture: this verifier's reading of the Engine facts; the report's record differs (each difference marked)\n"))
	assert.Check(t, is.Contains(lines, "fix\nadvisory: CVE-2025-31133 runc 1.1.5+ds1 (fixed in 1.2.8, 1.3.3, 1.4.0-rc.3)"))
	assert.Check(t, is.Contains(lines, "the distribution may have backported the fix (not recorded by the report; this verifier's list)"))
	assert.Check(t, is.Equal(strings.Count(lines, "(not recorded by the report; this verifier's list)"), 4), lines)
	assert.Check(t, !strings.Contains(lines, "none known"))
	brief := dropped.Brief()
	assert.Check(t, is.Equal(brief[len(brief)-1], "not recorded by the report (this verifier's list): "+strings.Join(all[1:], ", ")))

	none := read(func(p *evidence.Posture) { p.Advisories = []evidence.AdvisoryMatch{} })
	assert.Check(t, is.DeepEqual(none.Unrecorded(), all))

	newer := evidence.AdvisoryMatch{ID: "CVE-2099-1", Component: "runc", Version: "1.1.5+ds1", Summary: "later", Fixed: []string{"1.6.0"}, Backports: true}
	longer := read(func(p *evidence.Posture) { p.Advisories = append(p.Advisories, newer) })
	assert.Check(t, is.Len(longer.Unrecorded(), 0))
	assert.Assert(t, is.Len(longer.Advisories, 6))
	assert.Check(t, is.DeepEqual(longer.Advisories[5], evidence.ReadAdvisory{AdvisoryMatch: newer, Recorded: true}))
	assert.Check(t, is.Contains(strings.Join(longer.Lines(), "\n"), "advisory: CVE-2099-1 runc 1.1.5+ds1 (fixed in 1.6.0): later; matched by version number, the distribution may have backported the fix (recorded by the report; not this verifier's list)"))
	assert.Check(t, is.Equal(longer.Brief()[len(longer.Brief())-1], "recorded by the report (not this verifier's list): CVE-2099-1"))

	honest := read(func(*evidence.Posture) {})
	assert.Check(t, is.Len(honest.Unrecorded(), 0))
	assert.Check(t, is.Equal(honest.Lines()[0], "posture: this verifier's reading of the Engine facts; the report's record agrees"))
	assert.Check(t, is.DeepEqual(honest.Lines()[1:], evidence.PostureOf(&evidence.Run{Engine: honestEngine()}, nil).Lines()))

	unrecorded := read(nil)
	assert.Check(t, !unrecorded.Recorded)
	assert.Check(t, is.Equal(unrecorded.Lines()[0], "posture: this verifier's reading of the Engine facts; the report records none"))
	assert.Check(t, is.DeepEqual(unrecorded.Unrecorded(), all))

	assert.Check(t, evidence.ReadPosture(&evidence.Run{}) == nil, "a run without an Engine")
}

// honestEngine is lane A's Engine facts as laneAEngine sets them.
func honestEngine() driver.EngineFacts {
	r := &evidence.Run{}
	laneAEngine(r)
	return r.Engine
}
