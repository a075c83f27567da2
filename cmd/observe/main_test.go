package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/internal/cli/clitest"
	"github.com/qualbox/qualbox/internal/exitcode"
	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/syntheticengine"
)

const trees = "../../qualify/observer/testdata/"

func TestObserveRecordedV2Tree(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--root", trees + "v2-systemd", "--pid", "4242"}, &stdout, &stderr)
	assert.Equal(t, code, exitcode.OK, stderr.String())
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
	assert.Equal(t, code, exitcode.OK, stderr.String())
	assert.Check(t, is.Contains(stdout.String(), "after cleanup: scope gone"))

	stdout.Reset()
	assert.Equal(t, run(context.Background(), []string{"verify", "--key", pub, out}, &stdout, &stderr), exitcode.OK, stdout.String())
	assert.Check(t, is.Contains(stdout.String(), `"absence":"gone"`))

	table := filepath.Join(out, "observation.txt")
	data, err := os.ReadFile(table)
	assert.NilError(t, err)
	assert.NilError(t, os.WriteFile(table, []byte(strings.Replace(string(data), "gone", "gonE", 1)), 0o644))
	stdout.Reset()
	assert.Equal(t, run(context.Background(), []string{"verify", "--key", pub, out}, &stdout, &stderr), exitcode.Failed)
	assert.Check(t, is.Contains(stderr.String(), "observation.txt: sha256 mismatch"))
}

// The reviewer's reproduction: a tree whose scope cannot be resolved is an
// error, never "gone".
func TestObserveUnresolvableIsNotGone(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--root", trees + "v2-gone", "--pid", "4242", "--until-gone", "--timeout", "1s"}, &stdout, &stderr)
	assert.Equal(t, code, exitcode.Unavailable, stderr.String())
	assert.Check(t, !strings.Contains(stdout.String(), "scope gone"))
}

func TestObserveOccupiedScopeFails(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--root", trees + "v2-systemd", "--pid", "4242", "--until-gone", "--timeout", "300ms", "--interval", "100ms"}, &stdout, &stderr)
	assert.Equal(t, code, exitcode.Failed)
	assert.Check(t, is.Contains(stderr.String(), "scope still occupied"))
}

// --container resolves the keeper through the newest profile pin the
// Engine serves: on an Engine reporting API 1.45 the inspect goes out as
// /v1.41, neither the Engine's version nor the newest pin 1.52 (the
// synthetic Engine answers it with 501, so observe stops there, exit 3);
// an Engine reporting 1.40 is refused before any inspect, and where
// nothing answers the error names the socket.
func TestObserveContainerPinsTheAPIVersion(t *testing.T) {
	dir, err := os.MkdirTemp("", "qb-observe")
	assert.NilError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	shape := syntheticengine.Desktop().Clone()
	shape.Version.APIVersion = "1.45"
	srv, err := syntheticengine.Start(dir, shape)
	assert.NilError(t, err)
	t.Cleanup(func() { assert.Check(t, srv.Close()) })
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--container", "c0ffee", "--endpoint", srv.Endpoint()}, &stdout, &stderr)
	assert.Check(t, is.Equal(code, exitcode.Unavailable), stderr.String())
	assert.Check(t, is.Contains(srv.Requests(), "GET /v1.41/containers/c0ffee/json"), "%v", srv.Requests())

	shape.Version.APIVersion = "1.40"
	srv.SetShape(shape)
	srv.ResetRequests()
	stderr.Reset()
	code = run(context.Background(), []string{"--container", "c0ffee", "--endpoint", srv.Endpoint()}, &stdout, &stderr)
	assert.Check(t, is.Equal(code, exitcode.Unavailable))
	assert.Check(t, is.Equal(stderr.String(), "observe: the Engine at "+srv.Endpoint()+" reports API 1.40, older than every profile's daemon.minAPIVersion\n"))
	for _, r := range srv.Requests() {
		assert.Check(t, strings.HasSuffix(r, " /_ping"), "only /_ping reaches a refused Engine: %s", r)
	}

	sock := "unix://" + filepath.Join(dir, "nothing.sock")
	stderr.Reset()
	code = run(context.Background(), []string{"--container", "c0ffee", "--endpoint", sock}, &stdout, &stderr)
	assert.Check(t, is.Equal(code, exitcode.Unavailable))
	assert.Check(t, strings.HasPrefix(stderr.String(), "observe: no Docker Engine answers at "+sock+" ("), stderr.String())
	assert.Check(t, is.Equal(stdout.String(), ""))
}

func TestObserveUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"--pid", "1", "--container", "x"}, {"--pid", "1", "--signing-key", "k"}, {"--bogus"},
		{"verify", "--key", "k.pub"}, {"version", "x"}, {"help", "frobnicate"}} {
		var stdout, stderr bytes.Buffer
		assert.Check(t, is.Equal(run(context.Background(), args, &stdout, &stderr), exitcode.Usage), "%q", args)
		assert.Check(t, is.Equal(stdout.String(), ""), "%q", args)
		assert.Check(t, is.Contains(stderr.String(), "observe"), "%q", args)
	}
	var stdout, stderr bytes.Buffer
	assert.Equal(t, run(context.Background(), []string{"--root", trees + "v2-systemd", "--pid", "1"}, &stdout, &stderr), exitcode.Unavailable)
}

// -h and --help on observe and on each subcommand print the help on
// stdout, exit 0 and write nothing on stderr; so does `help COMMAND`.
func TestObserveHelpExitsZeroOnStdout(t *testing.T) {
	cases := [][]string{{"--help"}, {"-h"}, {"help"}, {"--pid", "1", "--help"}}
	for _, sub := range []string{"verify", "version"} {
		cases = append(cases, []string{sub, "--help"}, []string{sub, "-h"}, []string{"help", sub})
	}
	for _, args := range cases {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), args, &stdout, &stderr)
		assert.Check(t, is.Equal(code, exitcode.OK), "args %q: %s", args, stderr.String())
		assert.Check(t, is.Equal(stderr.String(), ""), "args %q", args)
		assert.Check(t, strings.HasPrefix(stdout.String(), "usage: observe"), "args %q: %q", args, stdout.String())
	}
}

// The help lists each subcommand with a one-line description, keeps the
// flag conventions, carries the exit status table and says --endpoint
// ignores DOCKER_HOST and docker contexts.
func TestObserveHelpContents(t *testing.T) {
	var table bytes.Buffer
	exitcode.Help(&table)
	for _, args := range [][]string{{"--help"}, {"verify", "--help"}, {"version", "--help"}} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, run(context.Background(), args, &stdout, &stderr), exitcode.OK)
		assert.Check(t, is.Len(clitest.CheckHelp(stdout.String()), 0), "%q:\n%s", args, stdout.String())
		assert.Check(t, is.Contains(stdout.String(), table.String()), "%q", args)
	}
	var stdout, stderr bytes.Buffer
	assert.Equal(t, run(context.Background(), []string{"--help"}, &stdout, &stderr), exitcode.OK)
	help := stdout.String()
	_, list, ok := strings.Cut(help, "Commands:\n")
	assert.Assert(t, ok, help)
	list, _, _ = strings.Cut(list, "\n\n")
	var names []string
	for _, l := range strings.Split(list, "\n") {
		m := regexp.MustCompile(`^  (\(none\)|[a-z]+) +(\S.{10,})$`).FindStringSubmatch(l)
		assert.Assert(t, m != nil, "line %q is not a command and its description", l)
		names = append(names, m[1])
	}
	assert.DeepEqual(t, names, []string{"(none)", "verify", "version", "help"})
	endpoint := help[strings.Index(help, "  --endpoint"):]
	endpoint = strings.Join(strings.Fields(endpoint[:strings.Index(endpoint, "\n  --interval")]), " ")
	assert.Check(t, is.Contains(endpoint, "DOCKER_HOST and docker contexts are ignored on purpose"))
}

func TestObserveVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	assert.Equal(t, run(context.Background(), []string{"version"}, &stdout, &stderr), exitcode.OK)
	assert.Check(t, is.Equal(stderr.String(), ""))
	assert.Check(t, is.Contains(stdout.String(), "observe version "))
	assert.Check(t, is.Contains(stdout.String(), "\nrevision: "))
	assert.Check(t, is.Contains(stdout.String(), "\ngo: "+runtime.Version()+"\n"))
}

// A failure to write the observation (--out under a regular file) is an
// internal error, exit 4, not the usage status, and goes to stderr.
func TestObserveInternalErrorIsNotUsage(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	assert.NilError(t, os.WriteFile(file, nil, 0o644))
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--root", trees + "v2-systemd", "--pid", "4242", "--out", filepath.Join(file, "obs")}, &stdout, &stderr)
	assert.Check(t, is.Equal(code, exitcode.Internal))
	assert.Check(t, is.Contains(stderr.String(), "not a directory"))
}
