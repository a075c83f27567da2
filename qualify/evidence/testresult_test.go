package evidence_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/evidence"
)

// testResultReport is signedReport with the test-result statement signed
// before the report, as qualify run does.
func testResultReport(t *testing.T, forge func(dir string, st map[string]any)) (dir, keys string) {
	t.Helper()
	dir, keys = signedReport(t, nil)
	assert.NilError(t, os.Remove(filepath.Join(dir, attest.EnvelopeFile)))
	key, err := attest.LoadPrivateKey(filepath.Join(keys, attest.PrivateKeyFile))
	assert.NilError(t, err)
	assert.NilError(t, evidence.SignTestResult(context.Background(), dir, key))
	if forge != nil {
		// A forger holding the key re-signs an edited statement.
		st := testResultPayload(t, dir)
		forge(dir, st)
		payload, err := json.Marshal(st)
		assert.NilError(t, err)
		env, err := attest.SignPayload(context.Background(), key, payload)
		assert.NilError(t, err)
		assert.NilError(t, evidence.WriteFile(filepath.Join(dir, evidence.TestResultFile), env))
	}
	var run evidence.Run
	data, err := os.ReadFile(filepath.Join(dir, "evidence.json"))
	assert.NilError(t, err)
	assert.NilError(t, json.Unmarshal(data, &run))
	assert.NilError(t, evidence.SignRun(context.Background(), dir, key, &run))
	return dir, keys
}

func testResultPayload(t *testing.T, dir string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, evidence.TestResultFile))
	assert.NilError(t, err)
	var env struct{ Payload string }
	assert.NilError(t, json.Unmarshal(data, &env))
	payload, err := base64.StdEncoding.DecodeString(env.Payload)
	assert.NilError(t, err)
	var st map[string]any
	assert.NilError(t, json.Unmarshal(payload, &st))
	return st
}

func TestTestResultStatementVerifies(t *testing.T) {
	dir, keys := testResultReport(t, nil)
	s, err := evidence.VerifyRun(context.Background(), dir, pub(t, keys))
	assert.NilError(t, err)
	assert.Equal(t, s.Subjects, 8)
	st := testResultPayload(t, dir)
	assert.Equal(t, st["_type"], "https://in-toto.io/Statement/v1")
	assert.Equal(t, st["predicateType"], "https://in-toto.io/attestation/test-result/v0.1")
	ev, err := os.ReadFile(filepath.Join(dir, "evidence.json"))
	assert.NilError(t, err)
	sum := sha256.Sum256(ev)
	assert.DeepEqual(t, st["subject"], []any{map[string]any{"name": "evidence.json", "digest": map[string]any{"sha256": hex.EncodeToString(sum[:])}}})
	pred := st["predicate"].(map[string]any)
	// fixedRun failed: its isolation scenario failed.
	assert.Equal(t, pred["result"], "FAILED")
	assert.DeepEqual(t, pred["failedTests"], []any{"02-isolation"})
	conf := pred["configuration"].([]any)
	assert.Equal(t, conf[0].(map[string]any)["digest"].(map[string]any)["sha256"], s.Run.Manifest.SHA256)
	assert.Equal(t, conf[1].(map[string]any)["name"], s.Run.Profile)
}

// Every forged test-result statement, even one signed by the report's
// own key and itself signed into the report, is refused when it
// disagrees with the signed evidence.json.
func TestForgedTestResultIsRefused(t *testing.T) {
	for name, forge := range map[string]func(dir string, st map[string]any){
		"result PASSED over a failed run": func(_ string, st map[string]any) {
			p := st["predicate"].(map[string]any)
			p["result"] = "PASSED"
			p["passedTests"] = append(p["passedTests"].([]any), p["failedTests"].([]any)...)
			delete(p, "failedTests")
		},
		"subject digest of another evidence.json": func(_ string, st map[string]any) {
			st["subject"].([]any)[0].(map[string]any)["digest"] = map[string]any{"sha256": strings.Repeat("0", 64)}
		},
		"extra subject": func(_ string, st map[string]any) {
			st["subject"] = append(st["subject"].([]any), map[string]any{"name": "x", "digest": map[string]any{"sha256": strings.Repeat("1", 64)}})
		},
		"added member": func(_ string, st map[string]any) {
			st["predicate"].(map[string]any)["url"] = "https://example.test/"
		},
		"other manifest digest": func(_ string, st map[string]any) {
			c := st["predicate"].(map[string]any)["configuration"].([]any)
			c[0].(map[string]any)["digest"] = map[string]any{"sha256": strings.Repeat("2", 64)}
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir, keys := testResultReport(t, forge)
			_, err := evidence.VerifyRun(context.Background(), dir, pub(t, keys))
			ps := problems(t, err)
			assert.Equal(t, len(ps), 1, "%v", ps)
			assert.Equal(t, ps[0].File, evidence.TestResultFile)
			assert.ErrorContains(t, err, "is not the one evidence.json yields")
		})
	}
}

