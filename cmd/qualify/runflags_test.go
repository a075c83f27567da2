package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/skip"

	"github.com/qualbox/qualbox/internal/exitcode"
	"github.com/qualbox/qualbox/internal/testengine"
	"github.com/qualbox/qualbox/qualify"
	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/evidence"
	"github.com/qualbox/qualbox/qualify/guest"
	"github.com/qualbox/qualbox/qualify/manifest"
	"github.com/qualbox/qualbox/qualify/scenario"
)

// hangingEngine is a Unix socket that accepts connections and never
// answers, so that a command contacting it waits out its 10 s ping; it
// returns the endpoint and the number of connections accepted so far.
func hangingEngine(t *testing.T) (endpoint string, accepted *atomic.Int64) {
	t.Helper()
	dir, err := os.MkdirTemp("", "qb-hang")
	assert.NilError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "engine.sock")
	l, err := net.Listen("unix", sock)
	assert.NilError(t, err)
	accepted = new(atomic.Int64)
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return "unix://" + sock, accepted
}

// Every flag of run and image is checked before the Engine is contacted:
// with an Engine that would hold the command for 10 s, each bad value is
// a usage error within a second that names it, no connection is made and
// no output directory is created.
func TestFlagsAreCheckedBeforeTheEngine(t *testing.T) {
	endpoint, accepted := hangingEngine(t)
	path := writeManifest(t, func(s string) string {
		return strings.Replace(s, "  - name: desktop-admission\n", "", 1)
	})
	nonEmpty := t.TempDir()
	assert.NilError(t, os.WriteFile(filepath.Join(nonEmpty, "x"), nil, 0o644))
	missing := filepath.Join(t.TempDir(), "missing")
	badInputs := filepath.Join(t.TempDir(), "image-inputs")
	assert.NilError(t, os.WriteFile(badInputs, []byte("colour blue\n"), 0o644))
	runArgs := func(extra ...string) []string {
		return append([]string{"run", "--manifest", path, "--endpoint", endpoint}, extra...)
	}
	imageArgs := func(extra ...string) []string {
		return append([]string{"image", "--endpoint", endpoint}, extra...)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{runArgs("--only", "nosuch"), `qualify run: --only: unknown scenario "nosuch" (the catalogue has: admission, cancellation,`},
		{runArgs("--skip", "desktop-admission"), `qualify run: --skip: scenario "desktop-admission" is not in manifest ` + path + ` (it lists: admission, isolation,`},
		{runArgs("--only", "admission", "--skip", "isolation"), "qualify run: --only and --skip exclude each other: give one of them"},
		{runArgs("--only", "admission,"), `qualify run: --only "admission,": empty scenario name; want NAME[,NAME...]`},
		{runArgs("--skip", "isolation, isolation"), `qualify run: --skip "isolation, isolation": scenario "isolation" is named twice`},
		{runArgs("--repeat", "0"), "qualify run: --repeat must be 1..1000"},
		{runArgs("--parallel", "17"), "and --parallel 1..16, got 1 and 17"},
		{runArgs("--scenario-timeout", "10ms"), "qualify run: --scenario-timeout must be 1s..24h0m0s, got 10ms"},
		{runArgs("--progress", "fancy"), `qualify run: --progress "fancy": want auto, tty or plain`},
		{runArgs("--progress="), `qualify run: --progress "": want auto, tty or plain`},
		{runArgs("--probe", missing), `qualify run: --probe "` + missing + `": stat`},
		{runArgs("--probe", t.TempDir()), `": not a regular file`},
		{runArgs("--signing-key", missing), missing},
		{runArgs("--engine-build", missing), `qualify run: --engine-build: engine build record "` + missing + `"`},
		{runArgs("--engine-build", t.TempDir()), `qualify run: --engine-build: engine build record`},
		{runArgs("--image-inputs", missing), `qualify run: --image-inputs: image inputs record "` + missing + `"`},
		{runArgs("--image-inputs", badInputs), `qualify run: --image-inputs: image inputs record "` + badInputs + `": imageInputs line 1: unknown name "colour"`},
		{runArgs("--output", nonEmpty), "is not empty: give a fresh directory"},
		{imageArgs("--arch", "riscv64"), `qualify image: --arch "riscv64": want amd64 or arm64`},
		{imageArgs("--remove", "sha256:abc"), `qualify image: --remove "sha256:abc": want an exact image ID`},
		{imageArgs("--probe", missing), `qualify image: --probe "` + missing + `"`},
		{imageArgs("--busybox", missing), `qualify image: --busybox "` + missing + `": stat`},
		{[]string{"image", "--endpoint", "tcp://127.0.0.1:2375"}, `qualify image: --endpoint "tcp://127.0.0.1:2375": want unix:///<absolute socket path>`},
	} {
		out := filepath.Join(t.TempDir(), "out")
		args := tc.args
		if args[0] == "run" && !strings.Contains(strings.Join(args, " "), "--output") {
			args = append(args, "--output", out)
		}
		var stdout, stderr bytes.Buffer
		start := time.Now()
		code := run(context.Background(), args, &stdout, &stderr)
		took := time.Since(start)
		assert.Check(t, is.Equal(code, exitcode.Usage), "%v: %s", tc.args, stderr.String())
		assert.Check(t, is.Contains(stderr.String(), tc.want), "%v", tc.args)
		assert.Check(t, took < time.Second, "%v took %s: the Engine was contacted", tc.args, took)
		assert.Check(t, is.Equal(accepted.Load(), int64(0)), "%v connected to the Engine", tc.args)
		_, err := os.Stat(out)
		assert.Check(t, os.IsNotExist(err), "%v: no output directory for a usage error", tc.args)
	}
	// The check itself: a good invocation does reach the hanging Engine.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	var stdout, stderr bytes.Buffer
	assert.Equal(t, run(ctx, imageArgs("--remove", "sha256:"+strings.Repeat("0", 64)), &stdout, &stderr), exitcode.Unavailable, stderr.String())
	assert.Check(t, accepted.Load() > 0)
}

