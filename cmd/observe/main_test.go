package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/qualify/attest"
)

const trees = "../../qualify/observer/testdata/"

func TestObserveRecordedV2Tree(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--root", trees + "v2-systemd", "--pid", "4242"}, &stdout, &stderr)
	assert.Equal(t, code, exitOK, stderr.String())
	assert.Check(t, is.Contains(stdout.String(), "pid 4242, cgroup v2"))
	assert.Check(t, is.Contains(stdout.String(), "│ before │ 268435456 │ 0 "))
}

func TestObserveSignedUntilGone(t *testing.T) {
	keys, out := t.TempDir(), filepath.Join(t.TempDir(), "obs")
	_, pub, err := attest.GenerateKey(keys)
	assert.NilError(t, err)
	// A copy of a resolvable tree whose keeper and scope disappear while
	// observe waits: it must see the scope resolve first, then go.
	root := filepath.Join(t.TempDir(), "root")
	assert.NilError(t, os.CopyFS(root, os.DirFS(trees+"v2-systemd")))
	time.AfterFunc(300*time.Millisecond, func() {
		scope, _ := filepath.Glob(filepath.Join(root, "sys/fs/cgroup/system.slice/docker-*.scope"))
		for _, p := range append(scope, filepath.Join(root, "proc/4242")) {
			os.RemoveAll(p)
		}
	})
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--root", root, "--pid", "4242", "--until-gone", "--timeout", "5s", "--interval", "100ms",
		"--out", out, "--signing-key", filepath.Join(keys, attest.PrivateKeyFile)}, &stdout, &stderr)
	assert.Equal(t, code, exitOK, stderr.String())
	assert.Check(t, is.Contains(stdout.String(), "after cleanup: scope gone"))

	stdout.Reset()
	assert.Equal(t, run(context.Background(), []string{"verify", "--key", pub, out}, &stdout, &stderr), exitOK, stdout.String())
	assert.Check(t, is.Contains(stdout.String(), `"absence":"gone"`))

	table := filepath.Join(out, "observation.txt")
	data, err := os.ReadFile(table)
	assert.NilError(t, err)
	assert.NilError(t, os.WriteFile(table, []byte(strings.Replace(string(data), "gone", "gonE", 1)), 0o644))
	stdout.Reset()
	assert.Equal(t, run(context.Background(), []string{"verify", "--key", pub, out}, &stdout, &stderr), exitFailed)
	assert.Check(t, is.Contains(stdout.String(), "observation.txt: sha256 mismatch"))
}

// The reviewer's reproduction: a tree whose scope cannot be resolved is an
// error, never "gone".
func TestObserveUnresolvableIsNotGone(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--root", trees + "v2-gone", "--pid", "4242", "--until-gone", "--timeout", "1s"}, &stdout, &stderr)
	assert.Equal(t, code, exitResolve, stderr.String())
	assert.Check(t, !strings.Contains(stdout.String(), "scope gone"))
}

func TestObserveOccupiedScopeFails(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--root", trees + "v2-systemd", "--pid", "4242", "--until-gone", "--timeout", "300ms", "--interval", "100ms"}, &stdout, &stderr)
	assert.Equal(t, code, exitFailed)
	assert.Check(t, is.Contains(stderr.String(), "scope still occupied"))
}

func TestObserveUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"--pid", "1", "--container", "x"}, {"--pid", "1", "--signing-key", "k"}} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, run(context.Background(), args, &stdout, &stderr), exitUsage, "%q", args)
	}
	var stdout, stderr bytes.Buffer
	assert.Equal(t, run(context.Background(), []string{"--root", trees + "v2-systemd", "--pid", "1"}, &stdout, &stderr), exitResolve)
}
