package evidence_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/evidence"
)

// fuzzKeys is one key pair for every fuzz iteration.
func fuzzKeys(f *testing.F) (keys string, key ed25519.PublicKey) {
	keys = f.TempDir()
	if _, _, err := attest.GenerateKey(keys); err != nil {
		f.Fatal(err)
	}
	k, err := attest.LoadPublicKey(filepath.Join(keys, attest.PublicKeyFile))
	if err != nil {
		f.Fatal(err)
	}
	return keys, k
}

// seedReport renders fixedRun edited by edit as the files FuzzVerifyRun
// takes.
func seedReport(f *testing.F, edit func(*evidence.Run)) (run, scenario, junit, summary []byte) {
	r, failed := fixedRun()
	// Only the second scenario has a file in FuzzVerifyRun: the first was
	// not run, the rest are dropped.
	r.Scenarios = r.Scenarios[:2]
	r.Scenarios[0] = evidence.ScenarioSummary{Index: 1, Name: "admission", Verdict: evidence.Verdict{Kind: evidence.Skipped, Reason: "not run: interrupted"}}
	if edit != nil {
		edit(r)
	}
	r.Tuple = evidence.TupleOf(r)
	scenarios := scenarioFiles(r, failed)
	run, _ = evidence.MarshalJSON(r)
	scenario, _ = evidence.MarshalJSON(scenarios[0])
	junit, _ = evidence.JUnit(r, scenarios)
	summary, _ = evidence.Markdown(r)
	return
}

// FuzzVerifyRun signs hostile report files with the trusted key (so that
// the schema checks and cross-checks see them) and verifies the report.
// Invariants: failures are *attest.VerifyError; a verified report's
// predicate is the summary of its evidence.json, its run verdict follows
// from its scenarios, and merging and gating it never panics and fails
// whenever its run verdict is not passed.
func FuzzVerifyRun(f *testing.F) {
	run, scenario, junit, summary := seedReport(f, nil)
	f.Add(run, scenario, junit, summary)
	run, scenario, junit, summary = seedReport(f, func(r *evidence.Run) { r.Harness = harnessV2 })
	f.Add(run, scenario, junit, summary)
	keys, pub := fuzzKeys(f)
	priv, err := attest.LoadPrivateKey(filepath.Join(keys, attest.PrivateKeyFile))
	if err != nil {
		f.Fatal(err)
	}
	base := f.TempDir()
	f.Fuzz(func(t *testing.T, run, scenario, junit, summary []byte) {
		dir, err := os.MkdirTemp(base, "r")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		files := map[string][]byte{"evidence.json": run, "junit.xml": junit, "summary.md": summary}
		var r evidence.Run
		pred := any(map[string]any{})
		if json.Unmarshal(run, &r) == nil {
			pred = evidence.PredicateOf(&r)
			// The scenario file goes where the run says its second scenario is.
			if len(r.Scenarios) > 1 && r.Scenarios[1].Dir != "" && filepath.IsLocal(r.Scenarios[1].Dir) && !strings.ContainsAny(r.Scenarios[1].Dir, "/\\") {
				files[r.Scenarios[1].Dir+"/evidence.json"] = scenario
			}
		}
		for name, data := range files {
			p := filepath.Join(dir, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Skip(err) // a directory name the filesystem refuses
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Skip(err)
			}
		}
		if _, err := attest.Sign(context.Background(), dir, priv, evidence.PredicateType, pred); err != nil {
			t.Skip(err) // the predicate does not encode
		}
		s, err := evidence.VerifyRun(context.Background(), dir, pub)
		if err != nil {
			var ve *attest.VerifyError
			if !errors.As(err, &ve) || len(ve.Problems) == 0 {
				t.Fatalf("not a *attest.VerifyError: %#v", err)
			}
			return
		}
		want, _ := json.Marshal(evidence.PredicateOf(s.Run))
		got, _ := json.Marshal(s.Predicate)
		if string(want) != string(got) {
			t.Fatalf("verified predicate %s is not the summary %s", got, want)
		}
		anyFailed := slices.ContainsFunc(s.Run.Scenarios, func(x evidence.ScenarioSummary) bool { return x.Verdict.Kind == evidence.Failed })
		if anyFailed && s.Run.Verdict.Kind != evidence.Failed {
			t.Fatalf("verified run verdict %s with a failed scenario", s.Run.Verdict)
		}
		reports := []*evidence.Signed{s}
		if s.Run.Verdict.Kind != evidence.Passed && len(evidence.Gate(evidence.Merge(reports), reports, nil)) == 0 {
			t.Fatalf("gate passed a run with verdict %s", s.Run.Verdict)
		}
	})
}

