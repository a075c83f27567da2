package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/internal/exitcode"
)

// gateDirs is the Makefile's GATE_DIRS, relative to the repository root
// (the working directory): for each reports/linux-* directory, the last
// (in byte order) of its subdirectories that hold an evidence.dsse.json,
// with a trailing slash as make's $(dir) leaves it.
func gateDirs(t *testing.T) []string {
	t.Helper()
	lanes, err := filepath.Glob("reports/linux-*")
	assert.NilError(t, err)
	var dirs []string
	for _, lane := range lanes {
		envelopes, err := filepath.Glob(filepath.Join(lane, "*", "evidence.dsse.json"))
		assert.NilError(t, err)
		var reports []string
		for _, e := range envelopes {
			reports = append(reports, filepath.Dir(e)+"/")
		}
		if len(reports) > 0 {
			slices.Sort(reports)
			dirs = append(dirs, reports[len(reports)-1])
		}
	}
	assert.Assert(t, len(dirs) > 0)
	return dirs
}

// reports/matrix.md is exactly what `make gate` prints over the committed
// reports, whether the gate passes or fails.
func TestMatrixMarkdownIsTheGate(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append([]string{"merge", "--policy", "reports/gate-policy.yaml", "--markdown"}, gateDirs(t)...), &stdout, &stderr)
	assert.Assert(t, code == exitcode.OK || code == exitcode.Failed, "exit %d: %s", code, stderr.String())
	committed, err := os.ReadFile("reports/matrix.md")
	assert.NilError(t, err)
	assert.Check(t, stdout.String() == string(committed),
		"reports/matrix.md is not what `make gate` prints: run `make matrix` and commit reports/matrix.md\n--- make gate prints:\n%s", stdout.String())
	for i, r := range stdout.String() {
		if r >= utf8.RuneSelf {
			t.Fatalf("Markdown is not ASCII at byte %d: %q", i, r)
		}
	}
}

// The terminal table of the committed gate fits 120 columns, in ASCII
// and in UTF-8 alike, and its first line is the verdict.
func TestGateTableFits120Columns(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	for _, args := range [][]string{{"--ascii"}, {}} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append(append([]string{"merge", "--policy", "reports/gate-policy.yaml"}, args...), gateDirs(t)...), &stdout, &stderr)
		assert.Assert(t, code == exitcode.OK || code == exitcode.Failed, "exit %d: %s", code, stderr.String())
		lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
		assert.Check(t, is.Regexp(`^GATE: (PASSED|FAILED) \(\d+ passed, \d+ failed, \d+ pending, \d+ refused rows\)$`, lines[0]))
		for i, l := range lines {
			assert.Check(t, utf8.RuneCountInString(l) <= 120, "%v line %d is %d columns wide: %q", args, i+1, utf8.RuneCountInString(l), l)
		}
		assert.Check(t, is.Contains(stdout.String(), "| Scenario               | lane-a"), "policy rows name the columns: %s", stdout.String())
	}
}
