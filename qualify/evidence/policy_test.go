package evidence_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/qualify/evidence"
	"github.com/qualbox/qualbox/qualify/scenario"
)

func TestExamplePolicyLoads(t *testing.T) {
	p, err := evidence.LoadPolicy(filepath.Join("..", "..", "reports", "gate-policy.yaml"), scenario.Default())
	assert.NilError(t, err)
	assert.Equal(t, len(p.Requirement.Rows), 3)
	assert.Equal(t, p.Requirement.Harness.MinimumCatalogueVersion, 3)
	assert.Equal(t, len(p.Requirement.Rows[0].Manifests), 1)
	want, err := evidence.FileSHA256(filepath.Join("..", "..", "manifests", "linux-x64-cgroupv1.yaml"))
	assert.NilError(t, err)
	assert.Equal(t, p.Requirement.Rows[0].Manifests[0], want)
	assert.Equal(t, filepath.Base(p.KeyFiles[0]), "qualbox-ed25519-2026-12-01.pub")
	assert.Equal(t, len(p.Requirement.Scenarios), 16)
}

const goodPolicy = `schema: qualbox.gate-policy.v1
keys: [k.pub]
harness:
  minimumCatalogueVersion: 2
rows:
  - name: lane-a
    profile: linux-x64-cgroupv1
    manifests: [m.yaml]
scenarios: [admission]
`

func TestPolicyIsStrict(t *testing.T) {
	dir := t.TempDir()
	pinned, err := os.ReadFile(filepath.Join("..", "..", "manifests", "linux-x64-cgroupv1.yaml"))
	assert.NilError(t, err)
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "m.yaml"), pinned, 0o644))
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte("profile: x\n"), 0o644))
	load := func(text string) error {
		p := filepath.Join(dir, "policy.yaml")
		assert.NilError(t, os.WriteFile(p, []byte(text), 0o644))
		_, err := evidence.LoadPolicy(p, scenario.Default())
		return err
	}
	assert.NilError(t, load(goodPolicy))
	assert.NilError(t, load(goodPolicy+"maxReportAge: 720h\n"))
	abs := strings.Replace(goodPolicy, "[m.yaml]", "["+filepath.Join(dir, "m.yaml")+"]", 1)
	assert.NilError(t, load(abs), "an absolute manifest path")
	for want, text := range map[string]string{
		"field typo not found":                           strings.Replace(goodPolicy, "scenarios:", "scenarios: [x]\ntypo:", 1),
		`mapping key "keys" already defined`:             goodPolicy + "keys: [other.pub]\n",
		"harness.minimumCatalogueVersion":                strings.Replace(goodPolicy, "minimumCatalogueVersion: 2", "minimumCatalogueVersion: 0", 1),
		`profile "linux-arm"`:                            strings.Replace(goodPolicy, "profile: linux-x64-cgroupv1", "profile: linux-arm", 1),
		"rows[0] (lane-a).manifests":                     strings.Replace(goodPolicy, "[m.yaml]", "[missing.yaml]", 1),
		"at least one pinned manifest":                   strings.Replace(goodPolicy, "[m.yaml]", "[]", 1),
		"rows: at least one required row":                strings.Replace(goodPolicy, "rows:\n  - name: lane-a\n    profile: linux-x64-cgroupv1\n    manifests: [m.yaml]\n", "rows: []\n", 1),
		`rows[1].name "lane-a" is used twice`:            strings.Replace(goodPolicy, "scenarios:", "  - name: lane-a\n    profile: linux-x64\n    manifests: [m.yaml]\nscenarios:", 1),
		"keys: at least one":                             strings.Replace(goodPolicy, "keys: [k.pub]", "keys: []", 1),
		"more than one YAML document":                    goodPolicy + "---\nschema: x\n",
		`schema "qualbox.gate-policy.v0"`:                strings.Replace(goodPolicy, "v1", "v0", 1),
		"catalogueSha256[0]":                             strings.Replace(goodPolicy, "minimumCatalogueVersion: 2", "minimumCatalogueVersion: 2\n  catalogueSha256: [abc]", 1),
		"scenarios: at least one required":               strings.Replace(goodPolicy, "[admission]", "[]", 1),
		`rows[0] (lane-a).manifests[0]: `:                strings.Replace(goodPolicy, "[m.yaml]", "[bad.yaml]", 1),
		"unknown profile":                                strings.Replace(goodPolicy, "[m.yaml]", "[bad.yaml]", 1),
		"maxReportAge -1h0m0s: want a positive duration": goodPolicy + "maxReportAge: -1h\n",
	} {
		err := load(text)
		assert.ErrorContains(t, err, want)
		assert.ErrorContains(t, err, "policy.yaml")
	}
	big := strings.Repeat("# padding\n", evidence.MaxPolicyBytes/10+1)
	assert.ErrorContains(t, load(goodPolicy+big), "MaxPolicyBytes")
}
