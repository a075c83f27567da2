package evidence_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/evidence"
	"github.com/qualbox/qualbox/qualify/manifest"
)

// Forgeries by a key holder: each test edits a report its test key
// signed (a fixture or a committed report copied to a temporary
// directory), re-signs it with that key and checks that verification
// refuses it, naming the file and what its own contents contradict.

// editJSON decodes path into a T, applies change and writes it back.
func editJSON[T any](t *testing.T, path string, change func(*T)) {
	t.Helper()
	data, err := os.ReadFile(path)
	assert.NilError(t, err)
	var v T
	assert.NilError(t, json.Unmarshal(data, &v))
	change(&v)
	assert.NilError(t, evidence.WriteJSON(path, &v))
}

// editRun edits dir's evidence.json.
func editRun(t *testing.T, dir string, change func(*evidence.Run)) {
	t.Helper()
	editJSON(t, filepath.Join(dir, "evidence.json"), change)
}

// refused re-signs dir with the key in keys and asserts that verification
// reports want (a substring) for file.
func refused(t *testing.T, dir, keys, file, want string) {
	t.Helper()
	resign(t, dir, keys)
	_, err := evidence.VerifyRun(context.Background(), dir, pub(t, keys))
	assert.Assert(t, err != nil, "forged report verified; want %s: %s", file, want)
	ps := problems(t, err)
	for _, p := range ps {
		if p.File == file && strings.Contains(p.Problem, want) {
			return
		}
	}
	t.Fatalf("want %s: %s, got %v", file, want, ps)
}

// committedCopy copies the committed report reports/<rel> into a fresh
// directory and returns it with a fresh key directory: the forger holds a
// trusted key and re-signs the copy after editing it.
func committedCopy(t *testing.T, rel string) (dir, keys string) {
	t.Helper()
	src := filepath.Join("..", "..", "reports", filepath.FromSlash(rel))
	dir, keys = t.TempDir(), t.TempDir()
	assert.NilError(t, os.CopyFS(dir, os.DirFS(src)))
	_, _, err := attest.GenerateKey(keys)
	assert.NilError(t, err)
	return dir, keys
}

// passedFixture is a signed report whose two scenarios and run passed.
func passedFixture(t *testing.T, edit func(*evidence.Run)) (dir, keys string) {
	t.Helper()
	return signedReport(t, func(r *evidence.Run) {
		r.Scenarios = r.Scenarios[:2]
		r.Scenarios[1].Verdict, r.Scenarios[1].Passed, r.Scenarios[1].Detail = evidence.Verdict{Kind: evidence.Passed}, 2, ""
		r.Verdict = evidence.Verdict{Kind: evidence.Passed}
		if edit != nil {
			edit(r)
		}
	})
}

// Every committed report passes the claim checks with the committed keys.
func TestCommittedReportsVerify(t *testing.T) {
	root := filepath.Join("..", "..", "reports")
	var keys []string
	matches, err := filepath.Glob(filepath.Join(root, "keys", "*.pub"))
	assert.NilError(t, err)
	keys = append(keys, matches...)
	n := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.Name() != attest.EnvelopeFile {
			return err
		}
		dir := filepath.Dir(path)
		var errs []string
		for _, k := range keys {
			key, err := attest.LoadPublicKey(k)
			assert.NilError(t, err)
			if _, err := evidence.VerifyRun(context.Background(), dir, key); err == nil {
				n++
				return nil
			} else {
				errs = append(errs, err.Error())
			}
		}
		t.Errorf("%s: %s", dir, strings.Join(errs, "\n"))
		return nil
	})
	assert.NilError(t, err)
	assert.Assert(t, n >= 9, "verified %d committed reports", n)
}

// The canonical forgery: a cgroup v1 lane B report relabelled linux-x64
// (profile and tuple edited, re-signed) is refused, naming the failed
// admission rows.
func TestRelabelledLaneBReportIsRefused(t *testing.T) {
	for _, want := range []string{
		`/info CgroupVersion: want "2", got "1"`,
		`/info CgroupDriver: want "systemd", got "cgroupfs"`,
		"AppArmor: want enabled, got name=apparmor absent",
	} {
		dir, keys := committedCopy(t, "linux-x64-cgroupv1-lane-b/20261201T082426Z")
		editRun(t, dir, func(r *evidence.Run) {
			r.Profile = "linux-x64"
			r.Tuple = evidence.TupleOf(r)
		})
		refused(t, dir, keys, "evidence.json", "Engine facts contradict profile linux-x64, which its admission does not record: "+want)
	}
}

