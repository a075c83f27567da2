package actiontest

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/internal/testengine"
	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/evidence"
)

// laneA is lane A's Engine socket (docs/lanes.md#lane-a).
const laneA = "/var/run/docker.sock"

// runner is one simulated GitHub runner: a temporary RUNNER_TEMP, a
// caller checkout (GITHUB_WORKSPACE) holding a manifest, and the files the
// runner reads back (GITHUB_OUTPUT, GITHUB_STEP_SUMMARY).
type runner struct {
	temp, workspace, output, summary string
	manifest                         string // path in workspace
	env                              map[string]string
}

// repoRoot is the action's source: GITHUB_ACTION_PATH.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	assert.NilError(t, err)
	_, err = os.Stat(filepath.Join(root, "action.yml"))
	assert.NilError(t, err)
	return root
}

// reducedManifest is lane A's manifest with the isolation and lifecycle
// scenarios only, its own namespace prefix, and an engine endpoint nothing
// serves: the action's endpoint input must replace it.
func reducedManifest(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "manifests/linux-x64-cgroupv1.yaml"))
	assert.NilError(t, err)
	s := string(data)
	i := strings.Index(s, "\nscenarios:\n")
	assert.Assert(t, i > 0)
	s = s[:i] + "\nscenarios:\n  - name: isolation\n  - name: lifecycle\n    params:\n      exitCode: 7\n"
	for old, new := range map[string]string{
		"unix:///var/run/docker.sock": "unix:///nonexistent/qualbox-action-test.sock",
		"namespace: qualbox-qual":     "namespace: qualbox-actiontest",
	} {
		assert.Assert(t, strings.Contains(s, old), old)
		s = strings.Replace(s, old, new, 1)
	}
	return s
}

func newRunner(t *testing.T, manifest string) *runner {
	t.Helper()
	base := t.TempDir()
	r := &runner{
		temp: filepath.Join(base, "runner-temp"), workspace: filepath.Join(base, "caller"),
		output: filepath.Join(base, "github-output"), summary: filepath.Join(base, "step-summary"),
		manifest: "qualbox/lane-a.yaml",
	}
	assert.NilError(t, os.MkdirAll(filepath.Join(r.workspace, "qualbox"), 0o755))
	assert.NilError(t, os.MkdirAll(r.temp, 0o755))
	assert.NilError(t, os.WriteFile(filepath.Join(r.workspace, r.manifest), []byte(manifest), 0o644))
	for _, f := range []string{r.output, r.summary} {
		assert.NilError(t, os.WriteFile(f, nil, 0o644))
	}
	priv, pub, err := attest.GenerateKey(filepath.Join(base, "keys"))
	assert.NilError(t, err)
	r.env = map[string]string{
		"GITHUB_ACTION_PATH": repoRoot(t), "GITHUB_WORKSPACE": r.workspace, "RUNNER_TEMP": r.temp,
		"GITHUB_OUTPUT": r.output, "GITHUB_STEP_SUMMARY": r.summary,
		"QUALBOX_MANIFEST": r.manifest, "QUALBOX_SIGNING_KEY": read(t, priv), "QUALBOX_PUBLIC_KEY": read(t, pub),
	}
	return r
}

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	assert.NilError(t, err)
	return string(data)
}

// run runs action/run.sh as the action's run step does and returns its
// exit status and combined output.
func (r *runner) run(t *testing.T, timeout time.Duration) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(repoRoot(t), "action/run.sh"))
	cmd.Dir = r.workspace
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "QUALBOX_") || strings.HasPrefix(k, "GITHUB_") || k == "RUNNER_TEMP" {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	for k, v := range r.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	assert.Assert(t, ctx.Err() == nil, "action/run.sh did not finish within %s:\n%s", timeout, out)
	if err != nil {
		var exit *exec.ExitError
		assert.Assert(t, errors.As(err, &exit), "%v: %s", err, out)
		return exit.ExitCode(), string(out)
	}
	return 0, string(out)
}

