package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/internal/exitcode"
)

// committedKey signed the 2026-11-29 lane A reports that these tests read.
const committedKey = "../../reports/keys/qualbox-ed25519.pub"

// committedReports are the signed 2026-11-29 lane A reports under reports/
// (never edited), all signed with committedKey.
func committedReports(t *testing.T) []string {
	dirs, err := filepath.Glob("../../reports/linux-x64-cgroupv1/20261129T*/evidence.dsse.json")
	assert.NilError(t, err)
	assert.Assert(t, len(dirs) >= 2, "want at least two committed reports")
	for i := range dirs {
		dirs[i] = filepath.Dir(dirs[i])
	}
	return dirs
}

func TestVerifyCommittedReports(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append([]string{"verify", "--key", committedKey}, committedReports(t)...), &stdout, &stderr)
	assert.Equal(t, code, exitcode.OK, "%s%s", stdout.String(), stderr.String())
	assert.Check(t, is.Contains(stdout.String(), "OK: 16 subjects verified"))
}

func TestVerifyNamesAOneByteChange(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "report")
	assert.NilError(t, os.CopyFS(dir, os.DirFS(committedReports(t)[0])))
	path := filepath.Join(dir, "04-memory-exhaustion", "evidence.json")
	data, err := os.ReadFile(path)
	assert.NilError(t, err)
	data[len(data)/3] ^= 1
	assert.NilError(t, os.WriteFile(path, data, 0o644))
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"verify", "--key", committedKey, dir}, &stdout, &stderr)
	assert.Equal(t, code, exitcode.Failed)
	// A failure is reported on stderr; stdout stays empty for a pipe.
	assert.Check(t, is.Contains(stderr.String(), "04-memory-exhaustion/evidence.json: sha256 mismatch: expected "))
	assert.Check(t, is.Equal(stdout.String(), ""))
}

func TestVerifyWrongKey(t *testing.T) {
	keys := t.TempDir()
	var stdout, stderr bytes.Buffer
	assert.Equal(t, run(context.Background(), []string{"keygen", "--out", keys}, &stdout, &stderr), exitcode.OK)
	stdout.Reset()
	stderr.Reset()
	code := run(context.Background(), []string{"verify", "--key", filepath.Join(keys, "qualbox-ed25519.pub"), committedReports(t)[0]}, &stdout, &stderr)
	assert.Equal(t, code, exitcode.Failed)
	assert.Check(t, is.Contains(stderr.String(), "evidence.dsse.json: signature: no signature by key"))
}

func TestMergeCommittedReports(t *testing.T) {
	reports := committedReports(t)
	var stdout, stderr bytes.Buffer
	// Without a requirement the matrix is printed and, nothing having
	// failed, the exit status is 0.
	code := run(context.Background(), append([]string{"merge", "--key", committedKey}, reports...), &stdout, &stderr)
	assert.Equal(t, code, exitcode.OK, stderr.String())
	assert.Check(t, is.Regexp(`\| memory-exhaustion +\| passed +\| passed +\|`, stdout.String()), "stdout is no terminal: ASCII")
	// These reports share profile and Engine version: each column is
	// named by its report's directory within their common parent.
	assert.Check(t, is.Regexp(`\| Scenario +\| 20261129T\d{6}Z +\| 20261129T\d{6}Z +\|`, stdout.String()))
	assert.Check(t, strings.HasPrefix(stdout.String(), "GATE: PASSED (4 passed, 0 failed, 0 pending, 0 refused rows)\n"))
}

