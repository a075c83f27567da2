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
	"github.com/qualbox/qualbox/qualify/scenario"
)

const committedKey = "../../reports/keys/qualbox-ed25519.pub"

// committedReports are the signed reports under reports/ (never edited).
func committedReports(t *testing.T) []string {
	dirs, err := filepath.Glob("../../reports/linux-x64-cgroupv1/*/evidence.dsse.json")
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
	code := run(context.Background(), append([]string{"merge", "--key", committedKey, "--require", "admission,memory-exhaustion,pid-exhaustion"}, reports...), &stdout, &stderr)
	assert.Equal(t, code, exitcode.OK, stderr.String())
	assert.Check(t, is.Contains(stdout.String(), "│ memory-exhaustion      │ passed │ passed │"))

	stdout.Reset()
	stderr.Reset()
	code = run(context.Background(), append([]string{"merge", "--key", committedKey, "--require", "controller-death"}, reports...), &stdout, &stderr)
	assert.Equal(t, code, exitcode.Failed)
	// The first two committed runs predate the scenario.
	assert.Check(t, is.Contains(stderr.String(), "T1: controller-death: not run"))

	// The whole catalogue passed under every run that selected it.
	var full []string
	for _, dir := range reports {
		data, err := os.ReadFile(filepath.Join(dir, "evidence.json"))
		assert.NilError(t, err)
		if bytes.Contains(data, []byte(`"controller-death"`)) {
			full = append(full, dir)
		}
	}
	assert.Assert(t, len(full) >= 1, "no committed report of the whole catalogue")
	stdout.Reset()
	stderr.Reset()
	code = run(context.Background(), append([]string{"merge", "--key", committedKey, "--require", strings.Join(scenario.Default().Names(), ",")}, full...), &stdout, &stderr)
	assert.Equal(t, code, exitcode.OK, stderr.String())
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
