package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/internal/exitcode"
	"github.com/qualbox/qualbox/qualify"
	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/manifest"
	"github.com/qualbox/qualbox/qualify/scenario"
)

// outcome is a synthetic scenario (no Engine) whose params say whether its
// one check passes; it lets these tests sign real reports of this build.
type outcome struct{}

func (outcome) Name() string { return "outcome" }

func (outcome) Validate(params map[string]any) error {
	if _, ok := params["pass"].(bool); !ok || len(params) != 1 {
		return fmt.Errorf("params: want {pass: bool}")
	}
	return nil
}

func (outcome) Run(_ context.Context, _ *scenario.Env, params map[string]any, rec *scenario.Record) error {
	rec.Equal("outcome", true, params["pass"])
	return nil
}

const outcomeManifest = `profile: linux-x64-cgroupv1
engine: {endpoint: unix:///var/run/docker.sock}
image: sha256:%s
namespace: gate
policy:
  resources: {cpus: 0.5, memoryBytes: 268435456, pids: 128}
  temporaryStorage: {homeBytes: 16777216, tempBytes: 8388608}
  network: {kind: isolated}
  deadlines: {startupMs: 60000, cleanupMs: 5000}
  transfers: {chunkBytes: 65536, metadataBatchBytes: 1048576, metadataMergeFanIn: 16}
  streams: {maxBufferedInputBytes: 65536, maxBufferedOutputBytes: 1048576, highWaterMarkBytes: 16384}
scenarios:
  - {name: outcome, params: {pass: %t}}
`

// signedRun writes a manifest whose one scenario passes or fails into dir,
// runs it against the synthetic lane A Engine (laneAEngine), signs the report with a fresh key and returns
// the manifest, the report and the public key.
func signedRun(t *testing.T, dir string, pass bool) (manifestPath, report, pub string) {
	t.Helper()
	manifestPath = filepath.Join(dir, "m.yaml")
	endpoint, engine := laneAEngine(t)
	text := strings.Replace(fmt.Sprintf(outcomeManifest, strings.Repeat("a", 64), pass), "unix:///var/run/docker.sock", endpoint, 1)
	assert.NilError(t, os.WriteFile(manifestPath, []byte(text), 0o644))
	reg := scenario.NewRegistry(outcome{})
	useGateScenarios(t, reg)
	m, err := manifest.Load(manifestPath, reg)
	assert.NilError(t, err)
	privPath, pub, err := attest.GenerateKey(filepath.Join(dir, "keys"))
	assert.NilError(t, err)
	key, err := attest.LoadPrivateKey(privPath)
	assert.NilError(t, err)
	report = filepath.Join(dir, "report")
	_, err = qualify.Run(context.Background(), qualify.Config{Manifest: m, Output: report, Registry: reg, Engine: engine,
		ImageID: laneImage, ImageSource: "manifest", SigningKey: key})
	assert.NilError(t, err)
	return manifestPath, report, pub
}

// useGateScenarios makes the gate parse pinned manifests with reg for the
// rest of t.
func useGateScenarios(t *testing.T, reg manifest.Validator) {
	old := gateScenarios
	gateScenarios = reg
	t.Cleanup(func() { gateScenarios = old })
}

// A failed verdict keeps the gate shut with or without --require.
func TestMergeFailsOnAFailedVerdictWithoutRequire(t *testing.T) {
	_, report, pub := signedRun(t, t.TempDir(), false)
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"merge", "--key", pub, report}, &stdout, &stderr)
	assert.Equal(t, code, exitcode.Failed, stderr.String())
	assert.Check(t, is.Contains(stderr.String(), "report "+report+": run verdict failed"))
	// Without a policy the column is named by the report's profile.
	assert.Check(t, is.Contains(stderr.String(), "linux-x64-cgroupv1: outcome: failed"))
	assert.Check(t, is.Contains(stdout.String(), "| Scenario "), stdout.String())
	assert.Check(t, is.Regexp(`\| Scenario +\| linux-x64-cgroupv1 +\|`, stdout.String()))
}

