package qualify_test

// engine-restart on real Engines: it passes on lane B, whose daemon the
// tests may restart, and each of its checks fails for the reason it
// exists (the pattern of negative_test.go). The tests that restart lane
// B run under `make test-lane-b`, gated like the driver's
// TestReconcileAfterEngineRestart on QUALBOX_ENGINE_RESTART; the ones
// whose "restart" restarts nothing run on any Engine, lane A included.

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/moby/moby/client"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/skip"

	"github.com/qualbox/qualbox/internal/testengine"
	"github.com/qualbox/qualbox/qualify/faultproxy"
	"github.com/qualbox/qualbox/qualify/manifest"
	"github.com/qualbox/qualbox/qualify/scenario"
)

const laneBManifest = "../manifests/linux-x64-cgroupv1-lane-b.yaml"

// restartableLaneB gates a test that restarts lane B's daemon: it needs
// QUALBOX_ENGINE_RESTART (the command `make test-lane-b` names for lane
// B's restart) to name the lane B manifest's own restart command, and
// lane B as the Engine under test. It returns the manifest's absolute
// path and its engine-restart params, and moves to the repository root,
// where the manifest's relative `scripts/engine.sh` resolves (as for
// `make qualify-lane-b`).
func restartableLaneB(t *testing.T) (string, map[string]any) {
	t.Helper()
	restart := os.Getenv("QUALBOX_ENGINE_RESTART")
	skip.If(t, restart == "", "QUALBOX_ENGINE_RESTART is unset: no Engine this test may restart (make test-lane-b sets it)")
	socket := testengine.Require(t)
	path, err := filepath.Abs(laneBManifest)
	assert.NilError(t, err)
	m, err := manifest.Load(path, scenario.Default())
	assert.NilError(t, err)
	skip.If(t, m.Endpoint != "unix://"+socket, "these tests restart lane B's daemon (%s); the Engine under test is %s", m.Endpoint, socket)
	var params map[string]any
	for _, e := range m.Scenarios {
		if e.Name == "engine-restart" {
			params = e.Params
		}
	}
	assert.Assert(t, params != nil, "%s has no engine-restart entry", laneBManifest)
	root, err := filepath.Abs("..")
	assert.NilError(t, err)
	var argv []string
	for i, w := range params["restart"].([]any) {
		s := w.(string)
		if i == 0 {
			s = filepath.Join(root, s)
		}
		argv = append(argv, s)
	}
	assert.Equal(t, strings.Join(argv, " "), restart, "QUALBOX_ENGINE_RESTART and the lane B manifest name different restarts")
	t.Chdir(root)
	return path, params
}

// offOnly is params without the live-restore on case: one restart.
func offOnly(params map[string]any) map[string]any {
	return map[string]any{"restart": params["restart"]}
}

func TestEngineRestartLaneB(t *testing.T) {
	path, _ := restartableLaneB(t)
	run, out := runManifestScenarios(t, path, nil, "engine-restart")
	assertPassed(t, run, "engine-restart")
	ev := scenarioEvidence(t, out, run, "engine-restart")
	data, err := json.Marshal(ev.Observed["restart table"])
	assert.NilError(t, err)
	var rows []scenario.RestartRow
	assert.NilError(t, json.Unmarshal(data, &rows))
	// Both modes, three sandboxes each, every record matched after the
	// restart and destroyed from it with nothing left.
	assert.Assert(t, is.Len(rows, 6), "%+v", rows)
	after := map[string]string{}
	for _, r := range rows {
		assert.Check(t, is.Equal(r.Reconciliation, "matched"), "%+v", r)
		assert.Check(t, is.Equal(r.Destroy, "ok"), "%+v", r)
		assert.Check(t, is.Equal(r.Left, 0), "%+v", r)
		after[r.Case+" "+r.Sandbox] = r.ComputeBefore + " -> " + r.ComputeAfter
	}
	assert.Check(t, is.DeepEqual(after, map[string]string{
		"live-restore off idle": "running -> exited", "live-restore off busy": "running -> exited", "live-restore off stopped": "absent -> absent",
		"live-restore on idle": "running -> running", "live-restore on busy": "running -> running", "live-restore on stopped": "absent -> absent",
	}))
	// Lane B mounts images by subpath: the dataset part ran and passed.
	assert.Check(t, is.Contains(checkNames(ev), "dataset after restart: /datasets/ref shows the image's corpus exactly\n"))
}

// A "restart" that restarts nothing must not pass vacuously: the event
// stream opened before it stays open, and with live-restore off the
// running compute keeps running. Any Engine: nothing is restarted.
func TestNegativeEngineRestartNothingRestarted(t *testing.T) {
	ev := runLie(t, lie{
		scenario: "engine-restart",
		params:   map[string]any{"restart": []any{"true"}},
		check:    regexp.MustCompile(`^live-restore off: restart: the event stream opened before the command ended \(the daemon that served it went away\)$`),
	})
	assert.Check(t, failedCheck(ev, exactly("live-restore off: busy: running compute stopped by the restart")))
}

