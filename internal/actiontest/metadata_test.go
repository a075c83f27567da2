package actiontest

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

type step struct {
	ID   string            `yaml:"id"`
	Name string            `yaml:"name"`
	If   string            `yaml:"if"`
	Uses string            `yaml:"uses"`
	Run  string            `yaml:"run"`
	With map[string]string `yaml:"with"`
	Env  map[string]string `yaml:"env"`
}

type actionFile struct {
	Inputs  map[string]struct{ Required bool } `yaml:"inputs"`
	Outputs map[string]struct{ Value string }  `yaml:"outputs"`
	Runs    struct {
		Using string `yaml:"using"`
		Steps []step `yaml:"steps"`
	} `yaml:"runs"`
}

type workflowFile struct {
	On struct {
		WorkflowCall struct {
			Inputs  map[string]any `yaml:"inputs"`
			Secrets map[string]any `yaml:"secrets"`
		} `yaml:"workflow_call"`
	} `yaml:"on"`
	Jobs map[string]struct {
		Steps []step `yaml:"steps"`
	} `yaml:"jobs"`
}

func load(t *testing.T, name string, v any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), name))
	assert.NilError(t, err)
	assert.NilError(t, yaml.Unmarshal(data, v), name)
}

var pinned = regexp.MustCompile(`^[\w.-]+/[\w./-]+@[0-9a-f]{40}$`)

// action.yml: every input reaches action/run.sh, every third-party action
// is pinned by commit, and the upload and the final exit run whatever
// happened before them, the exit last, with the run step's status.
func TestActionMetadata(t *testing.T) {
	var a actionFile
	load(t, "action.yml", &a)
	assert.Equal(t, a.Runs.Using, "composite")
	for _, in := range []string{"manifest", "endpoint", "signing-key", "public-key", "output", "artifact-name"} {
		_, ok := a.Inputs[in]
		assert.Check(t, ok, "input %s", in)
	}
	assert.Check(t, a.Inputs["manifest"].Required && a.Inputs["signing-key"].Required)
	for _, out := range []string{"verdict", "report-dir", "exit-code"} {
		assert.Check(t, is.Equal(a.Outputs[out].Value, "${{ steps.run.outputs."+out+" }}"))
	}
	i := slices.IndexFunc(a.Runs.Steps, func(s step) bool { return s.ID == "run" })
	assert.Assert(t, i >= 0)
	run := a.Runs.Steps[i]
	assert.Check(t, is.Equal(run.Run, `"$GITHUB_ACTION_PATH/action/run.sh"`))
	for env, in := range map[string]string{"QUALBOX_MANIFEST": "manifest", "QUALBOX_ENDPOINT": "endpoint", "QUALBOX_SIGNING_KEY": "signing-key", "QUALBOX_PUBLIC_KEY": "public-key", "QUALBOX_OUTPUT": "output"} {
		assert.Check(t, is.Equal(run.Env[env], "${{ inputs."+in+" }}"), env)
	}
	upload := -1
	for k, s := range a.Runs.Steps {
		if s.Uses != "" {
			assert.Check(t, pinned.MatchString(s.Uses), "step %d uses %s: pin it by commit", k, s.Uses)
		}
		if strings.HasPrefix(s.Uses, "actions/upload-artifact@") {
			upload = k
			assert.Check(t, is.Equal(s.Uses, "actions/upload-artifact@bbbca2ddaa5d8feaa63e36b76fdaad77386f024f"))
			assert.Check(t, strings.HasPrefix(s.If, "always()"), s.If)
			assert.Check(t, is.Equal(s.With["path"], "${{ steps.run.outputs.report-dir }}\n${{ steps.run.outputs.report-dir }}.pub\n"))
		}
	}
	assert.Check(t, upload > i, "the upload follows the run step")
	last := a.Runs.Steps[len(a.Runs.Steps)-1]
	assert.Check(t, is.Equal(last.If, "always()"))
	assert.Check(t, is.Equal(last.Env["CODE"], "${{ steps.run.outputs.exit-code }}"))
	assert.Check(t, strings.Contains(last.Run, `exit "${CODE:-4}"`))
}

// The reusable workflow takes the action's inputs (the signing key as a
// secret) and passes each one to the action unchanged.
func TestReusableWorkflowPassesTheActionInputs(t *testing.T) {
	var a actionFile
	load(t, "action.yml", &a)
	var w workflowFile
	load(t, ".github/workflows/qualbox.yml", &w)
	_, ok := w.On.WorkflowCall.Secrets["signing-key"]
	assert.Check(t, ok, "signing-key is a secret")
	job, ok := w.Jobs["qualify"]
	assert.Assert(t, ok)
	i := slices.IndexFunc(job.Steps, func(s step) bool { return s.ID == "qualbox" })
	assert.Assert(t, i >= 0)
	uses := job.Steps[i]
	assert.Check(t, is.Equal(uses.Uses, "./.qualbox-action"))
	for in := range a.Inputs {
		if in == "setup-go" {
			continue
		}
		want := "${{ inputs." + in + " }}"
		if in == "signing-key" {
			want = "${{ secrets.signing-key }}"
		} else {
			_, ok := w.On.WorkflowCall.Inputs[in]
			assert.Check(t, ok, "workflow input %s", in)
		}
		assert.Check(t, is.Equal(uses.With[in], want), "with.%s", in)
	}
}