// FuzzMerge verifies two reports whose run headers are fuzzed (tuples,
// scenario names and verdicts, harness identity) and whose other files are
// rendered from them, then merges and gates them. Invariants: no panic;
// a gate without a requirement fails whenever a run or scenario failed;
// a gate with one passes only if every row has a report with a pinned
// manifest, every report meets the harness pin and matches a row, and
// every scenario its row requires passed in every report.
func FuzzMerge(f *testing.F) {
	seed := func(edit func(*evidence.Run)) []byte {
		r, _ := fixedRun()
		r.Harness = harnessV2
		r.Scenarios = r.Scenarios[:2]
		r.Scenarios[1].Verdict, r.Scenarios[1].Passed, r.Scenarios[1].Detail = evidence.Verdict{Kind: evidence.Passed}, 2, ""
		r.Verdict = evidence.Verdict{Kind: evidence.Passed}
		if edit != nil {
			edit(r)
		}
		data, _ := evidence.MarshalJSON(r)
		return data
	}
	f.Add(seed(nil), seed(laneB))
	f.Add(seed(nil), seed(nil))
	f.Add(seed(func(r *evidence.Run) { r.Harness = nil }), seed(laneB))
	keys, pub := fuzzKeys(f)
	base := f.TempDir()
	req := &evidence.Requirement{
		Rows: []evidence.Row{
			{Name: "lane-a", Profile: "linux-x64-cgroupv1", Engine: "20.10.", Manifests: []string{"ab"}, Scenarios: []string{"admission", "isolation"}},
			{Name: "lane-b", Profile: "linux-x64-cgroupv1", Engine: "2.0.", Manifests: []string{"bb"}, Scenarios: []string{"admission", "isolation"}},
		},
		Harness: harnessPin,
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		var reports []*evidence.Signed
		for i, data := range [][]byte{a, b} {
			var r evidence.Run
			if attest.StrictJSON(data, &r) != nil {
				return
			}
			if len(r.Scenarios) > 64 {
				return // large lists are verify's business (FuzzVerifyRun); keep each input fast
			}
			for _, s := range r.Scenarios {
				// scenarioFiles writes s.Checks checks: keep that small.
				if s.Dir != "" && !validDir(s.Dir) || s.Checks < 0 || s.Checks > 1000 {
					return
				}
			}
			dir, err := os.MkdirTemp(base, "r")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(dir)
			if !writeFuzzReport(t, dir, keys, &r) {
				return
			}
			s, err := evidence.VerifyRun(context.Background(), dir, pub)
			if err != nil {
				return // inconsistent headers are verify's business (FuzzVerifyRun)
			}
			s.Dir = fmt.Sprintf("report-%d", i)
			reports = append(reports, s)
		}
		m := evidence.Merge(reports)
		runs := 0
		for i := range m.Scenarios {
			for j := range m.Columns {
				runs += m.Cells[i][j].Runs
			}
		}
		if want := len(reports[0].Predicate.Scenarios) + len(reports[1].Predicate.Scenarios); runs != want {
			t.Fatalf("matrix holds %d scenario runs, reports %d", runs, want)
		}
		failed := false
		for _, s := range reports {
			failed = failed || s.Predicate.Verdict.Kind != evidence.Passed
			for _, l := range s.Predicate.Scenarios {
				failed = failed || l.Verdict.Kind == evidence.Failed
			}
		}
		if failed && len(evidence.Gate(m, reports, nil)) == 0 {
			t.Fatal("gate without requirement passed a failed report")
		}
		if len(evidence.Gate(m, reports, req)) > 0 {
			return
		}
		for _, row := range req.Rows {
			if !slices.ContainsFunc(reports, func(s *evidence.Signed) bool {
				return row.Matches(s.Predicate.Tuple) && slices.Contains(row.Manifests, s.Predicate.Tuple.ManifestSHA256)
			}) {
				t.Fatalf("gate passed without a report for %s", row)
			}
		}
		for _, s := range reports {
			if req.Harness.Check(s.Predicate.Harness) != nil {
				t.Fatalf("gate passed harness %v", s.Predicate.Harness)
			}
			for _, row := range req.Rows {
				if !row.Matches(s.Predicate.Tuple) {
					continue
				}
				for _, name := range row.Scenarios {
					i := slices.IndexFunc(s.Predicate.Scenarios, func(l evidence.PredicateLine) bool { return l.Name == name })
					if i < 0 || s.Predicate.Scenarios[i].Verdict.Kind != evidence.Passed {
						t.Fatalf("gate passed %s without %s passed", s.Dir, name)
					}
				}
			}
		}
	})
}

func validDir(d string) bool {
	return filepath.IsLocal(d) && !strings.ContainsAny(d, "/\\\x00")
}

// writeFuzzReport renders r's files from its header as a run would and
// signs them; false when r cannot be rendered.
// Files are written without the fsyncs of evidence.WriteFile: durability is
// not under test, and thousands of fsyncs per input starve the fuzzer.
func writeFuzzReport(t *testing.T, dir, keys string, r *evidence.Run) bool {
	writeJSON := func(p string, v any) bool {
		data, err := evidence.MarshalJSON(v)
		return err == nil && os.WriteFile(p, data, 0o644) == nil
	}
	scenarios := scenarioFiles(r, nil)
	for _, s := range scenarios {
		sub := filepath.Join(dir, fmt.Sprintf("%02d-%s", s.Index, s.Name))
		if !validDir(filepath.Base(sub)) || os.MkdirAll(sub, 0o755) != nil || !writeJSON(filepath.Join(sub, "evidence.json"), s) {
			return false
		}
	}
	md, err := evidence.Markdown(r)
	if err != nil || os.WriteFile(filepath.Join(dir, "summary.md"), md, 0o644) != nil {
		return false
	}
	junit, err := evidence.JUnit(r, scenarios)
	if err != nil || os.WriteFile(filepath.Join(dir, "junit.xml"), junit, 0o644) != nil {
		return false
	}
	if !writeJSON(filepath.Join(dir, "evidence.json"), r) {
		return false
	}
	key, err := attest.LoadPrivateKey(filepath.Join(keys, attest.PrivateKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	return evidence.SignRun(context.Background(), dir, key, r) == nil
}
