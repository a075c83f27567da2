package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	"github.com/qualbox/qualbox/qualify/scenario"
)

func sha256File(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	assert.NilError(t, err)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// vsaStatement opens the envelope at path with the public key at pub.
func vsaStatement(t *testing.T, path, pub string) map[string]any {
	t.Helper()
	k, err := attest.LoadPublicKey(pub)
	assert.NilError(t, err)
	data, err := os.ReadFile(path)
	assert.NilError(t, err)
	payload, err := attest.OpenEnvelope(context.Background(), k, data, filepath.Base(path))
	assert.NilError(t, err)
	var st map[string]any
	assert.NilError(t, json.Unmarshal(payload, &st))
	return st
}

// vsaFixture is a passing report of the synthetic lane A Engine
// (signedRun), a policy trusting its key for row hermetic, and that
// policy's merge writing a Verification Summary signed by the same key.
func vsaFixture(t *testing.T, catalogueVersion int) (dir, report, pub, policy, vsa string, code int) {
	t.Helper()
	dir = t.TempDir()
	manifestPath, report, pub := signedRun(t, dir, true)
	policy = hermeticPolicy(t, dir, "policy.yaml", manifestPath, false, catalogueVersion, trustLine(t, dir, pub, "hermetic"))
	vsa = filepath.Join(dir, "vsa.dsse.json")
	var stdout, stderr bytes.Buffer
	code = run(context.Background(), []string{"merge", "--policy", policy, "--vsa", vsa,
		"--vsa-key", filepath.Join(dir, "keys", attest.PrivateKeyFile), report}, &stdout, &stderr)
	return dir, report, pub, policy, vsa, code
}

func TestMergeWritesAVerificationSummary(t *testing.T) {
	_, report, pub, policy, vsa, code := vsaFixture(t, scenario.CatalogueVersion)
	assert.Equal(t, code, exitcode.OK)
	st := vsaStatement(t, vsa, pub)
	assert.Equal(t, st["predicateType"], evidence.VSAPredicateType)
	p := st["predicate"].(map[string]any)
	assert.Equal(t, p["verificationResult"], "PASSED")
	assert.DeepEqual(t, p["verifier"], map[string]any{"id": DefaultVerifierID})
	assert.DeepEqual(t, p["policy"], map[string]any{"uri": filepath.ToSlash(policy), "digest": map[string]any{"sha256": sha256File(t, policy)}})
	assert.DeepEqual(t, p["verifiedLevels"], []any{"QUALBOX_ROW_HERMETIC"})
	assert.DeepEqual(t, p["inputAttestations"], []any{
		map[string]any{"uri": filepath.ToSlash(filepath.Join(report, attest.EnvelopeFile)), "digest": map[string]any{"sha256": sha256File(t, filepath.Join(report, attest.EnvelopeFile))}},
		map[string]any{"uri": filepath.ToSlash(filepath.Join(report, evidence.TestResultFile)), "digest": map[string]any{"sha256": sha256File(t, filepath.Join(report, evidence.TestResultFile))}},
	})
	var names []string
	for _, s := range st["subject"].([]any) {
		names = append(names, s.(map[string]any)["name"].(string))
	}
	assert.Check(t, is.Contains(strings.Join(names, " "), "engine:linux-x64-cgroupv1"), "%v", names)
	assert.Check(t, is.Contains(strings.Join(names, " "), "scenario-catalogue:v"), "%v", names)
}

// A gate that fails still writes its summary, saying FAILED, with no level.
func TestFailedGateWritesAFailedVerificationSummary(t *testing.T) {
	_, _, pub, _, vsa, code := vsaFixture(t, scenario.CatalogueVersion+1)
	assert.Equal(t, code, exitcode.Failed)
	p := vsaStatement(t, vsa, pub)["predicate"].(map[string]any)
	assert.Equal(t, p["verificationResult"], "FAILED")
	assert.Check(t, p["verifiedLevels"] == nil)
}

func TestVerificationSummaryFlagsNeedPolicyAndKey(t *testing.T) {
	for args, want := range map[string]string{
		"--key k.pub --vsa out.json r":      "--vsa needs --policy FILE",
		"--policy p.yaml --vsa out.json r":  "--vsa needs --vsa-key FILE",
		"--policy p.yaml --vsa-key k.key r": "--vsa-key needs --vsa FILE",
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"merge"}, strings.Fields(args)...), &stdout, &stderr)
		assert.Equal(t, code, exitcode.Usage, args)
		assert.Check(t, is.Contains(stderr.String(), want))
	}
}

// The summary names the envelope and test-result statement that were
// verified: a file swapped on disk after verification (a hostile host
// racing the gate) changes nothing the summary says.
func TestVerificationSummaryNamesTheVerifiedBytes(t *testing.T) {
	dir := t.TempDir()
	_, report, pub := signedRun(t, dir, true)
	k, err := attest.LoadPublicKey(pub)
	assert.NilError(t, err)
	signed, err := evidence.VerifyRun(context.Background(), report, k)
	assert.NilError(t, err)
	want := map[string]string{}
	for _, f := range []string{attest.EnvelopeFile, evidence.TestResultFile} {
		want[f] = sha256File(t, filepath.Join(report, f))
		assert.NilError(t, os.WriteFile(filepath.Join(report, f), []byte("{}"), 0o644))
	}
	st, err := evidence.VSAOf(&evidence.GateResult{}, []*evidence.Signed{signed}, evidence.VSAInput{VerifierID: "v", PolicyURI: "p", PolicySHA256: strings.Repeat("0", 64)})
	assert.NilError(t, err)
	got := map[string]string{}
	for _, in := range st.Predicate.Fields["inputAttestations"].GetListValue().GetValues() {
		f := in.GetStructValue().Fields
		got[filepath.Base(f["uri"].GetStringValue())] = f["digest"].GetStructValue().Fields["sha256"].GetStringValue()
	}
	assert.DeepEqual(t, got, want)
}
