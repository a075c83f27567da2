package evidence

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"

	trv0 "github.com/in-toto/attestation/go/predicates/test_result/v0"
	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/qualbox/qualbox/qualify/attest"
)

// The in-toto test-result statement of a run
// (docs/qualification.md#standard-attestations).
const (
	// TestResultPredicateType is the in-toto test-result predicate type.
	TestResultPredicateType = "https://in-toto.io/attestation/test-result/v0.1"
	// TestResultFile is the DSSE envelope of the test-result statement
	// inside a report. It is written before EnvelopeFile is signed, so it
	// is itself a subject of the report's own statement.
	TestResultFile = "test-result.dsse.json"
)

// Test-result results, as the predicate names them.
const (
	TestPassed = "PASSED"
	TestWarned = "WARNED"
	TestFailed = "FAILED"
)

// TestResultOf is the test-result statement of r, whose evidence.json
// has SHA-256 evidenceSHA256 (64 lowercase hex digits). Its one subject
// is evidence.json by that digest: a consumer (cosign
// verify-blob-attestation, a policy engine) checks the statement against
// the bytes of evidence.json it holds, and evidence.json alone names the
// run, its tuple and every scenario file's verdict. The result is FAILED
// when the run failed, WARNED when it passed with a scenario not passed
// (skipped or not applicable), else PASSED; passedTests, warnedTests and
// failedTests name scenarios as their directories do ("03-memory-exhaustion").
// The configuration names the manifest (path, sha256), the profile and,
// when the report records it, the harness build (module; a pkg:golang
// URI with its version unless "(devel)"; VCS revision as gitCommit) and
// its scenario catalogue (sha256). Verification recomputes this
// statement (checkTestResult): a change to what it yields makes every
// earlier test-result statement fail to verify, so it must come with the
// earlier derivation kept for the reports that carry it.
func TestResultOf(r *Run, evidenceSHA256 string) (*intoto.Statement, error) {
	tr := &trv0.TestResult{Result: TestPassed}
	for _, s := range r.Scenarios {
		name := fmt.Sprintf("%02d-%s", s.Index, s.Name)
		switch s.Verdict.Kind {
		case Passed:
			tr.PassedTests = append(tr.PassedTests, name)
		case Failed:
			tr.FailedTests = append(tr.FailedTests, name)
		default:
			tr.WarnedTests = append(tr.WarnedTests, name)
		}
	}
	switch {
	case r.Verdict.Kind != Passed:
		tr.Result = TestFailed
	case len(tr.FailedTests) > 0:
		// RunVerdict fails a run with a failed scenario; a report that
		// says otherwise does not verify, but the statement never says
		// PASSED over a failed test.
		tr.Result = TestFailed
	case len(tr.WarnedTests) > 0:
		tr.Result = TestWarned
	}
	conf := []struct {
		name, uri string
		digest    map[string]string
		notes     map[string]any
	}{
		{name: r.Manifest.Path, digest: map[string]string{"sha256": r.Manifest.SHA256}, notes: map[string]any{"qualbox": "manifest"}},
		{name: r.Profile, notes: map[string]any{"qualbox": "profile"}},
	}
	if h := r.Harness; h != nil {
		d := map[string]string{}
		if h.VCSRevision != "" {
			d["gitCommit"] = h.VCSRevision
		}
		// A package URL's version is a released one: a (devel) build
		// is named by its module alone, its revision in the digest.
		uri := "pkg:golang/" + h.Module
		if h.Version != "" && h.Version != "(devel)" {
			uri += "@" + h.Version
		}
		conf = append(conf,
			struct {
				name, uri string
				digest    map[string]string
				notes     map[string]any
			}{name: h.Module, uri: uri, digest: d,
				notes: map[string]any{"qualbox": "harness", "version": h.Version, "vcsModified": h.VCSModified}},
			struct {
				name, uri string
				digest    map[string]string
				notes     map[string]any
			}{name: "scenario-catalogue", digest: map[string]string{"sha256": h.CatalogueSHA256},
				notes: map[string]any{"qualbox": "catalogue", "version": float64(h.CatalogueVersion)}})
	}
	for _, c := range conf {
		notes, err := structpb.NewStruct(c.notes)
		if err != nil {
			return nil, err
		}
		rd := &intoto.ResourceDescriptor{Name: c.name, Uri: c.uri, Annotations: notes}
		if len(c.digest) > 0 {
			rd.Digest = c.digest
		}
		tr.Configuration = append(tr.Configuration, rd)
	}
	pred, err := toStruct(tr)
	if err != nil {
		return nil, err
	}
	st := &intoto.Statement{
		Type:          intoto.StatementTypeUri,
		Subject:       []*intoto.ResourceDescriptor{{Name: "evidence.json", Digest: map[string]string{"sha256": evidenceSHA256}}},
		PredicateType: TestResultPredicateType,
		Predicate:     pred,
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("evidence: test-result statement: %w", err)
	}
	return st, nil
}

