package evidence_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/golden"

	"github.com/qualbox/qualbox/profiles"
	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/evidence"
)

// scenarioFiles returns evidence for every scenario of run that has a
// directory, consistent with its summary line: the fixture's failed
// scenario where the summary says failed, else checks that all passed;
// timed one after the other from the run's start, each for its summary's
// duration.
func scenarioFiles(run *evidence.Run, failed []*evidence.Scenario) []*evidence.Scenario {
	var out []*evidence.Scenario
	at := run.Timing.Start
	for _, sum := range run.Scenarios {
		if sum.Dir == "" {
			continue
		}
		end := at.Add(time.Duration(sum.DurationMs) * time.Millisecond)
		s := &evidence.Scenario{Schema: evidence.Schema, Index: sum.Index, Name: sum.Name, Verdict: sum.Verdict,
			Params: map[string]any{}, Requested: map[string]any{}, Observed: map[string]any{},
			Checks: []evidence.Check{}, CleanupErrors: []string{}, Resources: []evidence.Resource{},
			Abandoned: sum.Abandoned, Timing: evidence.NewTiming(at, end)}
		at = end
		for _, f := range failed {
			if f.Index == sum.Index && sum.Verdict.Kind == evidence.Failed {
				s.Checks, s.CleanupErrors, s.Failure = f.Checks, f.CleanupErrors, f.Failure
			}
		}
		if sum.Verdict.Kind == evidence.Passed {
			for i := range sum.Checks {
				s.Checks = append(s.Checks, evidence.Check{Name: fmt.Sprintf("c%d", i), Want: "x", Got: "x", OK: true})
			}
			// A passed isolation of catalogue version 5 and later records
			// the workload's uname machine, as its probe facts say; of
			// version 9 and later, with two checks or more, its refused
			// user namespace too.
			if prof, err := profiles.Load(run.Profile); err == nil && sum.Name == "isolation" && len(s.Checks) > 0 {
				m := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[prof.Image.Architecture]
				s.Checks[0] = evidence.Check{Name: "uname machine", Want: m, Got: m, OK: true}
				s.Observed["facts"] = map[string]any{"machine": m, "userNamespace": map[string]any{"ok": false, "errno": "EPERM"}}
				if len(s.Checks) > 1 {
					s.Checks[1] = evidence.Check{Name: "unprivileged user namespace refused", Want: "refused", Got: "EPERM", OK: true}
				}
			}
		}
		out = append(out, s)
	}
	return out
}

// writeReport writes run's report into dir (scenario files consistent
// with it, see scenarioFiles) and signs it with the key in keys.
func writeReport(t *testing.T, dir, keys string, run *evidence.Run, failed []*evidence.Scenario) {
	t.Helper()
	run.Tuple = evidence.TupleOf(run)
	scenarios := scenarioFiles(run, failed)
	for _, s := range scenarios {
		sub := filepath.Join(dir, fmt.Sprintf("%02d-%s", s.Index, s.Name))
		assert.NilError(t, os.Mkdir(sub, 0o755))
		assert.NilError(t, evidence.WriteJSON(filepath.Join(sub, "evidence.json"), s))
	}
	md, err := evidence.Markdown(run)
	assert.NilError(t, err)
	assert.NilError(t, evidence.WriteFile(filepath.Join(dir, "summary.md"), md))
	junit, err := evidence.JUnit(run, scenarios)
	assert.NilError(t, err)
	assert.NilError(t, evidence.WriteFile(filepath.Join(dir, "junit.xml"), junit))
	assert.NilError(t, evidence.WriteJSON(filepath.Join(dir, "evidence.json"), run))
	key, err := attest.LoadPrivateKey(filepath.Join(keys, attest.PrivateKeyFile))
	assert.NilError(t, err)
	assert.NilError(t, evidence.SignRun(context.Background(), dir, key, run))
}

// signedReport writes fixedRun's report into a fresh directory, edited by
// edit, signs it with a fresh key and returns the directory and the key
// directory.
func signedReport(t *testing.T, edit func(*evidence.Run)) (dir, keys string) {
	t.Helper()
	run, failed := fixedRun()
	if edit != nil {
		edit(run)
	}
	dir, keys = t.TempDir(), t.TempDir()
	_, _, err := attest.GenerateKey(keys)
	assert.NilError(t, err)
	writeReport(t, dir, keys, run, failed)
	return dir, keys
}

func pub(t *testing.T, keys string) []byte {
	t.Helper()
	k, err := attest.LoadPublicKey(filepath.Join(keys, attest.PublicKeyFile))
	assert.NilError(t, err)
	return k
}

func problems(t *testing.T, err error) []attest.Problem {
	t.Helper()
	var ve *attest.VerifyError
	assert.Assert(t, errors.As(err, &ve), "want *attest.VerifyError, got %v", err)
	return ve.Problems
}

