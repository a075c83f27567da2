package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/internal/exitcode"
	"github.com/qualbox/qualbox/qualify"
	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/evidence"
	"github.com/qualbox/qualbox/qualify/manifest"
	"github.com/qualbox/qualbox/qualify/scenario"
)

// pinnedRun runs, against the synthetic lane A Engine (laneAEngine), a manifest with one outcome
// scenario per entry of passes (repeat times), signs the report with a
// fresh key and writes a policy pinning the manifest and trusting the key.
func pinnedRun(t *testing.T, repeat int, passes ...bool) (report, keys, policy string) {
	t.Helper()
	dir := t.TempDir()
	var entries strings.Builder
	for _, p := range passes {
		fmt.Fprintf(&entries, "  - {name: outcome, params: {pass: %t}}\n", p)
	}
	endpoint, engine := laneAEngine(t)
	text := strings.Replace(fmt.Sprintf(outcomeManifest, strings.Repeat("a", 64), true), "  - {name: outcome, params: {pass: true}}\n", entries.String(), 1)
	text = strings.Replace(text, "unix:///var/run/docker.sock", endpoint, 1)
	manifestPath := filepath.Join(dir, "m.yaml")
	assert.NilError(t, os.WriteFile(manifestPath, []byte(text), 0o644))
	reg := scenario.NewRegistry(outcome{})
	useGateScenarios(t, reg)
	m, err := manifest.Load(manifestPath, reg)
	assert.NilError(t, err)
	keys = filepath.Join(dir, "keys")
	privPath, _, err := attest.GenerateKey(keys)
	assert.NilError(t, err)
	key, err := attest.LoadPrivateKey(privPath)
	assert.NilError(t, err)
	report = filepath.Join(dir, "report")
	_, err = qualify.Run(context.Background(), qualify.Config{Manifest: m, Output: report, Registry: reg, Repeat: repeat, Engine: engine,
		ImageID: laneImage, ImageSource: "manifest", SigningKey: key})
	assert.NilError(t, err)
	policy = hermeticPolicy(t, dir, "policy.yaml", manifestPath, false, scenario.CatalogueVersion,
		trustLine(t, dir, filepath.Join(keys, attest.PublicKeyFile), "hermetic"))
	return report, keys, policy
}

// rewrite is the forger with a trusted key: it edits the report's run
// and scenario evidence, writes every file again consistent with the
// edit (summary.md, junit.xml, scenario directories) and re-signs, so only
// a comparison with the pinned manifest can find the edit.
func rewrite(t *testing.T, report, keys string, change func(r *evidence.Run, files []*evidence.Scenario) []*evidence.Scenario) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(report, "evidence.json"))
	assert.NilError(t, err)
	var r evidence.Run
	assert.NilError(t, json.Unmarshal(data, &r))
	var files []*evidence.Scenario
	for _, sum := range r.Scenarios {
		data, err := os.ReadFile(filepath.Join(report, sum.Dir, "evidence.json"))
		assert.NilError(t, err)
		var s evidence.Scenario
		assert.NilError(t, json.Unmarshal(data, &s))
		files = append(files, &s)
		assert.NilError(t, os.RemoveAll(filepath.Join(report, sum.Dir)))
	}
	files = change(&r, files)
	r.Scenarios = nil
	for i, s := range files {
		s.Index = i + 1
		dir := fmt.Sprintf("%02d-%s", s.Index, s.Name)
		assert.NilError(t, os.Mkdir(filepath.Join(report, dir), 0o755))
		assert.NilError(t, evidence.WriteJSON(filepath.Join(report, dir, "evidence.json"), s))
		r.Scenarios = append(r.Scenarios, evidence.ScenarioSummary{Index: s.Index, Name: s.Name, Dir: dir, Verdict: s.Verdict,
			Checks: len(s.Checks), Passed: s.PassedChecks(), DurationMs: s.Timing.DurationMs, Repeat: s.Repeat})
	}
	r.Verdict = evidence.RunVerdict(&r)
	// Every rendering (summary.md, junit.xml, report.html) re-rendered, as
	// a forger with the harness's own code would.
	assert.NilError(t, evidence.WriteReport(report, &r, files))
	assert.NilError(t, os.Remove(filepath.Join(report, attest.EnvelopeFile)))
	assert.NilError(t, os.Remove(filepath.Join(report, evidence.TestResultFile)))
	key, err := attest.LoadPrivateKey(filepath.Join(keys, attest.PrivateKeyFile))
	assert.NilError(t, err)
	assert.NilError(t, evidence.SignTestResult(context.Background(), report, key))
	assert.NilError(t, evidence.SignRun(context.Background(), report, key, &r))
}