// outputs parses GITHUB_OUTPUT (name=value lines; each name once).
func (r *runner) outputs(t *testing.T) map[string]string {
	t.Helper()
	got := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(read(t, r.output)))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		assert.Assert(t, ok, "GITHUB_OUTPUT line %q", sc.Text())
		_, dup := got[k]
		assert.Assert(t, !dup, "output %s set twice", k)
		got[k] = v
	}
	return got
}

// Bad inputs fail before any Engine is contacted, with exit 2, a summary
// that says ERROR first and the error outputs; a public key that is not
// the signing key's public half is one of them (a report signed with a
// key its verify step cannot trust is never made).
func TestActionRefusesBadInputs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds qualify")
	}
	_, otherPub, err := attest.GenerateKey(t.TempDir())
	assert.NilError(t, err)
	for _, tc := range []struct {
		name string
		edit func(r *runner)
		want string
	}{
		{"public key of another pair", func(r *runner) { r.env["QUALBOX_PUBLIC_KEY"] = read(t, otherPub) }, "is not the public half of signing-key"},
		{"no signing key", func(r *runner) { r.env["QUALBOX_SIGNING_KEY"] = "" }, "input signing-key is required"},
		{"output that forges an output line", func(r *runner) { r.env["QUALBOX_OUTPUT"] = "report\nverdict=passed" }, "inputs manifest and output must not contain line breaks"},
		{"manifest not in the checkout", func(r *runner) { r.env["QUALBOX_MANIFEST"] = "qualbox/missing.yaml" }, "input manifest: qualbox/missing.yaml is not a file in "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRunner(t, reducedManifest(t))
			tc.edit(r)
			code, out := r.run(t, 5*time.Minute)
			assert.Check(t, is.Equal(code, 2), out)
			assert.Check(t, is.Contains(out, tc.want))
			summary := read(t, r.summary)
			assert.Check(t, strings.HasPrefix(summary, "qualbox: ERROR "), summary)
			assert.Check(t, is.Contains(summary, tc.want))
			o := r.outputs(t)
			assert.Check(t, is.Equal(o["verdict"], "error"))
			assert.Check(t, is.Equal(o["exit-code"], "2"))
			_, err := os.Stat(filepath.Join(r.temp, "qualbox-report"))
			assert.Check(t, os.IsNotExist(err), "no report for a refused input")
			assert.Check(t, !strings.Contains(out, "no Docker Engine answers"), "no Engine was contacted")
		})
	}
}

// laneAEngine reports whether lane A's Engine answers at sock: GET /info
// answers and says cgroup v1, as lane A's host does (docs/lanes.md#lane-a).
// Another Engine there (a hosted runner's cgroup v2 Docker, where CI's
// hermetic job runs internal/...) is not lane A: the reduced manifest's
// profile would refuse it.
func laneAEngine(sock string) (bool, string) {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
	resp, err := c.Get("http://engine/info")
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	var info struct{ CgroupVersion string }
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&info); resp.StatusCode != http.StatusOK || err != nil {
		return false, fmt.Sprintf("GET /info: status %d, %v", resp.StatusCode, err)
	}
	if info.CgroupVersion != "1" {
		return false, fmt.Sprintf("an Engine answers but its cgroup version is %q, not lane A's 1", info.CgroupVersion)
	}
	return true, ""
}