// Lane C's report without its AppArmor option contradicts linux-x64.
func TestLaneCWithoutAppArmorIsRefused(t *testing.T) {
	dir, keys := committedCopy(t, "linux-x64/20261201T082451Z")
	editRun(t, dir, func(r *evidence.Run) {
		r.Engine.SecurityOptions = r.Engine.SecurityOptions[1:] // drop name=apparmor,profile=default
	})
	refused(t, dir, keys, "evidence.json", "AppArmor: want enabled, got name=apparmor absent")
}

// Host facts and the admission are re-evaluated with the driver's rules.
func TestForgedHostFactsAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		edit       func(r *evidence.Run)
	}{
		{"cgroup v2 under a cgroup v1 profile", `/info CgroupVersion: want "1", got "2"`, func(r *evidence.Run) { r.Engine.CgroupVersion = "2" }},
		{"no seccomp option", `seccomp: want one of name=seccomp,profile=default | name=seccomp,profile=builtin, got []`,
			func(r *evidence.Run) { r.Engine.SecurityOptions = []string{} }},
		{"API range above the profile's minimum", "API version range: want MinAPIVersion <= 1.41 <= ApiVersion, got 1.44..1.45",
			func(r *evidence.Run) { r.Engine.MinAPIVersion, r.Engine.APIVersion = "1.44", "1.45" }},
		{"/version Arch", `/version Arch: want "amd64", got "arm64"`, func(r *evidence.Run) { r.Engine.Arch = "arm64" }},
		{"/info Architecture", `/info Architecture: want one of amd64, x86_64, got "aarch64"`, func(r *evidence.Run) { r.Engine.Architecture = "aarch64" }},
		{"OS type", `/info OSType: want "linux", got "windows"`, func(r *evidence.Run) { r.Engine.OSType = "windows" }},
		{"Desktop host under a Linux profile", `/info OperatingSystem: want not Docker Desktop ("Docker Desktop", "Docker Desktop <version>"), got "Docker Desktop"`,
			func(r *evidence.Run) { r.Engine.OperatingSystem = "Docker Desktop" }},
		{"versioned Desktop host under a Linux profile", `/info OperatingSystem: want not Docker Desktop ("Docker Desktop", "Docker Desktop <version>"), got "Docker Desktop 4.56.0"`,
			func(r *evidence.Run) { r.Engine.OperatingSystem = "Docker Desktop 4.56.0" }},
		{"linuxkit kernel under a Linux profile", `/info KernelVersion: want not a Docker Desktop VM kernel (no "linuxkit"), got "6.10.14-linuxkit"`,
			func(r *evidence.Run) { r.Engine.KernelVersion = "6.10.14-linuxkit" }},
		{"controller of another platform", "controller darwin/arm64 contradicts profile linux-x64-cgroupv1: controller: want linux/amd64",
			func(r *evidence.Run) { r.Controller.OS, r.Controller.Arch = "darwin", "arm64" }},
		{"refused admission under a passed verdict", "run verdict passed, but its admission refused profile linux-x64-cgroupv1",
			func(r *evidence.Run) {
				r.Admission.OK, r.Admission.Error = false, "driver: Engine does not match profile linux-x64-cgroupv1"
			}},
		{"ok admission with a failed check", `admission ok, but its check "/info CgroupVersion" failed`,
			func(r *evidence.Run) { failCheck(r, "/info CgroupVersion") }},
		{"ok admission with an error", `admission ok, but with error "boom"`, func(r *evidence.Run) { r.Admission.Error = "boom" }},
		{"Engine facts without an admission", "Engine facts recorded without an admission", func(r *evidence.Run) { r.Admission = evidence.Admission{} }},
		{"OCI runtime other than the profile's", `OCI runtime "runsc" contradicts profile linux-x64-cgroupv1, whose sandboxes request "runc"`,
			func(r *evidence.Run) { r.Runtime = "runsc" }},
		{"OCI runtime the Engine does not list", `OCI runtime "runc" is not one the Engine lists (crun=/usr/bin/crun)`,
			func(r *evidence.Run) { r.Runtime, r.Engine.Runtimes = "runc", []string{"crun=/usr/bin/crun"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, keys := passedFixture(t, nil)
			editRun(t, dir, func(r *evidence.Run) {
				tc.edit(r)
				r.Tuple = evidence.TupleOf(r)
			})
			refused(t, dir, keys, "evidence.json", tc.want)
		})
	}
	// A refusal the report records is consistent: it verifies, failed.
	dir, keys := passedFixture(t, func(r *evidence.Run) {
		r.Engine.CgroupVersion = "2"
		r.Admission.OK, r.Admission.Error = false, "driver: Engine does not match profile linux-x64-cgroupv1"
		failCheck(r, "/info CgroupVersion")
		r.Verdict = evidence.RunVerdict(r)
	})
	s, err := evidence.VerifyRun(context.Background(), dir, pub(t, keys))
	assert.NilError(t, err)
	assert.Equal(t, s.Run.Verdict.String(), "failed (admission refused: driver: Engine does not match profile linux-x64-cgroupv1)")

	// The profile's runtime, listed by the Engine, is in the tuple.
	dir, keys = passedFixture(t, func(r *evidence.Run) {
		r.Runtime, r.Engine.Runtimes = "runc", []string{"io.containerd.runc.v2=io.containerd.runc.v2", "runc=runc"}
		r.Tuple = evidence.TupleOf(r)
	})
	s, err = evidence.VerifyRun(context.Background(), dir, pub(t, keys))
	assert.NilError(t, err)
	assert.Equal(t, s.Run.Tuple.Runtime, "runc")
	assert.Check(t, is.Contains(s.Run.Tuple.Lines()[3], "OCI runtime: runc; containerd: "))
}