// passing makes s a passed outcome scenario.
func passing(s *evidence.Scenario) {
	s.Params = map[string]any{"pass": true}
	s.Checks = []evidence.Check{{Name: "outcome", Want: "true", Got: "true", OK: true}}
	s.Failure, s.Verdict = "", evidence.Verdict{Kind: evidence.Passed}
}

// gate runs merge --policy over report and returns its exit code and
// stderr, after checking that the forged report still verifies.
func gate(t *testing.T, report, keys, policy string) (int, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"verify", "--key", filepath.Join(keys, attest.PublicKeyFile), report}, &stdout, &stderr)
	assert.Equal(t, code, exitcode.OK, "the forgery must verify, so that only the gate can refuse it: %s", stderr.String())
	stderr.Reset()
	code = run(context.Background(), []string{"merge", "--policy", policy, report}, &stdout, &stderr)
	return code, stderr.String()
}

// A report that ran a pinned manifest must list the manifest's scenarios,
// with its params, policy and user: a forger keeping the manifest digest
// while dropping, adding or weakening scenarios is refused.
func TestGateComparesTheReportWithItsPinnedManifest(t *testing.T) {
	// Honest reports pass, a campaign of them too.
	report, keys, policy := pinnedRun(t, 1, true, true)
	code, stderr := gate(t, report, keys, policy)
	assert.Equal(t, code, exitcode.OK, stderr)
	report, keys, policy = pinnedRun(t, 3, true)
	code, stderr = gate(t, report, keys, policy)
	assert.Equal(t, code, exitcode.OK, stderr)

	for _, tc := range []struct {
		name, want string
		passes     []bool
		change     func(r *evidence.Run, files []*evidence.Scenario) []*evidence.Scenario
	}{
		{"drops the failed scenario", "lists 1 scenario run(s), but manifest", []bool{true, false},
			func(_ *evidence.Run, files []*evidence.Scenario) []*evidence.Scenario { return files[:1] }},
		{"adds a passing scenario", `scenario 2 "outcome" is not in manifest`, []bool{true},
			func(_ *evidence.Run, files []*evidence.Scenario) []*evidence.Scenario {
				extra := *files[0]
				return append(files, &extra)
			}},
		{"weakens a scenario's params", `scenario 2 "outcome" params {"pass":true}, but manifest`, []bool{true, false},
			func(_ *evidence.Run, files []*evidence.Scenario) []*evidence.Scenario {
				passing(files[1])
				return files
			}},
		{"weakens the policy", `policy {"deadlines":{"cleanupMs":5000,"startupMs":60000},"execution":{"kind":"until_stopped"},"network":{"kind":"isolated"},"resources":{"cpus":0.5,"memoryBytes":268435456,"pids":100000}`, []bool{true},
			func(r *evidence.Run, files []*evidence.Scenario) []*evidence.Scenario {
				var policy map[string]map[string]any
				assert.NilError(t, json.Unmarshal(r.Policy, &policy))
				policy["resources"]["pids"] = 100000
				data, err := json.Marshal(policy)
				assert.NilError(t, err)
				r.Policy = data
				return files
			}},
		{"ran against a TCP Engine", `endpoint: "tcp://10.0.0.9:2375"`, []bool{true},
			func(r *evidence.Run, files []*evidence.Scenario) []*evidence.Scenario {
				r.Endpoint = "tcp://10.0.0.9:2375"
				return files
			}},
		{"runs as another user", "user 0:0, but manifest", []bool{true},
			func(r *evidence.Run, files []*evidence.Scenario) []*evidence.Scenario {
				r.User.UID, r.User.GID = 0, 0
				return files
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			report, keys, policy := pinnedRun(t, 1, tc.passes...)
			rewrite(t, report, keys, tc.change)
			code, stderr := gate(t, report, keys, policy)
			assert.Equal(t, code, exitcode.Failed, stderr)
			assert.Check(t, is.Contains(stderr, "qualify merge: not passed: report "+report+": row hermetic (profile linux-x64-cgroupv1): "+tc.want), stderr)
		})
	}
}
