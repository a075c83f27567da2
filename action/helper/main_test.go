package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/qualify/attest"
)

const laneAReport = "../../reports/linux-x64-cgroupv1/20261201T082354Z"

func helper(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// A verified report's line counts its scenario verdicts.
func TestVerdictOfVerifiedReport(t *testing.T) {
	code, out, _ := helper(t, "verdict", laneAReport, "manifests/linux-x64-cgroupv1.yaml", "0")
	assert.Equal(t, code, 0)
	assert.Equal(t, out, "passed\nqualbox: PASSED linux-x64-cgroupv1 (16 passed, 1 not_applicable)\n")
}

// A partial report's line says PARTIAL, with the flag and what was not
// run, after the verdict. (The helper renders a report qualify verify
// already judged, here by the status "0"; the edit would not verify.)
func TestVerdictOfPartialReport(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "report")
	assert.NilError(t, os.CopyFS(dir, os.DirFS(laneAReport)))
	ev := filepath.Join(dir, "evidence.json")
	data, err := os.ReadFile(ev)
	assert.NilError(t, err)
	partial := strings.Replace(string(data), `"scenarios": [`, `"selection": {"skip": ["transfer"], "skipped": ["transfer"]}, "scenarios": [`, 1)
	assert.Assert(t, partial != string(data))
	assert.NilError(t, os.WriteFile(ev, []byte(partial), 0o644))
	code, out, _ := helper(t, "verdict", dir, "manifests/linux-x64-cgroupv1.yaml", "0")
	assert.Equal(t, code, 0)
	assert.Equal(t, out, "passed\nqualbox: PASSED linux-x64-cgroupv1 (16 passed, 1 not_applicable), PARTIAL (--skip transfer): not run: transfer\n")
}

// A forged report (evidence.json edited after signing, so verify fails)
// never gets its own verdict into the summary or the verdict output: the
// line says UNVERIFIED, names the manifest and verify's status, and
// repeats nothing the report claims.
func TestVerdictOfUnverifiedReportIsNotTheReports(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "report")
	assert.NilError(t, os.CopyFS(dir, os.DirFS(laneAReport)))
	ev := filepath.Join(dir, "evidence.json")
	data, err := os.ReadFile(ev)
	assert.NilError(t, err)
	forged := strings.Replace(string(data), `"profile": "linux-x64-cgroupv1"`, `"profile": "linux-x64"`, 1)
	assert.Assert(t, forged != string(data))
	assert.NilError(t, os.WriteFile(ev, []byte(forged), 0o644))

	code, out, _ := helper(t, "verdict", dir, "qualbox/lane-a.yaml", "1")
	assert.Equal(t, code, 0)
	assert.Equal(t, out, "unverified\nqualbox: UNVERIFIED qualbox/lane-a.yaml (qualify verify exited 1; the report's own verdict is not trusted)\n")

	code, out, _ = helper(t, "verdict", dir, "qualbox/lane-a.yaml", "none")
	assert.Equal(t, code, 0)
	assert.Check(t, strings.HasPrefix(out, "unverified\nqualbox: UNVERIFIED qualbox/lane-a.yaml "), out)

	code, out, _ = helper(t, "verdict", filepath.Join(dir, "missing"), "qualbox/lane-a.yaml", "none")
	assert.Equal(t, code, 0)
	assert.Check(t, strings.HasPrefix(out, "no-report\nqualbox: NO REPORT qualbox/lane-a.yaml ("), out)
}

// pubkey derives the signing key's public half (the bytes keygen writes),
// copies a given public key that is that half, and refuses one of another
// pair naming both key IDs, writing nothing.
func TestPubkey(t *testing.T) {
	priv, pub, err := attest.GenerateKey(t.TempDir())
	assert.NilError(t, err)
	_, otherPub, err := attest.GenerateKey(t.TempDir())
	assert.NilError(t, err)
	want, err := os.ReadFile(pub)
	assert.NilError(t, err)
	out := t.TempDir()

	code, _, stderr := helper(t, "pubkey", priv, filepath.Join(out, "derived.pub"))
	assert.Equal(t, code, 0, stderr)
	got, err := os.ReadFile(filepath.Join(out, "derived.pub"))
	assert.NilError(t, err)
	assert.Check(t, bytes.Equal(got, want))

	code, _, stderr = helper(t, "pubkey", priv, filepath.Join(out, "given.pub"), pub)
	assert.Equal(t, code, 0, stderr)

	code, _, stderr = helper(t, "pubkey", priv, filepath.Join(out, "other.pub"), otherPub)
	assert.Equal(t, code, 2)
	assert.Check(t, is.Contains(stderr, "public-key (key ID "))
	assert.Check(t, is.Contains(stderr, ") is not the public half of signing-key (key ID "))
	_, err = os.Stat(filepath.Join(out, "other.pub"))
	assert.Check(t, os.IsNotExist(err))

	code, _, stderr = helper(t, "pubkey", pub, filepath.Join(out, "x.pub"))
	assert.Equal(t, code, 2)
	assert.Check(t, is.Contains(stderr, `signing-key: attest: `+pub+`: want exactly one PEM "PRIVATE KEY" block`))

	code, _, _ = helper(t, "frobnicate")
	assert.Equal(t, code, 2)
}
