package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/internal/cli/clitest"
	"github.com/qualbox/qualbox/internal/exitcode"
	"github.com/qualbox/qualbox/qualify"
	"github.com/qualbox/qualbox/qualify/evidence"
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
	assert.Equal(t, code, exitcode.Unavailable)
	assert.Equal(t, strings.Count(stderr.String(), "\n"), 1, "want one line, got %q", stderr.String())
	assert.Check(t, is.Contains(stderr.String(), "no Docker Engine answers at unix:///nonexistent/qualbox.sock"))
	assert.Check(t, is.Contains(stderr.String(), "make engine"))
	assert.Check(t, is.Contains(stderr.String(), "dockerd --host unix:///nonexistent/qualbox.sock"))
}

func TestManifestErrorExitsTwo(t *testing.T) {
	path := writeManifest(t, func(s string) string { return strings.Replace(s, "name: lifecycle", "name: foo", 1) })
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"run", "--manifest", path}, &stdout, &stderr)
	assert.Equal(t, code, exitcode.Usage)
	assert.Check(t, is.Contains(stderr.String(), `scenarios[2].name: unknown scenario "foo": allowed admission, cancellation, controller-death, datasets, descendant-containment, desktop-admission, engine-restart, exact-cleanup, isolation, lifecycle, lost-engine-replies, memory-exhaustion, network-isolation, pid-exhaustion, stream-limits, tmpfs-bounds, transfer, unsupported-quota`))
	assert.Check(t, is.Contains(stderr.String(), path+":"))
}

// Usage errors exit 2 with the message and usage on stderr and nothing on
// stdout.
func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{nil, {"frobnicate"}, {"run"}, {"run", "--bogus"}, {"verify", "--key"}, {"merge", "--markdown", "--json"},
		{"keygen"}, {"image", "extra"}, {"version", "extra"}, {"help", "frobnicate"}} {
		var stdout, stderr bytes.Buffer
		assert.Check(t, is.Equal(run(context.Background(), args, &stdout, &stderr), exitcode.Usage), "args %q", args)
		assert.Check(t, is.Equal(stdout.String(), ""), "args %q", args)
		assert.Check(t, is.Contains(stderr.String(), "usage: qualify"), "args %q", args)
	}
}

// subcommands is every subcommand the usage must list, in order.
var subcommands = []string{"run", "verify", "merge", "keygen", "image", "version", "help"}

// -h and --help on the command and on every subcommand print the help on
// stdout, exit 0 and write nothing on stderr; so does `help COMMAND`.
func TestHelpExitsZeroOnStdout(t *testing.T) {
	cases := [][]string{{"--help"}, {"-h"}, {"help"}, {"controller-child", "--help"}}
	for _, sub := range subcommands {
		cases = append(cases, []string{sub, "--help"}, []string{sub, "-h"}, []string{"help", sub})
	}
	// A help flag after other flags still wins.
	cases = append(cases, []string{"run", "--json", "--help"}, []string{"verify", "--key", "k.pub", "-h"})
	for _, args := range cases {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), args, &stdout, &stderr)
		assert.Check(t, is.Equal(code, exitcode.OK), "args %q: %s", args, stderr.String())
		assert.Check(t, is.Equal(stderr.String(), ""), "args %q", args)
		assert.Check(t, strings.HasPrefix(stdout.String(), "usage: qualify"), "args %q: %q", args, stdout.String())
	}
}

// The usage lists each subcommand with a one-line description, and not
// the internal controller-child.
func TestUsageListsSubcommands(t *testing.T) {
	var stdout, stderr bytes.Buffer
	assert.Equal(t, run(context.Background(), []string{"--help"}, &stdout, &stderr), exitcode.OK)
	_, list, ok := strings.Cut(stdout.String(), "Commands:\n")
	assert.Assert(t, ok, stdout.String())
	list, _, _ = strings.Cut(list, "\n\n")
	var names []string
	for _, l := range strings.Split(list, "\n") {
		m := regexp.MustCompile(`^  ([a-z-]+) +(\S.{10,})$`).FindStringSubmatch(l)
		assert.Assert(t, m != nil, "line %q is not a command and its description", l)
		names = append(names, m[1])
	}
	assert.DeepEqual(t, names, subcommands)
	assert.Check(t, !strings.Contains(stdout.String(), "controller-child"))
}