// qualify --version prints what qualify version prints.
func TestVersionFlag(t *testing.T) {
	var a, b, stderr bytes.Buffer
	assert.Equal(t, run(context.Background(), []string{"--version"}, &a, &stderr), exitcode.OK)
	assert.Equal(t, run(context.Background(), []string{"version"}, &b, &stderr), exitcode.OK)
	assert.Equal(t, a.String(), b.String())
	assert.Check(t, is.Contains(a.String(), "catalogue: v"))
	assert.Check(t, is.Equal(stderr.String(), ""))
	assert.Equal(t, run(context.Background(), []string{"--version", "x"}, &a, &stderr), exitcode.Usage)
}

// second is the outcome scenario under another name, so a manifest can
// list two scenarios to select from.
type second struct{ outcome }

func (second) Name() string { return "second" }

// partialRun runs, against the synthetic lane A Engine, a manifest of the
// outcome and second scenarios (both passing) with --only outcome, signs
// it with a fresh key and writes a policy whose required row pins the
// manifest and needs outcome.
func partialRun(t *testing.T) (report, keys, policy string) {
	t.Helper()
	dir := t.TempDir()
	endpoint, engine := laneAEngine(t)
	text := strings.Replace(strings.Replace(outcomeManifest, "%s", strings.Repeat("a", 64), 1), "%t", "true", 1) + "  - {name: second, params: {pass: true}}\n"
	text = strings.Replace(text, "unix:///var/run/docker.sock", endpoint, 1)
	manifestPath := filepath.Join(dir, "m.yaml")
	assert.NilError(t, os.WriteFile(manifestPath, []byte(text), 0o644))
	reg := scenario.NewRegistry(outcome{}, second{})
	useGateScenarios(t, reg)
	m, err := manifest.Load(manifestPath, reg)
	assert.NilError(t, err)
	sel, err := selectScenarios("--only", []string{"outcome"}, reg, m)
	assert.NilError(t, err)
	keys = filepath.Join(dir, "keys")
	privPath, pub, err := attest.GenerateKey(keys)
	assert.NilError(t, err)
	key, err := attest.LoadPrivateKey(privPath)
	assert.NilError(t, err)
	report = filepath.Join(dir, "report")
	_, err = qualify.Run(context.Background(), qualify.Config{Manifest: m, Output: report, Registry: reg, Engine: engine,
		ImageID: laneImage, ImageSource: "manifest", SigningKey: key, Selection: sel})
	assert.NilError(t, err)
	policy = hermeticPolicy(t, dir, "policy.yaml", manifestPath, false, scenario.CatalogueVersion, trustLine(t, dir, pub, "hermetic"))
	return report, keys, policy
}

// A partial report verifies, but merge --policy refuses it for a required
// row, naming the row and the scenario not run, though the row's own
// scenario passed. A forger who re-signs it as a complete report by
// dropping the unselected entry is refused by the comparison with the
// pinned manifest.
func TestGateRefusesPartialReports(t *testing.T) {
	report, keys, policy := partialRun(t)
	code, stderr := gate(t, report, keys, policy)
	assert.Equal(t, code, exitcode.Failed, stderr)
	assert.Check(t, is.Contains(stderr, "qualify merge: not passed: report "+report+": row hermetic (profile linux-x64-cgroupv1): partial report (--only outcome): scenarios not run: second"), stderr)

	// The forgery: the header says complete and the scenario list no
	// longer shows what was not run.
	data, err := os.ReadFile(filepath.Join(report, "evidence.json"))
	assert.NilError(t, err)
	var r evidence.Run
	assert.NilError(t, json.Unmarshal(data, &r))
	r.Selection, r.Scenarios = nil, r.Scenarios[:1]
	data, err = os.ReadFile(filepath.Join(report, "01-outcome", "evidence.json"))
	assert.NilError(t, err)
	var s evidence.Scenario
	assert.NilError(t, json.Unmarshal(data, &s))
	assert.NilError(t, evidence.WriteReport(report, &r, []*evidence.Scenario{&s}))
	assert.NilError(t, os.Remove(filepath.Join(report, attest.EnvelopeFile)))
	assert.NilError(t, os.Remove(filepath.Join(report, evidence.TestResultFile)))
	key, err := attest.LoadPrivateKey(filepath.Join(keys, attest.PrivateKeyFile))
	assert.NilError(t, err)
	assert.NilError(t, evidence.SignTestResult(context.Background(), report, key))
	assert.NilError(t, evidence.SignRun(context.Background(), report, key, &r))
	code, stderr = gate(t, report, keys, policy)
	assert.Equal(t, code, exitcode.Failed, stderr)
	assert.Check(t, is.Contains(stderr, "row hermetic (profile linux-x64-cgroupv1): lists 1 scenario run(s), but manifest "+filepath.Join(filepath.Dir(report), "m.yaml")+" names 2 scenario(s), run 1 time(s)"), stderr)
	assert.Check(t, !strings.Contains(stderr, "partial report"), stderr)
}