// failCheck records the admission check name of r as failed.
func failCheck(r *evidence.Run, name string) {
	for i := range r.Admission.Checks {
		if r.Admission.Checks[i].Name == name {
			r.Admission.Checks[i].OK = false
			return
		}
	}
	panic("no admission check " + name)
}

// The stored tuple is the header's.
func TestForgedTupleIsRefused(t *testing.T) {
	dir, keys := passedFixture(t, nil)
	editRun(t, dir, func(r *evidence.Run) { r.Tuple.Kernel, r.Tuple.CgroupVersion = "6.18.44", "2" })
	refused(t, dir, keys, "evidence.json", `tuple cgroupVersion is "2", but the run header gives "1"`)
	refused(t, dir, keys, "evidence.json", `tuple kernel is "6.18.44", but the run header gives "6.1.0"`)
}

// notRun rewrites scenario i of r as not run.
func notRun(r *evidence.Run, i int) {
	s := &r.Scenarios[i]
	*s = evidence.ScenarioSummary{Index: s.Index, Name: s.Name, Repeat: s.Repeat, Verdict: evidence.Verdict{Kind: evidence.Skipped, Reason: "not run: interrupted"}}
}

// A failed scenario rewritten as not run, in a run nobody interrupted
// and with no abandoned scenario before it, is refused.
func TestFailedScenarioRewrittenAsNotRunIsRefused(t *testing.T) {
	dir, keys := signedReport(t, func(r *evidence.Run) {
		r.Scenarios = r.Scenarios[:2]
		notRun(r, 1)
		r.Verdict = evidence.Verdict{Kind: evidence.Passed}
	})
	refused(t, dir, keys, "evidence.json", `scenario 2 "isolation" is listed as not run, but the run was not interrupted and no scenario before it was abandoned`)

	// An abandonment must be what the scenario's own evidence says.
	dir, keys = signedReport(t, func(r *evidence.Run) {
		r.Scenarios = r.Scenarios[:2]
		notRun(r, 1)
		r.Scenarios[0].Abandoned = true
		r.Verdict = evidence.Verdict{Kind: evidence.Passed}
	})
	refused(t, dir, keys, "01-admission/evidence.json", "verdict passed, but it was abandoned")
	editJSON(t, filepath.Join(dir, "01-admission", "evidence.json"), func(s *evidence.Scenario) { s.Abandoned = false })
	refused(t, dir, keys, "01-admission/evidence.json", "abandoned false, but evidence.json says true")

	// Honest: a failed, abandoned scenario licenses the not-run ones after it.
	dir, keys = signedReport(t, func(r *evidence.Run) {
		r.Scenarios = r.Scenarios[:3]
		r.Scenarios[1].Abandoned = true
		notRun(r, 2)
		r.Scenarios[2].Verdict.Reason = "not run: scenario 02-isolation was abandoned"
	})
	_, err := evidence.VerifyRun(context.Background(), dir, pub(t, keys))
	assert.NilError(t, err)
}