// Every help keeps the flag conventions (clitest.CheckHelp: no backquote
// misparse, --name spelled with two dashes, usage line and flag list
// agree), carries the exit status table, and says where the Engine comes
// from.
func TestHelpMatchesFlags(t *testing.T) {
	for _, sub := range append([]string{""}, subcommands[:len(subcommands)-1]...) {
		args := []string{"--help"}
		if sub != "" {
			args = []string{sub, "--help"}
		}
		var stdout, stderr bytes.Buffer
		assert.Equal(t, run(context.Background(), args, &stdout, &stderr), exitcode.OK)
		help := stdout.String()
		assert.Check(t, is.Len(clitest.CheckHelp(help), 0), "qualify %s --help:\n%s", sub, help)
		var table bytes.Buffer
		exitcode.Help(&table)
		assert.Check(t, is.Contains(help, table.String()), "qualify %s --help", sub)
		if sub == "" || sub == "run" || sub == "image" {
			assert.Check(t, is.Contains(strings.Join(strings.Fields(help), " "), "DOCKER_HOST and docker contexts are ignored on purpose"), "qualify %s --help", sub)
		}
	}
}

func TestVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	assert.Equal(t, run(context.Background(), []string{"version"}, &stdout, &stderr), exitcode.OK)
	assert.Check(t, is.Equal(stderr.String(), ""))
	assert.Check(t, is.Contains(stdout.String(), "qualify version "))
	assert.Check(t, is.Contains(stdout.String(), "\nrevision: "))
	assert.Check(t, is.Contains(stdout.String(), "\ngo: "+runtime.Version()+"\n"))
}

// A binary built with VCS stamping prints the commit it was built from,
// with +dirty for uncommitted changes. The go command stamps only a
// checkout whose .git is a directory: in a git worktree (.git is a file)
// it stamps nothing, and version says so.
func TestVersionOfBuiltBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "qualify")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=true")
	out, err := build.CombinedOutput()
	assert.NilError(t, err, string(out))
	got, err := exec.Command(bin, "version").Output()
	assert.NilError(t, err)
	assert.Check(t, is.Contains(string(got), "\ngo: "+runtime.Version()+"\n"))

	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	assert.NilError(t, err)
	if fi, err := os.Stat(filepath.Join(strings.TrimSpace(string(top)), ".git")); err != nil || !fi.IsDir() {
		assert.Check(t, is.Contains(string(got), "revision: unknown (built without VCS stamping"))
		return
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	assert.NilError(t, err)
	want := "revision: " + strings.TrimSpace(string(head))
	if st, _ := exec.Command("git", "status", "--porcelain").Output(); len(st) > 0 {
		want += "+dirty"
	}
	assert.Check(t, is.Contains(string(got), want+"\n"))
}

// An internal error (here: the key directory cannot be created) exits 4,
// not the usage status.
func TestInternalErrorIsNotUsage(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	assert.NilError(t, os.WriteFile(file, nil, 0o644))
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"keygen", "--out", filepath.Join(file, "keys")}, &stdout, &stderr)
	assert.Check(t, is.Equal(code, exitcode.Internal))
	assert.Check(t, is.Contains(stderr.String(), "not a directory"))
	assert.Check(t, is.Equal(stdout.String(), ""))

	// A report that could not be completely written or signed is an
	// internal error even when every scenario passed; an interruption
	// still says 130.
	passed := &evidence.Run{Verdict: evidence.Verdict{Kind: evidence.Passed}}
	assert.Check(t, is.Equal(qualify.ExitCode(passed, nil), exitcode.OK))
	assert.Check(t, is.Equal(qualify.ExitCode(passed, os.ErrPermission), exitcode.Internal))
	assert.Check(t, is.Equal(qualify.ExitCode(&evidence.Run{Verdict: evidence.Verdict{Kind: evidence.Failed}}, nil), exitcode.Failed))
	assert.Check(t, is.Equal(qualify.ExitCode(&evidence.Run{Interrupted: true}, os.ErrPermission), exitcode.Interrupted))
	assert.Check(t, is.Equal(qualify.ExitCode(nil, os.ErrPermission), exitcode.Internal))
}