// Scenario names alone are no gate: one lane alone, or a manifest that
// weakened the scenarios, would meet them.
func TestMergeRequireNeedsRowsAndManifests(t *testing.T) {
	reports := committedReports(t)
	for _, args := range [][]string{
		{"--require", "admission"},
		{"--require", "admission", "--manifest", "../../manifests/linux-x64-cgroupv1.yaml"},
		{"--require", "admission", "--row", "lane-a=linux-x64-cgroupv1"},
		{"--row", "lane-a=linux-x64-cgroupv1", "--manifest", "../../manifests/linux-x64-cgroupv1.yaml"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append(append([]string{"merge", "--key", committedKey}, args...), reports...), &stdout, &stderr)
		assert.Equal(t, code, exitcode.Usage, "%v: %s", args, stderr.String())
		assert.Check(t, is.Contains(stderr.String(), "a gate needs --require LIST, at least one --row SPEC and at least one --manifest FILE"), "%v", args)
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"merge", "--policy", "../../reports/gate-policy.yaml", "--require", "admission", reports[0]}, &stdout, &stderr)
	assert.Equal(t, code, exitcode.Usage)
	code = run(context.Background(), []string{"merge", "--key", committedKey, "--require", "admission", "--row", "lane-a=linux-arm",
		"--manifest", "../../manifests/linux-x64-cgroupv1.yaml", reports[0]}, &stdout, &stderr)
	assert.Equal(t, code, exitcode.Usage)
	assert.Check(t, is.Contains(stderr.String(), `profile "linux-arm": want one of`))
	// The gate requires of a report only what its manifest lists, so a
	// scenario no --manifest lists would be required of none.
	stderr.Reset()
	code = run(context.Background(), []string{"merge", "--key", committedKey, "--require", "admission,warm-up", "--row", "lane-a=linux-x64-cgroupv1",
		"--manifest", "../../manifests/linux-x64-cgroupv1.yaml", reports[0]}, &stdout, &stderr)
	assert.Equal(t, code, exitcode.Usage)
	assert.Check(t, is.Contains(stderr.String(), "--require warm-up: no --manifest lists it"))
}

// The committed reports made before reports carried a harness identity
// fail the committed gate policy, and the message says why.
func TestOldReportsFailTheGateNamingTheHarnessIdentity(t *testing.T) {
	old := []string{"../../reports/linux-x64-cgroupv1/20261129T104556Z", "../../reports/linux-x64-cgroupv1-lane-b/20261129T105030Z"}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append([]string{"merge", "--policy", "../../reports/gate-policy.yaml"}, old...), &stdout, &stderr)
	assert.Equal(t, code, exitcode.Failed, stderr.String())
	for _, dir := range old {
		assert.Check(t, is.Contains(stderr.String(), "qualify merge: not passed: report "+dir+": no harness identity in its signed statement"))
	}
}

// A gate over two rows with one lane's report names the missing row.
func TestMergeNamesAMissingRow(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"merge", "--key", committedKey, "--require", "admission",
		"--row", "lane-a=linux-x64-cgroupv1@20.10.", "--row", "lane-b=linux-x64-cgroupv1@2.0.0-",
		"--manifest", "../../manifests/linux-x64-cgroupv1.yaml", "--manifest", "../../manifests/linux-x64-cgroupv1-lane-b.yaml",
		"../../reports/linux-x64-cgroupv1/20261129T113142Z"}, &stdout, &stderr)
	assert.Equal(t, code, exitcode.Failed)
	assert.Check(t, is.Contains(stderr.String(), "not passed: row lane-b (profile linux-x64-cgroupv1, engine 2.0.0-): no report with a pinned manifest"))
}

// With several trusted keys, a tampered report is judged by the key that
// signed it, whatever the key order: the digest mismatch is reported, not
// "no signature by key" of an unrelated key.
func TestMergeReportsTheSignersProblem(t *testing.T) {
	keys := t.TempDir()
	var stdout, stderr bytes.Buffer
	assert.Equal(t, run(context.Background(), []string{"keygen", "--out", keys}, &stdout, &stderr), exitcode.OK)
	other := filepath.Join(keys, "qualbox-ed25519.pub")
	dir := filepath.Join(t.TempDir(), "report")
	assert.NilError(t, os.CopyFS(dir, os.DirFS(committedReports(t)[0])))
	path := filepath.Join(dir, "summary.md")
	data, err := os.ReadFile(path)
	assert.NilError(t, err)
	data[len(data)/2] ^= 1
	assert.NilError(t, os.WriteFile(path, data, 0o644))
	for _, order := range [][]string{{other, committedKey}, {committedKey, other}} {
		stdout.Reset()
		stderr.Reset()
		code := run(context.Background(), []string{"merge", "--key", order[0], "--key", order[1], dir}, &stdout, &stderr)
		assert.Equal(t, code, exitcode.Failed)
		assert.Check(t, is.Contains(stderr.String(), "summary.md: sha256 mismatch"), "keys %v: %s", order, stderr.String())
	}
}