// A --repeat campaign whose failed run of a scenario is rewritten as not
// run, turning a flaky scenario into a passed one, is refused.
func TestFlakyRunRewrittenAsNotRunIsRefused(t *testing.T) {
	dir, keys := signedReport(t, func(r *evidence.Run) {
		admission, isolation := r.Scenarios[0], r.Scenarios[1]
		isolation.Verdict, isolation.Passed, isolation.Detail = evidence.Verdict{Kind: evidence.Passed}, 2, ""
		r.Scenarios = nil
		for k := range 2 {
			for _, s := range []evidence.ScenarioSummary{admission, isolation} {
				s.Index = len(r.Scenarios) + 1
				s.Dir = strings.Replace(s.Dir, s.Dir[:2], []string{"01", "02", "03", "04"}[s.Index-1], 1)
				s.Repeat = k + 1
				r.Scenarios = append(r.Scenarios, s)
			}
		}
		// The second run of isolation failed; the forger lists it as not
		// run, so the tally reads 1 run, 1 pass: passed, not flaky.
		notRun(r, 3)
		r.Campaign = &evidence.Campaign{Repeat: 2, Parallel: 1,
			Rounds: []evidence.CampaignRound{{Repeat: 1, Order: []string{"01-admission", "02-isolation"}}, {Repeat: 2, Order: []string{"03-admission"}}},
			Scenarios: []evidence.CampaignScenario{
				{Index: 1, Name: "admission", Runs: 2, Passes: 2, Verdict: evidence.Verdict{Kind: evidence.Passed}},
				{Index: 2, Name: "isolation", Runs: 1, Passes: 1, Verdict: evidence.Verdict{Kind: evidence.Passed}},
			}}
		r.Verdict = evidence.Verdict{Kind: evidence.Passed}
	})
	refused(t, dir, keys, "evidence.json", `scenario 4 "isolation" is listed as not run, but the run was not interrupted`)
}

// A leak recorded under a passed verdict is refused, and the runner's own
// rules fail both.
func TestRecordedLeaksFail(t *testing.T) {
	present := false
	leak := evidence.Resource{Sandbox: "sb", Role: "compute", Name: "qb-x", Identity: "identified", ID: "c1", Absent: &present}
	dir, keys := passedFixture(t, nil)
	editJSON(t, filepath.Join(dir, "01-admission", "evidence.json"), func(s *evidence.Scenario) {
		s.Resources = append(s.Resources, leak)
	})
	refused(t, dir, keys, "01-admission/evidence.json", "verdict passed, but resource compute qb-x is recorded present after cleanup")
	// Hiding the check's outcome (absentAfterCleanup null) is refused too.
	editJSON(t, filepath.Join(dir, "01-admission", "evidence.json"), func(s *evidence.Scenario) { s.Resources[0].Absent = nil })
	refused(t, dir, keys, "01-admission/evidence.json", "resource compute qb-x was not checked for absence after cleanup, and no cleanup error says why")
	s := &evidence.Scenario{Checks: []evidence.Check{{Name: "c", OK: true}}, Resources: []evidence.Resource{leak}}
	assert.Equal(t, evidence.ScenarioVerdict(s, nil, false).Kind, evidence.Failed)

	removed := false
	dir, keys = passedFixture(t, nil)
	editRun(t, dir, func(r *evidence.Run) { r.Image.Removed = &removed })
	refused(t, dir, keys, "evidence.json", "image removed false without a removeError")
	refused(t, dir, keys, "evidence.json", "run verdict passed, but the guest image was not removed")
	r, _ := fixedRun()
	r.Image.Removed, r.Scenarios = &removed, r.Scenarios[:1]
	assert.Equal(t, evidence.RunVerdict(r).Kind, evidence.Failed)
}