// hermeticPolicy writes a v2 gate policy into dir with one row, hermetic
// (profile linux-x64-cgroupv1, the manifest at manifestPath) and, with
// other, a row other of profile linux-x64; the given trust entries (YAML
// flow mappings, key paths relative to dir) and this build's harness with
// the catalogue version given. It returns the policy's path.
func hermeticPolicy(t *testing.T, dir, name, manifestPath string, other bool, catalogueVersion int, trust ...string) string {
	t.Helper()
	h := qualify.HarnessIdentity()
	p := filepath.Join(dir, name)
	assert.NilError(t, os.WriteFile(p, []byte(fmt.Sprintf(`schema: qualbox.gate-policy.v2
trust:
  - %s
harness:
  module: %s
  catalogues: [{version: %d, sha256: %s}]
  cleanRevision: false
rows:
  - {name: hermetic, profile: linux-x64-cgroupv1, required: true, manifests: [%s], scenarios: [outcome]}
`, strings.Join(trust, "\n  - "), h.Module, catalogueVersion, h.CatalogueSHA256, filepath.Base(manifestPath))), 0o644))
	if other {
		f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
		assert.NilError(t, err)
		_, err = fmt.Fprintf(f, "  - {name: other, profile: linux-x64, required: true, manifests: [%s], scenarios: [outcome]}\n", filepath.Base(manifestPath))
		assert.NilError(t, err)
		assert.NilError(t, f.Close())
	}
	return p
}

// trustLine is a trust entry for the key at pub (made under dir) bound to
// rows, valid from an hour ago to an hour from now.
func trustLine(t *testing.T, dir, pub, rows string) string {
	t.Helper()
	rel, err := filepath.Rel(dir, pub)
	assert.NilError(t, err)
	now := time.Now().UTC()
	return fmt.Sprintf("{key: %s, rows: [%s], notBefore: %s, notAfter: %s}", rel, rows,
		now.Add(-time.Hour).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339))
}

// A report of this build carries its harness identity and meets a policy
// that pins this build's catalogue and trusts its key for its row; the
// same policy refuses it when it pins another catalogue version.
func TestReportOfThisBuildPassesAPolicy(t *testing.T) {
	dir := t.TempDir()
	manifestPath, report, pub := signedRun(t, dir, true)
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"verify", "--key", pub, report}, &stdout, &stderr)
	assert.Equal(t, code, exitcode.OK, stderr.String())
	assert.Check(t, is.Contains(stdout.String(), fmt.Sprintf("harness catalogue v%d (sha256 %s)", scenario.CatalogueVersion, scenario.CatalogueSHA256[:12])))

	trusted := trustLine(t, dir, pub, "hermetic")
	policy := hermeticPolicy(t, dir, "policy.yaml", manifestPath, false, scenario.CatalogueVersion, trusted)
	stdout.Reset()
	stderr.Reset()
	code = run(context.Background(), []string{"verify", "--policy", policy, report}, &stdout, &stderr)
	assert.Equal(t, code, exitcode.OK, stderr.String())
	assert.Check(t, is.Contains(stdout.String(), "for rows hermetic"))
	code = run(context.Background(), []string{"merge", "--policy", policy, report}, &stdout, &stderr)
	assert.Equal(t, code, exitcode.OK, stderr.String())

	stderr.Reset()
	newer := hermeticPolicy(t, dir, "newer.yaml", manifestPath, false, scenario.CatalogueVersion+1, trusted)
	code = run(context.Background(), []string{"merge", "--policy", newer, report}, &stdout, &stderr)
	assert.Equal(t, code, exitcode.Failed)
	assert.Check(t, is.Contains(stderr.String(), fmt.Sprintf("catalogue version %d is not an accepted catalogue (accepted: v%d sha256 %s)", scenario.CatalogueVersion, scenario.CatalogueVersion+1, scenario.CatalogueSHA256)))

	// The CLI requirement pins this build's catalogue: the report meets it.
	stderr.Reset()
	code = run(context.Background(), []string{"merge", "--key", pub, "--require", "outcome", "--row", "hermetic=linux-x64-cgroupv1", "--manifest", manifestPath, report}, &stdout, &stderr)
	assert.Equal(t, code, exitcode.OK, stderr.String())
	code = run(context.Background(), []string{"merge", "--key", pub, "--min-catalogue", "3", "--require", "outcome", "--row", "hermetic=linux-x64-cgroupv1", "--manifest", manifestPath, report}, &stdout, &stderr)
	assert.Equal(t, code, exitcode.Usage, "--min-catalogue is gone")
}