// End to end on lane A: qualify run --only admission with the project's
// lane A manifest builds the guest image, runs admission alone, removes
// the image, and writes a signed partial report that qualify verify
// --key accepts.
func TestRunOnlyAdmissionOnLaneA(t *testing.T) {
	skip.If(t, testing.Short(), "runs against lane A's Engine")
	socket := testengine.Require(t)
	skip.If(t, "unix://"+socket != defaultEndpoint, "a lane A run; the test Engine is at unix://%s", socket)
	eng, err := connect(context.Background(), defaultEndpoint, "1.41")
	skip.If(t, err != nil, "lane A: %v", err)
	eng.Close()
	_, err = os.Stat(guest.DefaultBusybox)
	skip.If(t, err != nil, "Debian's static busybox is not installed at %s", guest.DefaultBusybox)
	const manifestPath = "../../manifests/linux-x64-cgroupv1.yaml"
	m, err := manifest.Load(manifestPath, scenario.Default())
	assert.NilError(t, err)
	n := len(m.Scenarios)
	assert.Assert(t, n > 2, "the lane A manifest lists %d scenarios", n)
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	assert.Equal(t, run(context.Background(), []string{"keygen", "--out", filepath.Join(dir, "keys")}, &stdout, &stderr), exitcode.OK, stderr.String())
	out := filepath.Join(dir, "report")
	stdout.Reset()
	stderr.Reset()
	code := run(context.Background(), []string{"run", "--manifest", manifestPath, "--only", "admission",
		"--signing-key", filepath.Join(dir, "keys", attest.PrivateKeyFile), "--output", out}, &stdout, &stderr)
	assert.Equal(t, code, exitcode.OK, stderr.String())
	assert.Check(t, is.Contains(stderr.String(), "qualify: partial run (--only admission): not running isolation, lifecycle,"))
	assert.Check(t, is.Contains(stderr.String(), fmt.Sprintf("[1/%d] admission: running\n[1/%d] admission ... passed (", n, n)))
	assert.Check(t, is.Contains(stderr.String(), fmt.Sprintf("[2/%d] isolation ... skipped (not run: not selected)\n", n)))
	assert.Check(t, strings.HasSuffix(stderr.String(), "\n"))
	assert.Check(t, is.Contains(stdout.String(), "PARTIAL (--only admission): not run: isolation, lifecycle,"))
	assert.Check(t, is.Contains(stderr.String(), "signed: "+filepath.Join(out, attest.EnvelopeFile)+" (key "))

	var r evidence.Run
	data, err := os.ReadFile(filepath.Join(out, "evidence.json"))
	assert.NilError(t, err)
	assert.NilError(t, json.Unmarshal(data, &r))
	assert.Check(t, is.DeepEqual(r.Selection.Only, []string{"admission"}))
	assert.Check(t, is.Len(r.Selection.Skipped, n-1))
	assert.Check(t, r.Image.Removed != nil && *r.Image.Removed, "the built image was removed")
	summary, err := os.ReadFile(filepath.Join(out, "summary.md"))
	assert.NilError(t, err)
	assert.Check(t, is.Contains(string(summary), "- Coverage: **PARTIAL** (--only admission): not run: isolation,"))
	entries, err := os.ReadDir(out)
	assert.NilError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Check(t, is.DeepEqual(names, []string{"01-admission", "evidence.dsse.json", "evidence.json", "junit.xml", evidence.HTMLFile, "summary.md", evidence.TestResultFile}))

	stdout.Reset()
	stderr.Reset()
	code = run(context.Background(), []string{"verify", "--key", filepath.Join(dir, "keys", attest.PublicKeyFile), out}, &stdout, &stderr)
	assert.Equal(t, code, exitcode.OK, stderr.String())
	t.Logf("verify: %s", stdout.String())
}