func TestSignedRunVerifies(t *testing.T) {
	dir, keys := signedReport(t, nil)
	s, err := evidence.VerifyRun(context.Background(), dir, pub(t, keys))
	assert.NilError(t, err)
	assert.Equal(t, s.Subjects, 7)
	assert.Equal(t, s.Predicate.Tuple.EngineVersion, "20.10.24")
	assert.Equal(t, len(s.Predicate.Scenarios), 4)

	data, err := os.ReadFile(filepath.Join(dir, attest.EnvelopeFile))
	assert.NilError(t, err)
	var env struct {
		PayloadType string `json:"payloadType"`
		Payload     string `json:"payload"`
		Signatures  []struct {
			KeyID string `json:"keyid"`
			Sig   string `json:"sig"`
		} `json:"signatures"`
	}
	assert.NilError(t, json.Unmarshal(data, &env))
	assert.Equal(t, env.PayloadType, "application/vnd.in-toto+json")
	assert.Equal(t, len(env.Signatures), 1)
	assert.Equal(t, env.Signatures[0].KeyID, attest.KeyID(pub(t, keys)))
	payload, err := base64.StdEncoding.DecodeString(env.Payload)
	assert.NilError(t, err)
	var st attest.Statement
	assert.NilError(t, json.Unmarshal(payload, &st))
	assert.Equal(t, st.Type, "https://in-toto.io/Statement/v1")
	assert.Equal(t, st.PredicateType, evidence.PredicateType)
	var names []string
	for _, s := range st.Subject {
		names = append(names, s.Name)
	}
	assert.DeepEqual(t, names, []string{"01-admission/evidence.json", "02-isolation/evidence.json", "03-lifecycle/evidence.json",
		"04-outbound/evidence.json", "evidence.json", "junit.xml", "summary.md"})
}

// A one-byte change to any subject file is rejected, naming that file.
func TestOneByteChangeToEverySubjectIsRejected(t *testing.T) {
	dir, keys := signedReport(t, nil)
	files, err := attest.Files(dir)
	assert.NilError(t, err)
	assert.Equal(t, len(files), 7)
	for _, name := range files {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, filepath.FromSlash(name))
			orig, err := os.ReadFile(path)
			assert.NilError(t, err)
			for _, at := range []int{0, len(orig) / 2, len(orig) - 1} {
				changed := bytes.Clone(orig)
				changed[at] ^= 0x01
				assert.NilError(t, os.WriteFile(path, changed, 0o644))
				_, err = evidence.VerifyRun(context.Background(), dir, pub(t, keys))
				ps := problems(t, err)
				assert.Equal(t, ps[0].File, name, "byte %d: %v", at, ps)
				assert.Check(t, is.Contains(ps[0].Problem, "sha256 mismatch: expected "))
				assert.Check(t, is.Contains(err.Error(), name))
			}
			assert.NilError(t, os.WriteFile(path, orig, 0o644))
			_, err = evidence.VerifyRun(context.Background(), dir, pub(t, keys))
			assert.NilError(t, err)
		})
	}
}

func TestWrongKeyIsRejected(t *testing.T) {
	dir, _ := signedReport(t, nil)
	other := t.TempDir()
	_, _, err := attest.GenerateKey(other)
	assert.NilError(t, err)
	_, err = evidence.VerifyRun(context.Background(), dir, pub(t, other))
	ps := problems(t, err)
	assert.Equal(t, ps[0].File, attest.EnvelopeFile)
	assert.Check(t, is.Contains(ps[0].Problem, "signature: no signature by key "+attest.KeyID(pub(t, other))))
}

func TestTamperedEnvelopeIsRejected(t *testing.T) {
	for name, tamper := range map[string]func(env map[string]any){
		"payload re-encoded with an edited statement": func(env map[string]any) {
			p, _ := base64.StdEncoding.DecodeString(env["payload"].(string))
			p = bytes.Replace(p, []byte(`"kind":"failed"`), []byte(`"kind":"passed"`), 1)
			env["payload"] = base64.StdEncoding.EncodeToString(p)
		},
		"payloadType changed": func(env map[string]any) { env["payloadType"] = "application/json" },
		"signature byte flipped": func(env map[string]any) {
			sigs := env["signatures"].([]any)
			s := sigs[0].(map[string]any)
			raw, _ := base64.StdEncoding.DecodeString(s["sig"].(string))
			raw[0] ^= 1
			s["sig"] = base64.StdEncoding.EncodeToString(raw)
		},
		"no signatures":  func(env map[string]any) { env["signatures"] = []any{} },
		"unknown field":  func(env map[string]any) { env["extra"] = true },
		"keyid replaced": func(env map[string]any) { env["signatures"].([]any)[0].(map[string]any)["keyid"] = "00" },
	} {
		t.Run(name, func(t *testing.T) {
			dir, keys := signedReport(t, nil)
			path := filepath.Join(dir, attest.EnvelopeFile)
			data, err := os.ReadFile(path)
			assert.NilError(t, err)
			var env map[string]any
			assert.NilError(t, json.Unmarshal(data, &env))
			tamper(env)
			data, err = json.Marshal(env)
			assert.NilError(t, err)
			assert.NilError(t, os.WriteFile(path, data, 0o644))
			_, err = evidence.VerifyRun(context.Background(), dir, pub(t, keys))
			ps := problems(t, err)
			assert.Equal(t, ps[0].File, attest.EnvelopeFile, "%v", ps)
		})
	}
}

