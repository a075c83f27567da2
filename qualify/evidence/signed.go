package evidence

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/qualbox/qualbox/qualify/attest"
)

// PredicateType is the in-toto predicateType of a signed qualification run.
const PredicateType = "https://qualbox.dev/evidence/v1"

// PredicateSchema identifies the Predicate layout.
const PredicateSchema = "qualbox.evidence.predicate.v1"

// Predicate is the signed summary of a run header: its tuple, verdict and
// per-scenario verdicts. Verify requires it to equal the summary derived
// from the signed evidence.json.
type Predicate struct {
	Schema string `json:"schema"`
	Tuple  Tuple  `json:"tuple"`
	// Harness is the run's harness identity; nil in reports made before
	// it was recorded (a gate refuses those, docs/qualification.md#gate).
	Harness   *Harness        `json:"harness,omitempty"`
	Verdict   Verdict         `json:"verdict"`
	Scenarios []PredicateLine `json:"scenarios"`
	Start     time.Time       `json:"start"`
	End       time.Time       `json:"end"`
}

// PredicateLine is one scenario's verdict in a Predicate.
type PredicateLine struct {
	Name    string  `json:"name"`
	Verdict Verdict `json:"verdict"`
}

// PredicateOf summarises r.
func PredicateOf(r *Run) Predicate {
	p := Predicate{Schema: PredicateSchema, Tuple: TupleOf(r), Harness: r.Harness, Verdict: r.Verdict, Scenarios: []PredicateLine{}, Start: r.Timing.Start, End: r.Timing.End}
	for _, s := range r.Scenarios {
		p.Scenarios = append(p.Scenarios, PredicateLine{Name: s.Name, Verdict: s.Verdict})
	}
	return p
}

// SignRun signs the complete report in dir (every file but the envelope)
// with key and writes attest.EnvelopeFile there.
func SignRun(ctx context.Context, dir string, key ed25519.PrivateKey, r *Run) error {
	_, err := attest.Sign(ctx, dir, key, PredicateType, PredicateOf(r))
	return err
}

// Signed is a verified report.
type Signed struct {
	Dir       string
	Run       *Run
	Predicate Predicate
	Subjects  int
	// Scenarios are the verified scenario evidence files by Run.Scenarios
	// index; nil for a scenario listed as not run (no directory).
	Scenarios []*Scenario
	// Attestations maps the report's attestation files (its
	// attest.EnvelopeFile, and TestResultFile when it has one) to the
	// lowercase hex SHA-256 of the bytes VerifyRun verified: a summary of
	// the verification names these, never a later read of the files.
	Attestations map[string]string
}

// VerifyRun verifies a signed report directory against key: the envelope
// signature, every subject's digest, that no file was added, the evidence
// schemas, that the signed predicate agrees with evidence.json, and the
// cross-checks of the files and claims against each other at the current
// time (docs/qualification.md#evidence). A failure is an
// *attest.VerifyError naming each file and problem.
func VerifyRun(ctx context.Context, dir string, key ed25519.PublicKey) (*Signed, error) {
	var run Run
	var pred Predicate
	var subjects []string
	var files []*Scenario
	st, err := attest.Verify(ctx, dir, key, attest.Options{
		PredicateType: PredicateType,
		Required:      TopFiles(true),
		// crossCheck reads the files it cross-checks that have no schema
		// (summary.md): declared so that they too are read once, and
		// parsed as hashed.
		Parsed: append(parsedFiles(), TestResultFile),
		Schema: func(name string) func([]byte) error {
			subjects = append(subjects, name)
			return schemaOf(name)
		},
		Predicate: func(raw json.RawMessage, read func(string) ([]byte, error)) error {
			if err := attest.StrictJSONFile(raw, "predicate", &pred); err != nil {
				return err
			}
			if pred.Schema != PredicateSchema {
				return fmt.Errorf("schema %q: want %q", pred.Schema, PredicateSchema)
			}
			data, err := read(RunFile)
			if err != nil {
				return err
			}
			if err := attest.StrictJSONFile(data, RunFile, &run); err != nil {
				return err
			}
			want, _ := json.Marshal(PredicateOf(&run))
			got, _ := json.Marshal(pred)
			if !bytes.Equal(want, got) {
				return errors.New("does not match the summary of evidence.json")
			}
			files, err = crossCheck(&run, subjects, read, time.Now())
			// Optional, checked when present: see TestResultFile.
			if slices.Contains(subjects, TestResultFile) {
				err = errors.Join(err, checkTestResult(ctx, key, read, &run))
			}
			return err
		},
	})
	if err != nil {
		return nil, err
	}
	att := map[string]string{attest.EnvelopeFile: st.EnvelopeSHA256}
	for _, s := range st.Subject {
		if s.Name == TestResultFile {
			att[TestResultFile] = s.Digest["sha256"]
		}
	}
	return &Signed{Dir: dir, Run: &run, Predicate: pred, Subjects: len(st.Subject), Scenarios: files, Attestations: att}, nil
}

// parsedFiles are the Layout files crossCheck reads that have no schema.
func parsedFiles() []string {
	var names []string
	for _, f := range Layout {
		if f.check != nil && f.schema == nil {
			names = append(names, f.Name)
		}
	}
	return names
}
