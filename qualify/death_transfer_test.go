package qualify_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/qualify/evidence"
	"github.com/qualbox/qualbox/qualify/scenario"
)

// The controller-death scenario runs os.Executable() as its child
// controller unless QUALBOX_QUALIFY_BINARY names a qualify binary. Under
// `go test` that is this test binary, which therefore serves the internal
// subcommand itself, before the testing flags are parsed.
func init() {
	if len(os.Args) > 1 && os.Args[1] == scenario.ChildCommand {
		cfg, err := scenario.ParseChildArgs(os.Args[2:], os.Stderr)
		if err == nil {
			err = scenario.RunChild(context.Background(), cfg)
		}
		fmt.Fprintf(os.Stderr, "%s: %v\n", scenario.ChildCommand, err)
		os.Exit(1)
	}
}

func TestTransfer(t *testing.T) {
	run, out := runScenarios(t, "transfer")
	assertPassed(t, run, "transfer")
	ev := scenarioEvidence(t, out, run, "transfer")
	names := checkNames(ev)
	for _, n := range scenario.HostileArchiveNames {
		assert.Check(t, strings.Contains(names, "hostile-archives: "+n+" is rejected\n"), "no check for hostile archive %s", n)
	}
	for _, want := range []string{
		"round-trip: export whole workspace equals the source (bytes, kinds, modes)",
		"round-trip: guest sees every entry owned by the workload uid:gid with its mode and size",
		"guest-symlink: export whole is refused, nothing written",
		"guest-symlink: export file escape/etc/passwd is refused, nothing written",
	} {
		assert.Check(t, strings.Contains(names, want+"\n"), "no check %q", want)
	}
	// The scratch trees (250-byte names, a 311-byte path) are not left in the report.
	_, err := os.Stat(filepath.Join(out, run.Scenarios[0].Dir, "scratch"))
	assert.Check(t, errors.Is(err, fs.ErrNotExist), "scratch left behind: %v", err)
}

// buildQualify builds cmd/qualify into a temporary directory.
func buildQualify(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "qualify")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/qualbox/qualbox/cmd/qualify")
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	assert.NilError(t, err, "go build cmd/qualify: %s", out)
	return bin
}

// TestControllerDeath runs the scenario with the real qualify binary's
// controller-child subcommand and checks the per-checkpoint table.
func TestControllerDeath(t *testing.T) {
	t.Setenv(scenario.QualifyBinaryEnv, buildQualify(t))
	run, out := runScenarios(t, "controller-death")
	assertPassed(t, run, "controller-death")
	ev := scenarioEvidence(t, out, run, "controller-death")
	rows := readTable(t, ev)
	byCP := map[string]scenario.DeathRow{}
	for _, r := range rows {
		byCP[r.Checkpoint] = r
		assert.Check(t, r.Left == 0, "%s: %d resources left", r.Checkpoint, r.Left)
	}
	assert.Check(t, len(rows) >= 10, "rows: %d", len(rows))
	assert.Equal(t, byCP["0"].Reconciliation, "absent")
	exec := byCP[scenario.CheckpointExec]
	assert.Check(t, exec.ComputeAtKill == "running" && exec.ComputeAfterKill == "running", "%+v", exec)
	advanced, uncertain := 0, 0
	for _, r := range rows {
		if r.Advanced {
			advanced++
		}
		if r.Reconciliation == "uncertain" {
			uncertain++
		}
	}
	assert.Check(t, advanced >= 1, "no checkpoint advanced a creating record")
	assert.Check(t, uncertain >= 1, "no checkpoint left a creating record uncertain")
}

func readTable(t *testing.T, ev *evidence.Scenario) []scenario.DeathRow {
	t.Helper()
	data, err := json.Marshal(ev.Observed["checkpoint table"])
	assert.NilError(t, err)
	var rows []scenario.DeathRow
	assert.NilError(t, json.Unmarshal(data, &rows))
	return rows
}