func TestAddedAndRemovedFilesAreRejected(t *testing.T) {
	dir, keys := signedReport(t, nil)
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "02-isolation", "extra.txt"), []byte("x"), 0o644))
	_, err := evidence.VerifyRun(context.Background(), dir, pub(t, keys))
	ps := problems(t, err)
	assert.DeepEqual(t, ps, []attest.Problem{{File: "02-isolation/extra.txt", Problem: "not a subject of the signed statement (added after signing)"}})

	dir, keys = signedReport(t, nil)
	assert.NilError(t, os.Remove(filepath.Join(dir, "junit.xml")))
	_, err = evidence.VerifyRun(context.Background(), dir, pub(t, keys))
	ps = problems(t, err)
	assert.Equal(t, ps[0].File, "junit.xml")
}

// A validly signed report whose evidence does not follow the schema is
// rejected: the signer is trusted for integrity, not for well-formedness.
func TestSchemaIsChecked(t *testing.T) {
	dir, keys := signedReport(t, nil)
	path := filepath.Join(dir, "evidence.json")
	data, err := os.ReadFile(path)
	assert.NilError(t, err)
	assert.NilError(t, os.WriteFile(path, bytes.Replace(data, []byte(`"schema": "qualbox.evidence.v1"`), []byte(`"schema": "other"`), 1), 0o644))
	assert.NilError(t, os.Remove(filepath.Join(dir, attest.EnvelopeFile)))
	priv, err := attest.LoadPrivateKey(filepath.Join(keys, attest.PrivateKeyFile))
	assert.NilError(t, err)
	run, _ := fixedRun()
	_, err = attest.Sign(context.Background(), dir, priv, evidence.PredicateType, evidence.PredicateOf(run))
	assert.NilError(t, err)
	_, err = evidence.VerifyRun(context.Background(), dir, pub(t, keys))
	ps := problems(t, err)
	assert.Equal(t, ps[0].File, "evidence.json")
	assert.Check(t, is.Contains(ps[0].Problem, `schema: schema "other"`))
}

func TestKeygenRefusesOverwrite(t *testing.T) {
	dir := t.TempDir()
	priv, pubPath, err := attest.GenerateKey(dir)
	assert.NilError(t, err)
	st, err := os.Stat(priv)
	assert.NilError(t, err)
	assert.Equal(t, st.Mode().Perm(), os.FileMode(0o600))
	data, err := os.ReadFile(pubPath)
	assert.NilError(t, err)
	assert.Check(t, strings.HasPrefix(string(data), "-----BEGIN PUBLIC KEY-----\n"))
	_, _, err = attest.GenerateKey(dir)
	assert.ErrorContains(t, err, "refusing to overwrite")
}

// mergedFixture is three verified reports: the fixture run (isolation
// failed), a second run of the same tuple where everything ran passed, and
// another lane with a newer Engine and one extra scenario.
func mergedFixture(t *testing.T) (*evidence.Matrix, []*evidence.Signed) {
	ctx := context.Background()
	var reports []*evidence.Signed
	for i, edit := range []func(*evidence.Run){
		nil,
		func(r *evidence.Run) {
			r.Scenarios[1].Verdict = evidence.Verdict{Kind: evidence.Passed}
			r.Scenarios[1].Passed, r.Scenarios[1].Detail = 2, ""
			r.Verdict = evidence.Verdict{Kind: evidence.Passed}
		},
		func(r *evidence.Run) {
			r.Engine.Version, r.Engine.APIVersion = "2.0.0-beta.24", "1.56"
			r.Scenarios = append(r.Scenarios[:2], evidence.ScenarioSummary{Index: 3, Name: "memory-exhaustion", Dir: "03-memory-exhaustion",
				Verdict: evidence.Verdict{Kind: evidence.Passed}, Checks: 1, Passed: 1})
		},
	} {
		dir, keys := signedReport(t, edit)
		s, err := evidence.VerifyRun(ctx, dir, pub(t, keys))
		assert.NilError(t, err)
		s.Dir = []string{"reports/a", "reports/b", "reports/c"}[i]
		reports = append(reports, s)
	}
	return evidence.Merge(reports), reports
}

func TestMergeMatrixGolden(t *testing.T) {
	m, reports := mergedFixture(t)
	var buf bytes.Buffer
	assert.NilError(t, evidence.MatrixTable(&buf, m))
	golden.Assert(t, buf.String(), "matrix.golden")
	md, err := evidence.MatrixMarkdown(m)
	assert.NilError(t, err)
	golden.Assert(t, string(md), "matrix.md.golden")

	// Without a requirement the gate still fails on every failed run
	// verdict and every failed scenario.
	failures := []string{
		"linux-x64-cgroupv1@20.10.24: report reports/a: run verdict failed",
		"linux-x64-cgroupv1@2.0.0-beta.24: report reports/c: run verdict failed",
		"linux-x64-cgroupv1@20.10.24: isolation: failed 1/2",
		"linux-x64-cgroupv1@2.0.0-beta.24: isolation: failed",
	}
	assert.DeepEqual(t, evidence.Gate(m, reports, nil), failures)
}