// A test-result statement signed by another key than the report's is
// refused, though the report's own statement lists it.
func TestTestResultByAnotherKeyIsRefused(t *testing.T) {
	dir, keys := testResultReport(t, nil)
	other := t.TempDir()
	_, _, err := attest.GenerateKey(other)
	assert.NilError(t, err)
	okey, err := attest.LoadPrivateKey(filepath.Join(other, attest.PrivateKeyFile))
	assert.NilError(t, err)
	key, err := attest.LoadPrivateKey(filepath.Join(keys, attest.PrivateKeyFile))
	assert.NilError(t, err)
	for _, f := range []string{evidence.TestResultFile, attest.EnvelopeFile} {
		assert.NilError(t, os.Remove(filepath.Join(dir, f)))
	}
	assert.NilError(t, evidence.SignTestResult(context.Background(), dir, okey))
	var run evidence.Run
	data, err := os.ReadFile(filepath.Join(dir, "evidence.json"))
	assert.NilError(t, err)
	assert.NilError(t, json.Unmarshal(data, &run))
	assert.NilError(t, evidence.SignRun(context.Background(), dir, key, &run))
	_, err = evidence.VerifyRun(context.Background(), dir, pub(t, keys))
	ps := problems(t, err)
	assert.Equal(t, ps[0].File, evidence.TestResultFile)
	assert.ErrorContains(t, err, "no signature by key "+attest.KeyID(pub(t, keys)))
}

// Removing the statement from a report whose own statement lists it is
// refused: it is optional only for a report signed without it.
func TestRemovedTestResultIsRefused(t *testing.T) {
	dir, keys := testResultReport(t, nil)
	assert.NilError(t, os.Remove(filepath.Join(dir, evidence.TestResultFile)))
	_, err := evidence.VerifyRun(context.Background(), dir, pub(t, keys))
	ps := problems(t, err)
	assert.Equal(t, ps[0].File, evidence.TestResultFile)
}

// The result follows the run and its scenarios: FAILED for a failed run,
// WARNED for a passed run with a scenario not passed, else PASSED.
func TestTestResultResult(t *testing.T) {
	run := &evidence.Run{Verdict: evidence.Verdict{Kind: evidence.Passed}, Manifest: evidence.Manifest{Path: "m.yaml", SHA256: strings.Repeat("a", 64)}, Profile: "p",
		Scenarios: []evidence.ScenarioSummary{{Index: 1, Name: "a", Verdict: evidence.Verdict{Kind: evidence.Passed}}}}
	result := func() string {
		st, err := evidence.TestResultOf(run, strings.Repeat("b", 64))
		assert.NilError(t, err)
		return st.GetPredicate().GetFields()["result"].GetStringValue()
	}
	assert.Equal(t, result(), "PASSED")
	run.Scenarios = append(run.Scenarios, evidence.ScenarioSummary{Index: 2, Name: "b", Verdict: evidence.Verdict{Kind: evidence.Skipped, Reason: "not run"}})
	assert.Equal(t, result(), "WARNED")
	run.Scenarios = append(run.Scenarios, evidence.ScenarioSummary{Index: 3, Name: "c", Verdict: evidence.Verdict{Kind: evidence.Failed}})
	assert.Equal(t, result(), "FAILED", "a failed test is never under PASSED or WARNED")
	run.Scenarios = run.Scenarios[:1]
	run.Verdict = evidence.Verdict{Kind: evidence.Failed, Reason: "interrupted"}
	assert.Equal(t, result(), "FAILED")
}
