package evidence

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"path"
	"regexp"
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
}

var scenarioEvidence = regexp.MustCompile(`^[0-9]{2,}-[a-z0-9-]+/evidence\.json$`)

// schemaOf returns the schema check of a report file, or nil.
func schemaOf(name string) func([]byte) error {
	switch {
	case name == "evidence.json":
		return func(data []byte) error {
			var r Run
			if err := attest.StrictJSONFile(data, name, &r); err != nil {
				return err
			}
			if r.Schema != Schema {
				return fmt.Errorf("schema %q: want %q", r.Schema, Schema)
			}
			return nil
		}
	case scenarioEvidence.MatchString(name):
		return func(data []byte) error {
			var s Scenario
			if err := attest.StrictJSONFile(data, name, &s); err != nil {
				return err
			}
			if s.Schema != Schema {
				return fmt.Errorf("schema %q: want %q", s.Schema, Schema)
			}
			if want := path.Dir(name); fmt.Sprintf("%02d-%s", s.Index, s.Name) != want {
				return fmt.Errorf("scenario %d %q does not belong in %s", s.Index, s.Name, want)
			}
			return nil
		}
	case name == "junit.xml":
		return func(data []byte) error {
			if err := junitDocumentProblem(data); err != nil {
				return err
			}
			var v struct {
				XMLName xml.Name `xml:"testsuites"`
			}
			return xml.Unmarshal(data, &v)
		}
	}
	return nil
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
		Required:      []string{"evidence.json", "summary.md", "junit.xml"},
		// crossCheck reads summary.md, which has no schema: declared so
		// that it too is read once, and parsed as hashed.
		Parsed: []string{"summary.md", TestResultFile},
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
			data, err := read("evidence.json")
			if err != nil {
				return err
			}
			if err := attest.StrictJSONFile(data, "evidence.json", &run); err != nil {
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
	return &Signed{Dir: dir, Run: &run, Predicate: pred, Subjects: len(st.Subject), Scenarios: files}, nil
}
