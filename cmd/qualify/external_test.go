package main

import (
	"crypto/ed25519"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/evidence"
	"github.com/qualbox/qualbox/qualify/scenario"
)

// ExternalToolsEnv names the directory holding cosign and slsa-verifier
// built by scripts/external-tools.sh (make verify-external sets it).
const ExternalToolsEnv = "QUALBOX_EXTERNAL_TOOLS"

// externalTool returns the path of tool under $QUALBOX_EXTERNAL_TOOLS,
// skipping t when the variable is unset and failing it when the tool is
// missing there.
func externalTool(t *testing.T, tool string) string {
	t.Helper()
	dir := os.Getenv(ExternalToolsEnv)
	if dir == "" {
		t.Skipf("%s unset: make verify-external builds cosign and slsa-verifier and runs this test", ExternalToolsEnv)
	}
	p := filepath.Join(dir, tool)
	_, err := os.Stat(p)
	assert.NilError(t, err, "%s=%s holds no %s", ExternalToolsEnv, dir, tool)
	return p
}

// runTool runs an external verifier and returns its combined output and
// whether it exited 0.
func runTool(t *testing.T, tool string, args ...string) (string, bool) {
	t.Helper()
	cmd := exec.Command(tool, args...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "SIGSTORE_NO_CACHE=1", "TUF_ROOT="+t.TempDir())
	out, err := cmd.CombinedOutput()
	t.Logf("%s %s: %v\n%s", filepath.Base(tool), args[0], err, strings.TrimSpace(string(out)))
	return string(out), err == nil
}

// flipped writes a copy of src with one byte changed (the last before
// the final newline) into a fresh directory and returns its path.
func flipped(t *testing.T, src string) string {
	t.Helper()
	data, err := os.ReadFile(src)
	assert.NilError(t, err)
	i := len(data) - 1
	if data[i] == '\n' {
		i--
	}
	data[i] ^= 0x01
	p := filepath.Join(t.TempDir(), filepath.Base(src))
	assert.NilError(t, os.WriteFile(p, data, 0o644))
	return p
}

// payloadFlipped is flipped for an envelope: one byte of the signed
// payload (a character of its base64) is changed.
func payloadFlipped(t *testing.T, src string) string {
	t.Helper()
	data, err := os.ReadFile(src)
	assert.NilError(t, err)
	s := string(data)
	i := strings.Index(s, `"payload": "`) + len(`"payload": "`) + 40
	b := []byte(s)
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	p := filepath.Join(t.TempDir(), filepath.Base(src))
	assert.NilError(t, os.WriteFile(p, b, 0o644))
	return p
}

// cosign verify-blob-attestation accepts both statements of a report
// (evidence.dsse.json and test-result.dsse.json, each against its subject
// evidence.json) and refuses a one-byte change to the subject or to the
// signed payload.
func TestCosignVerifiesReportStatements(t *testing.T) {
	cosign := externalTool(t, "cosign")
	_, report, pub := signedRun(t, t.TempDir(), true)
	subject := filepath.Join(report, "evidence.json")
	for _, c := range []struct{ env, typ string }{
		{attest.EnvelopeFile, evidence.PredicateType},
		{evidence.TestResultFile, evidence.TestResultPredicateType},
	} {
		env := filepath.Join(report, c.env)
		args := func(env, subject string) []string {
			return []string{"verify-blob-attestation", "--key", pub, "--insecure-ignore-tlog=true", "--signature", env, "--type", c.typ, subject}
		}
		out, ok := runTool(t, cosign, args(env, subject)...)
		assert.Assert(t, ok, "cosign refused %s: %s", c.env, out)
		out, ok = runTool(t, cosign, args(env, flipped(t, subject))...)
		assert.Assert(t, !ok, "cosign accepted %s over a changed evidence.json: %s", c.env, out)
		out, ok = runTool(t, cosign, args(payloadFlipped(t, env), subject)...)
		assert.Assert(t, !ok, "cosign accepted a changed %s: %s", c.env, out)
	}
}

// slsa-verifier verify-vsa accepts merge's Verification Summary and
// refuses a one-byte change to its signed payload.
func TestSLSAVerifierVerifiesTheSummary(t *testing.T) {
	verifier := externalTool(t, "slsa-verifier")
	_, report, pub, _, vsa, code := vsaFixture(t, scenario.CatalogueVersion)
	assert.Equal(t, code, 0)
	signed, err := evidence.VerifyRun(t.Context(), report, mustPub(t, pub))
	assert.NilError(t, err)
	subjects, err := evidence.VSASubjects([]*evidence.Signed{signed})
	assert.NilError(t, err)
	var digests []string
	for _, s := range subjects {
		for alg, d := range s.Digest {
			digests = append(digests, "--subject-digest", alg+":"+d)
		}
	}
	args := func(vsa string) []string {
		return append([]string{"verify-vsa", "--attestation-path", vsa, "--verifier-id", DefaultVerifierID,
			"--resource-uri", "pkg:golang/github.com/qualbox/qualbox", "--verified-level", "QUALBOX_ROW_HERMETIC",
			"--public-key-path", pub, "--public-key-id", attest.KeyID(mustPub(t, pub))}, digests...)
	}
	out, ok := runTool(t, verifier, args(vsa)...)
	assert.Assert(t, ok, "slsa-verifier refused the summary: %s", out)
	out, ok = runTool(t, verifier, args(payloadFlipped(t, vsa))...)
	assert.Assert(t, !ok, "slsa-verifier accepted a changed summary: %s", out)
}

func mustPub(t *testing.T, path string) ed25519.PublicKey {
	t.Helper()
	k, err := attest.LoadPublicKey(path)
	assert.NilError(t, err)
	return k
}