// An existing key is never overwritten: a usage error naming the file.
func TestKeygenRefusesExistingKey(t *testing.T) {
	keys := t.TempDir()
	var stdout, stderr bytes.Buffer
	assert.Equal(t, run(context.Background(), []string{"keygen", "--out", keys}, &stdout, &stderr), exitcode.OK)
	stdout.Reset()
	assert.Equal(t, run(context.Background(), []string{"keygen", "--out", keys}, &stdout, &stderr), exitcode.Usage)
	assert.Check(t, is.Contains(stderr.String(), "qualbox-ed25519.key exists: refusing to overwrite a key"))
	assert.Check(t, is.Equal(stdout.String(), ""))
}

// The internal controller-child subcommand rejects incomplete flags with
// exit 2 and stays out of the usage text.
func TestControllerChildUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"controller-child", "--profile", "linux-x64-cgroupv1"}, &stdout, &stderr)
	assert.Equal(t, code, exitcode.Usage)
	assert.Check(t, is.Contains(stderr.String(), "is required"))
	stdout.Reset()
	assert.Equal(t, run(context.Background(), []string{"help"}, &stdout, &stderr), exitcode.OK)
	assert.Check(t, !strings.Contains(stdout.String(), "controller-child"))
}

func TestRefusesNonEmptyOutput(t *testing.T) {
	path := writeManifest(t, func(s string) string { return s })
	out := t.TempDir()
	assert.NilError(t, os.WriteFile(filepath.Join(out, "old"), nil, 0o644))
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"run", "--manifest", path, "--output", out}, &stdout, &stderr)
	assert.Equal(t, code, exitcode.Usage)
	assert.Check(t, is.Contains(stderr.String(), "is not empty"))
}

// qualify run renders the Result qualify.Run returns: the signing line on
// stderr when signed, then the table or (--json) the run evidence on
// stdout; a write that fails is an error.
func TestRenderRun(t *testing.T) {
	res := &qualify.Result{Run: &evidence.Run{Schema: evidence.Schema, Profile: "linux-x64-cgroupv1", Verdict: evidence.Verdict{Kind: evidence.Passed},
		Scenarios: []evidence.ScenarioSummary{{Index: 1, Name: "admission", Dir: "01-admission", Verdict: evidence.Verdict{Kind: evidence.Passed}, Checks: 3, Passed: 3}}},
		Dir: "/r", Envelope: "/r/evidence.dsse.json", KeyID: "5e35edfe"}
	var stdout, stderr bytes.Buffer
	assert.NilError(t, renderRun(&stdout, &stderr, res, true))
	assert.Check(t, is.Equal(stderr.String(), "signed: /r/evidence.dsse.json (key 5e35edfe)\n"))
	want, err := evidence.MarshalJSON(res.Run)
	assert.NilError(t, err)
	assert.Check(t, is.Equal(stdout.String(), string(want)))

	stdout.Reset()
	stderr.Reset()
	res.Envelope, res.KeyID = "", ""
	assert.NilError(t, renderRun(&stdout, &stderr, res, false))
	assert.Check(t, is.Equal(stderr.String(), ""), "an unsigned run prints no signing line")
	assert.Check(t, is.Contains(stdout.String(), "admission"))
	assert.Check(t, is.Contains(stdout.String(), "passed"))

	assert.Check(t, renderRun(failingWriter{}, &stderr, res, true) != nil)
	assert.Check(t, renderRun(failingWriter{}, &stderr, res, false) != nil)
}

// failingWriter refuses every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, os.ErrClosed }