// Times must be ordered, consistent with their durations, nested, equal
// to the signed predicate's and not in the verifier's future.
func TestForgedTimesAreRefused(t *testing.T) {
	dir, keys := passedFixture(t, nil)
	editRun(t, dir, func(r *evidence.Run) { r.Timing.End = r.Timing.Start.Add(-time.Second) })
	refused(t, dir, keys, "evidence.json", "run ends at 2026-11-29T09:59:59Z, before it starts at 2026-11-29T10:00:00Z")
	refused(t, dir, keys, "evidence.json", "run durationMs 2500, but end - start is -1000 ms")

	dir, keys = passedFixture(t, nil)
	editJSON(t, filepath.Join(dir, "02-isolation", "evidence.json"), func(s *evidence.Scenario) {
		s.Timing = evidence.NewTiming(s.Timing.Start.Add(time.Hour), s.Timing.End.Add(time.Hour))
	})
	refused(t, dir, keys, "02-isolation/evidence.json", "scenario runs 2026-11-29T11:00:00.04Z to 2026-11-29T11:00:01.87Z, outside the run's 2026-11-29T10:00:00Z to 2026-11-29T10:00:02.5Z")

	dir, keys = passedFixture(t, nil)
	editJSON(t, filepath.Join(dir, "02-isolation", "evidence.json"), func(s *evidence.Scenario) { s.Timing.DurationMs = 1 })
	refused(t, dir, keys, "02-isolation/evidence.json", "scenario durationMs 1, but end - start is 1830 ms")
	refused(t, dir, keys, "02-isolation/evidence.json", "durationMs 1, but evidence.json says 1830")

	future := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	dir, keys = passedFixture(t, func(r *evidence.Run) { r.Timing = evidence.NewTiming(future, future.Add(2500*time.Millisecond)) })
	refused(t, dir, keys, "evidence.json", "in the future of the verifier's clock")

	// The signed predicate's times are the run's.
	dir, keys = passedFixture(t, nil)
	assert.NilError(t, os.Remove(filepath.Join(dir, attest.EnvelopeFile)))
	var run evidence.Run
	data, err := os.ReadFile(filepath.Join(dir, "evidence.json"))
	assert.NilError(t, err)
	assert.NilError(t, json.Unmarshal(data, &run))
	pred := evidence.PredicateOf(&run)
	pred.End = pred.End.Add(time.Hour)
	key, err := attest.LoadPrivateKey(filepath.Join(keys, attest.PrivateKeyFile))
	assert.NilError(t, err)
	_, err = attest.Sign(context.Background(), dir, key, evidence.PredicateType, pred)
	assert.NilError(t, err)
	_, err = evidence.VerifyRun(context.Background(), dir, pub(t, keys))
	assert.ErrorContains(t, err, "does not match the summary of evidence.json")
}

// A manifest that says "image: build" admits a run that built its image
// or loaded it from a guest image archive (qualify run --image-archive),
// never one that ran an image the manifest does not name.
func TestImageSourceOfABuildManifest(t *testing.T) {
	m := &manifest.Manifest{Path: "m.yaml", Image: manifest.ImageBuild, Endpoint: "unix:///var/run/docker.sock"}
	id := "sha256:" + strings.Repeat("a", 64)
	imageProblems := func(source string) []string {
		s := &evidence.Signed{Run: &evidence.Run{Endpoint: m.Endpoint, Image: evidence.Image{ID: id, Source: source}}}
		var out []string
		for _, p := range evidence.ManifestProblems(s, m) {
			if strings.HasPrefix(p, "image") {
				out = append(out, p)
			}
		}
		return out
	}
	assert.DeepEqual(t, imageProblems("build"), []string(nil))
	assert.DeepEqual(t, imageProblems("archive"), []string(nil))
	assert.DeepEqual(t, imageProblems("manifest"), []string{`image source "manifest", but manifest m.yaml builds its image`})
	assert.DeepEqual(t, imageProblems("pulled"), []string{`image source "pulled", but manifest m.yaml builds its image`})
}
