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
)

func writeManifest(t *testing.T, edit func(string) string) string {
	t.Helper()
	data, err := os.ReadFile("../../manifests/linux-x64-cgroupv1.yaml")
	assert.NilError(t, err)
	path := filepath.Join(t.TempDir(), "m.yaml")
	assert.NilError(t, os.WriteFile(path, []byte(edit(string(data))), 0o644))
	return path
}

func TestNoEngineIsOneLine(t *testing.T) {
	path := writeManifest(t, func(s string) string {
		return strings.Replace(s, "unix:///var/run/docker.sock", "unix:///nonexistent/qualbox.sock", 1)
	})
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"run", "--manifest", path, "--output", filepath.Join(t.TempDir(), "out")}, &stdout, &stderr)
	assert.Equal(t, code, exitEngine)
	assert.Equal(t, strings.Count(stderr.String(), "\n"), 1, "want one line, got %q", stderr.String())
	assert.Check(t, is.Contains(stderr.String(), "no Docker Engine answers at unix:///nonexistent/qualbox.sock"))
	assert.Check(t, is.Contains(stderr.String(), "make engine"))
	assert.Check(t, is.Contains(stderr.String(), "dockerd --host unix:///nonexistent/qualbox.sock"))
}

func TestManifestErrorExitsTwo(t *testing.T) {
	path := writeManifest(t, func(s string) string { return strings.Replace(s, "name: lifecycle", "name: foo", 1) })
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"run", "--manifest", path}, &stdout, &stderr)
	assert.Equal(t, code, exitUsage)
	assert.Check(t, is.Contains(stderr.String(), `scenarios[2].name: unknown scenario "foo": allowed admission, cancellation, controller-death, datasets, descendant-containment, desktop-admission, exact-cleanup, isolation, lifecycle, lost-engine-replies, memory-exhaustion, network-isolation, pid-exhaustion, stream-limits, tmpfs-bounds, transfer, unsupported-quota`))
	assert.Check(t, is.Contains(stderr.String(), path+":"))
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{nil, {"frobnicate"}, {"run"}, {"run", "--bogus"}} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, run(context.Background(), args, &stdout, &stderr), exitUsage, "args %q", args)
	}
}

// The internal controller-child subcommand rejects incomplete flags with
// exit 2 and stays out of the usage text.
func TestControllerChildUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"controller-child", "--profile", "linux-x64-cgroupv1"}, &stdout, &stderr)
	assert.Equal(t, code, exitUsage)
	assert.Check(t, is.Contains(stderr.String(), "is required"))
	stdout.Reset()
	assert.Equal(t, run(context.Background(), []string{"help"}, &stdout, &stderr), exitOK)
	assert.Check(t, !strings.Contains(stdout.String(), "controller-child"))
}

func TestRefusesNonEmptyOutput(t *testing.T) {
	path := writeManifest(t, func(s string) string { return s })
	out := t.TempDir()
	assert.NilError(t, os.WriteFile(filepath.Join(out, "old"), nil, 0o644))
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"run", "--manifest", path, "--output", out}, &stdout, &stderr)
	assert.Equal(t, code, exitUsage)
	assert.Check(t, is.Contains(stderr.String(), "is not empty"))
}
