package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/internal/exitcode"
	"github.com/qualbox/qualbox/qualify"
	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/manifest"
	"github.com/qualbox/qualbox/qualify/scenario"
)

// A key holder runs the pinned manifest without any Engine (as hermetic
// tests did) and signs the report: it verifies, but it qualified no host,
// and its blank tuple matched the row, which sets no engine prefix. Under
// a policy it is refused by verify and by merge, and by the CLI
// requirement too, each naming the missing Engine.
func TestPolicyRefusesAReportMadeWithoutAnEngine(t *testing.T) {
	dir := t.TempDir()
	manifestPath := filepath.Join(dir, "m.yaml")
	assert.NilError(t, os.WriteFile(manifestPath, []byte(fmt.Sprintf(outcomeManifest, strings.Repeat("a", 64), true)), 0o644))
	reg := scenario.NewRegistry(outcome{})
	useGateScenarios(t, reg)
	m, err := manifest.Load(manifestPath, reg)
	assert.NilError(t, err)
	privPath, pub, err := attest.GenerateKey(filepath.Join(dir, "keys"))
	assert.NilError(t, err)
	key, err := attest.LoadPrivateKey(privPath)
	assert.NilError(t, err)
	report := filepath.Join(dir, "report")
	_, err = qualify.Run(context.Background(), qualify.Config{Manifest: m, Output: report, Registry: reg,
		ImageID: laneImage, ImageSource: "manifest", SigningKey: key})
	assert.NilError(t, err)
	policy := hermeticPolicy(t, dir, "policy.yaml", manifestPath, false, scenario.CatalogueVersion, trustLine(t, dir, pub, "hermetic"))

	var stdout, stderr bytes.Buffer
	assert.Equal(t, run(context.Background(), []string{"verify", "--key", pub, report}, &stdout, &stderr), exitcode.OK, stderr.String())
	const want = "its run recorded no Engine facts and no admission (a run without an Engine, tuple linux-x64-cgroupv1 · engine /API  · kernel  · cgroup v/): it qualified no host, so it satisfies no row"
	for _, args := range [][]string{
		{"verify", "--policy", policy, report},
		{"merge", "--policy", policy, report},
		{"merge", "--key", pub, "--require", "outcome", "--row", "hermetic=linux-x64-cgroupv1", "--manifest", manifestPath, report},
	} {
		stdout.Reset()
		stderr.Reset()
		code := run(context.Background(), args, &stdout, &stderr)
		assert.Equal(t, code, exitcode.Failed, "%v: %s", args, stderr.String())
		assert.Check(t, is.Contains(stderr.String(), want), "%v", args)
	}
}