// toStruct converts a predicate message to the Statement's predicate.
func toStruct(m proto.Message) (*structpb.Struct, error) {
	data, err := protojson.Marshal(m)
	if err != nil {
		return nil, err
	}
	s := &structpb.Struct{}
	return s, protojson.Unmarshal(data, s)
}

// StatementJSON renders st as compact JSON (protojson's field names, no
// whitespace), the payload SignTestResult and merge's VSA sign.
func StatementJSON(st *intoto.Statement) ([]byte, error) {
	data, err := protojson.Marshal(st)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// SignTestResult writes dir/TestResultFile: the test-result statement
// (TestResultOf) of dir/evidence.json as written, signed with key. It
// reads evidence.json back and builds the statement from what it
// decodes, exactly what verification recomputes. It must run before
// SignRun, which then signs it as one of the report's files.
func SignTestResult(ctx context.Context, dir string, key ed25519.PrivateKey) error {
	data, err := os.ReadFile(filepath.Join(dir, "evidence.json"))
	if err != nil {
		return fmt.Errorf("evidence: test-result: %w", err)
	}
	var r Run
	if err := attest.StrictJSONFile(data, "evidence.json", &r); err != nil {
		return fmt.Errorf("evidence: test-result: %w", err)
	}
	sum := sha256.Sum256(data)
	st, err := TestResultOf(&r, hex.EncodeToString(sum[:]))
	if err != nil {
		return err
	}
	payload, err := StatementJSON(st)
	if err != nil {
		return err
	}
	env, err := attest.SignPayload(ctx, key, payload)
	if err != nil {
		return err
	}
	return WriteFile(filepath.Join(dir, TestResultFile), env)
}

// checkTestResult verifies a report's TestResultFile, read through read
// (the bytes the report's own statement signed), against key, the key
// that signed the report, and against r, the verified evidence.json: its
// payload read as plain JSON must equal the statement TestResultOf
// derives from r and evidence.json's signed bytes, member for member,
// with no member added. A problem is an *attest.FileError naming
// TestResultFile.
func checkTestResult(ctx context.Context, key ed25519.PublicKey, read func(string) ([]byte, error), r *Run) error {
	fail := func(err error) error { return &attest.FileError{File: TestResultFile, Err: err} }
	ev, err := read("evidence.json")
	if err != nil {
		return err
	}
	env, err := read(TestResultFile)
	if err != nil {
		return err
	}
	payload, err := attest.OpenEnvelope(ctx, key, env, TestResultFile)
	if err != nil {
		return fail(err)
	}
	var got any
	if err := attest.StrictJSONFile(payload, TestResultFile, &got); err != nil {
		return fail(fmt.Errorf("statement: %w", err))
	}
	sum := sha256.Sum256(ev)
	st, err := TestResultOf(r, hex.EncodeToString(sum[:]))
	if err != nil {
		return fail(err)
	}
	wantJSON, err := StatementJSON(st)
	if err != nil {
		return fail(err)
	}
	var want any
	if err := json.Unmarshal(wantJSON, &want); err != nil {
		return fail(err)
	}
	if !reflect.DeepEqual(got, want) {
		return fail(errors.New("the signed test-result statement is not the one evidence.json yields (subject evidence.json by its signed sha256, result, tests and configuration)"))
	}
	return nil
}