// A restart command that fails is named by its exit status.
func TestNegativeEngineRestartCommandFails(t *testing.T) {
	runLie(t, lie{
		scenario: "engine-restart",
		params:   map[string]any{"restart": []any{"false"}},
		check:    regexp.MustCompile(`^live-restore off: restart: command exits 0 within 5m0s$`),
	})
}

// After the restart the Engine reports a DNS option the containers never
// had: a real difference, so the fresh controller's answer is conflict,
// not matched. (The driver's fingerprint tests show the normalisation
// that keeps the restart's own re-serialisation from being one.)
func TestNegativeEngineRestartConflict(t *testing.T) {
	path, params := restartableLaneB(t)
	runLie(t, lie{
		manifest: path,
		scenario: "engine-restart",
		params:   offOnly(params),
		rules: func(*testing.T, *client.Client) []faultproxy.Rule {
			// Lane B reports the lists as null before a restart and as []
			// after it: only the replies after the restart are touched.
			return []faultproxy.Rule{faultproxy.RewriteReply(faultproxy.Request("GET", `/containers/[^/]+/json`), func(body []byte) ([]byte, error) {
				return bytes.Replace(body, []byte(`"DnsOptions":[]`), []byte(`"DnsOptions":["ndots:1"]`), 1), nil
			})}
		},
		check: regexp.MustCompile(`^live-restore off: idle: a fresh controller reconciles the record saved before the restart$`),
	})
}

// The fresh controller's volume removals are answered without the Engine
// removing anything: destroy reports success, and the absence check by
// exact name finds the volume.
func TestNegativeEngineRestartLeftover(t *testing.T) {
	path, params := restartableLaneB(t)
	ev := runLie(t, lie{
		manifest: path,
		scenario: "engine-restart",
		params:   offOnly(params),
		rules: func(*testing.T, *client.Client) []faultproxy.Rule {
			return []faultproxy.Rule{faultproxy.Answer(faultproxy.Request("DELETE", `/volumes/[^/]+`), 200, "")}
		},
		check: regexp.MustCompile(`^live-restore off: idle: no resource of the sandbox remains \(exact names and IDs\)$`),
	})
	assert.Check(t, !failedCheck(ev, exactly("live-restore off: idle: destroy by the recovered owner")), "destroy believed the fake answer")
}

// The sandbox after the restart mounts another subpath than the one
// whose content the check expects: the content check compares for real.
func TestNegativeEngineRestartDatasetContent(t *testing.T) {
	path, params := restartableLaneB(t)
	sub := "corpus/nested"
	runLie(t, lie{
		manifest: path,
		scenario: "engine-restart",
		params:   offOnly(params),
		variant:  scenario.EngineRestart{DatasetSubpath: &sub},
		check:    regexp.MustCompile(`^dataset after restart: /datasets/ref shows the image's corpus exactly$`),
	})
}

// The live-restore restart command restarts lane B without live-restore:
// the on case finds the mode not on and runs no further.
func TestNegativeEngineRestartLiveRestoreNotOn(t *testing.T) {
	path, params := restartableLaneB(t)
	runLie(t, lie{
		manifest: path,
		scenario: "engine-restart",
		params:   map[string]any{"restart": params["restart"], "liveRestoreRestart": params["restart"]},
		check:    regexp.MustCompile(`^live-restore on: /info LiveRestoreEnabled after the restart into it$`),
	})
}

// The live-restore restart turns live-restore on the first time (the
// daemon's mode is checked on) and off the second (the case's own
// restart): the old daemon shuts down leaving the containers running, and
// the new one, without live-restore, stops them, so they were not kept.
func TestNegativeEngineRestartNotKept(t *testing.T) {
	path, params := restartableLaneB(t)
	restart := params["restart"].([]any)
	// A script of the test's own that counts its calls, run as an argv.
	script := filepath.Join(t.TempDir(), "toggle.sh")
	assert.NilError(t, os.WriteFile(script, []byte(`#!/bin/sh
n=$(cat "$0.count" 2>/dev/null || echo 0)
echo $((n + 1)) > "$0.count"
if [ "$n" = 0 ]; then exec "$@" --live-restore; fi
exec "$@"
`), 0o755))
	live := append([]any{"/bin/sh", script}, restart...)
	ev := runLie(t, lie{
		manifest: path,
		scenario: "engine-restart",
		params:   map[string]any{"restart": restart, "liveRestoreRestart": live},
		check:    regexp.MustCompile(`^live-restore on: busy: compute kept running by live-restore \(same keeper\)$`),
	})
	assert.Check(t, !failedCheck(ev, exactly("live-restore on: /info LiveRestoreEnabled after the restart into it")))
}

// exactly matches the check named name and nothing else.
func exactly(name string) *regexp.Regexp {
	return regexp.MustCompile("^" + regexp.QuoteMeta(name) + "$")
}
