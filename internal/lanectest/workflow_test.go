package lanectest

import (
	"os"
	"path"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/platforms"
	"github.com/qualbox/qualbox/profiles"
)

type wfStep struct {
	Name string            `yaml:"name"`
	Uses string            `yaml:"uses"`
	Run  string            `yaml:"run"`
	With map[string]string `yaml:"with"`
	Env  map[string]string `yaml:"env"`
}

type wfJob struct {
	RunsOn          any               `yaml:"runs-on"`
	ContinueOnError bool              `yaml:"continue-on-error"`
	Env             map[string]string `yaml:"env"`
	Steps           []wfStep          `yaml:"steps"`
}

func qualifyWorkflow(t *testing.T) map[string]wfJob {
	t.Helper()
	data, err := os.ReadFile("../../.github/workflows/qualify.yml")
	assert.NilError(t, err)
	var wf struct {
		Jobs map[string]wfJob `yaml:"jobs"`
	}
	assert.NilError(t, yaml.Unmarshal(data, &wf))
	return wf.Jobs
}

func stepNamed(t *testing.T, j wfJob, name string) wfStep {
	t.Helper()
	for _, s := range j.Steps {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no step %q", name)
	return wfStep{}
}

// The hosted rows install the pinned reference Engine, Docker Engine
// 29.1.3, from Docker's repository (the version the registry gives each,
// in its matrix entry), check its key's fingerprint, and refuse an
// Engine below the API their profiles admit (docs/lanes.md#hosted-runners).
func TestHostedRowInstallsTheReferenceEngine(t *testing.T) {
	engine := stepNamed(t, qualifyWorkflow(t)["report"], "Engine")
	assert.Check(t, is.Equal(engine.Env["DOCKER_VERSION"], "${{ matrix.docker-ce }}"))
	assert.Check(t, is.Equal(engine.Env["DOCKER_KEY_FPR"], "9DC858229FC7DD38854AE2D88D81803C0EBFCD88"))
	hosted := 0
	for _, e := range platforms.Rows() {
		if e.Engine.Kind != platforms.Hosted {
			continue
		}
		hosted++
		assert.Check(t, is.Equal(e.Engine.DockerCE, "5:29.1.3-1~ubuntu.24.04~noble"), e.Name)
		assert.Check(t, is.Equal(e.Engine.Job(), "report"), e.Name)
		p, err := profiles.Load(e.Profile)
		assert.NilError(t, err)
		assert.Check(t, is.Equal(engine.Env["MIN_API"], p.Daemon.MinAPIVersion), "row %s: the API check differs from profile %s's minAPIVersion", e.Name, e.Profile)
	}
	assert.Check(t, hosted >= 2, "hosted rows: %d", hosted)
	for _, want := range []string{
		`"docker-ce=$DOCKER_VERSION" "docker-ce-cli=$DOCKER_VERSION" containerd.io`,
		`if [ "$fprs" != "$DOCKER_KEY_FPR" ]; then`,
		`api=$(docker version --format '{{.Server.APIVersion}}')`,
	} {
		assert.Check(t, is.Contains(engine.Run, want))
	}
}

// The hosted lane C job runs lane C on GitHub's x64 runner with the
// accelerator chosen by the probe, and keeps its report out of the gate:
// its tuple is lane-c's, which the CI key may not sign, so the gate would
// refuse it (docs/lanes.md#hosted-runners).
func TestHostedLaneCJobIsNotGated(t *testing.T) {
	jobs := qualifyWorkflow(t)
	j, ok := jobs["hosted-lane-c"]
	assert.Assert(t, ok, "no hosted-lane-c job")
	assert.Check(t, is.Equal(j.RunsOn, "ubuntu-24.04"))
	assert.Check(t, is.Equal(j.Env["LANEC_ACCEL"], "auto"))
	assert.Check(t, j.ContinueOnError, "hosted-lane-c is informational")
	run := stepNamed(t, j, "linux-x64 catalogue in the lane C virtual machine (KVM)").Run
	assert.Check(t, is.Contains(run, "make qualify-linux-x64 KEYS=\"$SIGNING_KEYS\""))
	assert.Check(t, is.Contains(stepNamed(t, j, "signing key").Run, "cp .github/keys/qualbox-ci-ed25519.pub"))
	var pattern string
	for _, s := range jobs["gate"].Steps {
		if strings.HasPrefix(s.Uses, "actions/download-artifact@") {
			pattern = s.With["pattern"]
		}
	}
	assert.Assert(t, pattern != "", "the gate job downloads no artifacts")
	uploads := 0
	for _, s := range j.Steps {
		if !strings.HasPrefix(s.Uses, "actions/upload-artifact@") {
			continue
		}
		uploads++
		gated, err := path.Match(pattern, s.With["name"])
		assert.NilError(t, err)
		assert.Check(t, !gated, "artifact %s is read by the gate (pattern %s)", s.With["name"], pattern)
	}
	assert.Check(t, is.Equal(uploads, 1))
}