// The action's script, run as on a GitHub runner against lane A's Engine
// with a reduced manifest (isolation, lifecycle; image: build) whose own
// endpoint nothing serves: the endpoint input replaces it. It must exit
// with qualify's status 0, start the step summary with the verdict line
// followed by the report's summary.md, set the outputs, leave the report
// directory and its .pub for the upload step, record the Engine actually
// used in evidence.json and the manifest's digest unchanged.
func TestActionOnLaneA(t *testing.T) {
	if testing.Short() {
		t.Skip("runs scenarios against lane A")
	}
	if socket := testengine.Require(t); socket != laneA {
		t.Skipf("the action test runs against lane A (docs/lanes.md#lane-a); the test Engine is at unix://%s", socket)
	}
	if ok, why := laneAEngine(laneA); !ok {
		t.Skipf("no lane A Engine at unix://%s (%s): the action test runs against lane A (docs/lanes.md#lane-a)", laneA, why)
	}
	r := newRunner(t, reducedManifest(t))
	r.env["QUALBOX_ENDPOINT"] = "unix://" + laneA
	start := time.Now()
	code, out := r.run(t, 4*time.Minute)
	t.Logf("action/run.sh took %s", time.Since(start).Round(time.Second))
	assert.Equal(t, code, 0, out)

	report := filepath.Join(r.temp, "qualbox-report")
	o := r.outputs(t)
	assert.Check(t, is.DeepEqual(o, map[string]string{"verdict": "passed", "report-dir": report, "exit-code": "0"}))

	summary := read(t, r.summary)
	first, rest, _ := strings.Cut(summary, "\n")
	assert.Check(t, is.Equal(first, "qualbox: PASSED linux-x64-cgroupv1 (2 passed)"))
	assert.Check(t, is.Equal(rest, "\n"+read(t, filepath.Join(report, "summary.md"))))

	for _, f := range []string{"evidence.json", "evidence.dsse.json", "summary.md", "junit.xml", "01-isolation/evidence.json", "02-lifecycle/evidence.json"} {
		_, err := os.Stat(filepath.Join(report, f))
		assert.Check(t, err, "report file %s", f)
	}
	assert.Check(t, is.Equal(read(t, report+".pub"), r.env["QUALBOX_PUBLIC_KEY"]), "the uploaded .pub is the given public key")
	pub, err := attest.LoadPublicKey(report + ".pub")
	assert.NilError(t, err)
	_, err = evidence.VerifyRun(context.Background(), report, pub)
	assert.Check(t, err, "the report verifies with the uploaded .pub")

	var run struct {
		Endpoint string `json:"endpoint"`
		Manifest struct {
			Path   string `json:"path"`
			SHA256 string `json:"sha256"`
		} `json:"manifest"`
	}
	assert.NilError(t, json.Unmarshal([]byte(read(t, filepath.Join(report, "evidence.json"))), &run))
	sum := sha256.Sum256([]byte(read(t, filepath.Join(r.workspace, r.manifest))))
	assert.Check(t, is.Equal(run.Endpoint, "unix://"+laneA), "the run header records the Engine used, not the manifest's")
	assert.Check(t, is.Equal(run.Manifest.Path, r.manifest))
	assert.Check(t, is.Equal(run.Manifest.SHA256, hex.EncodeToString(sum[:])))
	assert.Check(t, strings.Contains(read(t, filepath.Join(r.workspace, r.manifest)), "unix:///nonexistent/qualbox-action-test.sock"), "the manifest file is unchanged")

	_, err = os.Stat(filepath.Join(r.temp, "qualbox-keys", "qualbox-ed25519.key"))
	assert.Check(t, os.IsNotExist(err), "the private key is removed after the run")
}

// Without an Engine at the endpoint input, qualify run exits 3 before any
// report exists: the script exits 3 too, after the outputs and a summary
// that says NO REPORT first, and leaves nothing to upload.
func TestActionWithoutEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds qualify")
	}
	r := newRunner(t, reducedManifest(t))
	sock := "unix://" + filepath.Join(t.TempDir(), "nothing.sock")
	r.env["QUALBOX_ENDPOINT"] = sock
	code, out := r.run(t, 5*time.Minute)
	assert.Check(t, is.Equal(code, 3), out)
	assert.Check(t, is.Contains(out, "no Docker Engine answers at "+sock))
	report := filepath.Join(r.temp, "qualbox-report")
	assert.Check(t, is.DeepEqual(r.outputs(t), map[string]string{"verdict": "no-report", "report-dir": report, "exit-code": "3"}))
	summary := read(t, r.summary)
	assert.Check(t, strings.HasPrefix(summary, "qualbox: NO REPORT qualbox/lane-a.yaml ("), summary)
	assert.Check(t, is.Equal(strings.Count(summary, "\n"), 2), "the verdict line alone, no summary.md: %q", summary)
	for _, p := range []string{report, report + ".pub"} {
		_, err := os.Stat(p)
		assert.Check(t, os.IsNotExist(err), "%s", p)
	}
}
