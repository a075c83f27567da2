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

// A key holder runs the pinned manifest without any Engine (as hermetic
// tests did) and signs the report: it verifies, but it qualified no host,
// and its blank tuple matched the row, which sets no engine prefix. Under
// a policy it is refused by verify and by merge, and by the CLI
// requirement too, each naming the missing Engine.
func TestPolicyRefusesAReportMadeWithoutAnEngine(t *testing.T) {
	dir := t.TempDir()
	manifestPath := filepath.Join(dir, "m.yaml")
	assert.NilError(t, os.WriteFile(manifestPath, []byte(fmt.Sprintf(outcomeManifest, strings.Repeat("a", 64), true)), 0o644))
	reg := scenario.NewRegistry(outcome{})
	useGateScenarios(t, reg)
	m, err := manifest.Load(manifestPath, reg)
	assert.NilError(t, err)
	privPath, pub, err := attest.GenerateKey(filepath.Join(dir, "keys"))
	assert.NilError(t, err)
	key, err := attest.LoadPrivateKey(privPath)
	assert.NilError(t, err)
	report := filepath.Join(dir, "report")
	_, err = qualify.Run(context.Background(), qualify.Config{Manifest: m, Output: report, Registry: reg,
		ImageID: laneImage, ImageSource: "manifest", SigningKey: key})
	assert.NilError(t, err)
	policy := hermeticPolicy(t, dir, "policy.yaml", manifestPath, false, scenario.CatalogueVersion, trustLine(t, dir, pub, "hermetic"))

	var stdout, stderr bytes.Buffer
	assert.Equal(t, run(context.Background(), []string{"verify", "--key", pub, report}, &stdout, &stderr), exitcode.OK, stderr.String())
	const want = "its run recorded no Engine facts and no admission (a run without an Engine, tuple linux-x64-cgroupv1 · engine /API  · kernel  · cgroup v/): it qualified no host, so it satisfies no row"
	for _, args := range [][]string{
		{"verify", "--policy", policy, report},
		{"merge", "--policy", policy, report},
		{"merge", "--key", pub, "--require", "outcome", "--row", "hermetic=linux-x64-cgroupv1", "--manifest", manifestPath, report},
	} {
		stdout.Reset()
		stderr.Reset()
		code := run(context.Background(), args, &stdout, &stderr)
		assert.Equal(t, code, exitcode.Failed, "%v: %s", args, stderr.String())
		assert.Check(t, is.Contains(stderr.String(), want), "%v", args)
	}
}

// The same trusted key listed twice, once in a re-wrapped PEM with a
// header (another file, the same PKIX key), so that each entry binds it
// to other rows or windows: LoadPolicy refuses the policy, naming the key
// ID, since entries are matched by key ID, not by file.
func TestPolicyRefusesOneKeyInTwoPEMEncodings(t *testing.T) {
	dir := t.TempDir()
	manifestPath, _, pub := signedRun(t, dir, true)
	data, err := os.ReadFile(pub)
	assert.NilError(t, err)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	body := strings.Join(lines[1:len(lines)-1], "")
	var wrapped strings.Builder
	wrapped.WriteString("-----BEGIN PUBLIC KEY-----\nComment: the lane key again\n\n")
	for len(body) > 16 {
		wrapped.WriteString(body[:16] + "\n")
		body = body[16:]
	}
	wrapped.WriteString(body + "\n-----END PUBLIC KEY-----\n")
	twin := filepath.Join(dir, "twin.pub")
	assert.NilError(t, os.WriteFile(twin, []byte(wrapped.String()), 0o644))
	assert.Equal(t, keyID(t, twin), keyID(t, pub))
	policy := hermeticPolicy(t, dir, "policy.yaml", manifestPath, true, scenario.CatalogueVersion,
		trustLine(t, dir, pub, "hermetic"), trustLine(t, dir, twin, "other"))
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"merge", "--policy", policy, "x"}, &stdout, &stderr)
	assert.Equal(t, code, exitcode.Usage, stderr.String())
	assert.Check(t, is.Contains(stderr.String(), "trust[1].key twin.pub: key ID "+keyID(t, pub)+" is already trusted by trust[0]; list all its rows in one entry"))
}

// A key holder reorders the scenarios of a pinned manifest (and so their
// directories and indexes), consistent everywhere else and re-signed:
// the gate compares the report with the manifest in order and refuses it.
func TestGateRefusesReorderedScenarios(t *testing.T) {
	report, keys, policy := pinnedRun(t, 1, true, false)
	rewrite(t, report, keys, func(_ *evidence.Run, files []*evidence.Scenario) []*evidence.Scenario {
		return []*evidence.Scenario{files[1], files[0]}
	})
	code, stderr := gate(t, report, keys, policy)
	assert.Equal(t, code, exitcode.Failed, stderr)
	assert.Check(t, is.Contains(stderr, `scenario 1 "outcome" params {"pass":false}, but manifest `), stderr)
	assert.Check(t, is.Contains(stderr, ` entry 1 params {"pass":true}`), stderr)
}

// In a campaign, a scenario evidence file that claims another repeat than
// its line in evidence.json (the file a reader opens says "repeat 1" for
// the second run): the files disagree, and verify refuses it, naming the
// file.
func TestVerifyRefusesAScenarioFileOfAnotherRepeat(t *testing.T) {
	report, keys, _ := pinnedRun(t, 2, true)
	file := filepath.Join(report, "02-outcome", "evidence.json")
	data, err := os.ReadFile(file)
	assert.NilError(t, err)
	assert.Assert(t, bytes.Contains(data, []byte(`"repeat": 2`)))
	assert.NilError(t, os.WriteFile(file, bytes.Replace(data, []byte(`"repeat": 2`), []byte(`"repeat": 1`), 1), 0o644))
	data, err = os.ReadFile(filepath.Join(report, "evidence.json"))
	assert.NilError(t, err)
	var r evidence.Run
	assert.NilError(t, json.Unmarshal(data, &r))
	assert.NilError(t, os.Remove(filepath.Join(report, attest.EnvelopeFile)))
	key, err := attest.LoadPrivateKey(filepath.Join(keys, attest.PrivateKeyFile))
	assert.NilError(t, err)
	assert.NilError(t, evidence.SignRun(context.Background(), report, key, &r))
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"verify", "--key", filepath.Join(keys, attest.PublicKeyFile), report}, &stdout, &stderr)
	assert.Equal(t, code, exitcode.Failed, stderr.String())
	assert.Check(t, is.Contains(stderr.String(), "02-outcome/evidence.json: repeat 1, but evidence.json says 2"))
}
