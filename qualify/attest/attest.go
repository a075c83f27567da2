package attest

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

// DSSE and in-toto identifiers.
const (
	// PayloadType is the DSSE payload type of an in-toto Statement.
	PayloadType = "application/vnd.in-toto+json"
	// StatementType is the in-toto Statement v1 _type.
	StatementType = "https://in-toto.io/Statement/v1"
	// EnvelopeFile is the envelope's name inside a signed directory; it is
	// the one regular file that is not a subject.
	EnvelopeFile = "evidence.dsse.json"
)

// Subject is an in-toto ResourceDescriptor reduced to what qualbox signs:
// a file's slash-separated path relative to the signed directory and its
// SHA-256 digest (lowercase hex).
type Subject struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

// Statement is an in-toto Statement v1.
type Statement struct {
	Type          string          `json:"_type"`
	Subject       []Subject       `json:"subject"`
	PredicateType string          `json:"predicateType"`
	Predicate     json.RawMessage `json:"predicate"`
}

type signer struct{ key ed25519.PrivateKey }

func (s signer) Sign(_ context.Context, data []byte) ([]byte, error) {
	return ed25519.Sign(s.key, data), nil
}

func (s signer) KeyID() (string, error) { return KeyID(s.key.Public().(ed25519.PublicKey)), nil }

type verifier struct{ key ed25519.PublicKey }

func (v verifier) Verify(_ context.Context, data, sig []byte) error {
	if !ed25519.Verify(v.key, data, sig) {
		return errors.New("ed25519: invalid signature")
	}
	return nil
}

func (v verifier) KeyID() (string, error)   { return KeyID(v.key), nil }
func (v verifier) Public() crypto.PublicKey { return v.key }

// Files lists the regular files under dir as sorted slash paths relative
// to dir, excluding EnvelopeFile at the top. Symbolic links and other
// non-regular files are an error: a signed report holds plain files only.
func Files(dir string) ([]string, error) {
	var names []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			return nil
		case !d.Type().IsRegular():
			return fmt.Errorf("attest: %s is not a regular file (%s)", rel, d.Type())
		case rel == EnvelopeFile:
			return nil
		}
		names = append(names, rel)
		return nil
	})
	sort.Strings(names)
	return names, err
}

// digestFile returns the hex SHA-256 of name inside root.
func digestFile(root *os.Root, name string) (string, error) {
	// O_NONBLOCK: a FIFO planted in a report must not hang verification at
	// open; only a regular file is hashed.
	f, err := root.OpenFile(filepath.FromSlash(name), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("not a regular file (%v)", st.Mode().Type())
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Sign hashes every file of dir (see Files), builds a Statement with
// predicateType and predicate, signs it with key and writes the envelope
// to dir/EnvelopeFile. It returns the envelope.
func Sign(ctx context.Context, dir string, key ed25519.PrivateKey, predicateType string, predicate any) (*dsse.Envelope, error) {
	names, err := Files(dir)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("attest: %s has no files to sign", dir)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	st := Statement{Type: StatementType, PredicateType: predicateType}
	for _, n := range names {
		d, err := digestFile(root, n)
		if err != nil {
			return nil, fmt.Errorf("attest: digest %s: %w", n, err)
		}
		st.Subject = append(st.Subject, Subject{Name: n, Digest: map[string]string{"sha256": d}})
	}
	if st.Predicate, err = json.Marshal(predicate); err != nil {
		return nil, fmt.Errorf("attest: encode predicate: %w", err)
	}
	payload, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	es, err := dsse.NewEnvelopeSigner(signer{key})
	if err != nil {
		return nil, err
	}
	env, err := es.SignPayload(ctx, PayloadType, payload)
	if err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(env, "", "  ")
	if err != nil {
		return nil, err
	}
	return env, writeNew(filepath.Join(dir, EnvelopeFile), append(data, '\n'), 0o644)
}

// Problem is one reason a signed directory does not verify.
type Problem struct {
	// File is the subject or file concerned, relative to the directory;
	// EnvelopeFile for envelope, signature and statement problems.
	File string `json:"file"`
	// Problem says what is wrong, e.g. "sha256 mismatch: expected X, actual Y".
	Problem string `json:"problem"`
}

// VerifyError lists every problem Verify found, in the order checked:
// envelope, signature, statement, subjects, unlisted files, schemas.
type VerifyError struct {
	Dir      string
	Problems []Problem
}

var _ error = (*VerifyError)(nil)

func (e *VerifyError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.File + ": " + p.Problem
	}
	return fmt.Sprintf("attest: %s does not verify: %s", e.Dir, strings.Join(parts, "; "))
}

// Options select what Verify checks beyond the signature and digests.
type Options struct {
	// PredicateType is the required predicateType.
	PredicateType string
	// Predicate, when set, checks the predicate JSON (schema, and that it
	// agrees with the signed files read through read).
	Predicate func(raw json.RawMessage, read func(name string) ([]byte, error)) error
	// Schema, when set, returns the content check for a subject name, or
	// nil when that subject has no schema.
	Schema func(name string) func(data []byte) error
	// Required lists subjects that must be present, e.g. "evidence.json".
	Required []string
}

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Verify checks dir/EnvelopeFile against key: envelope shape and payload
// type, an ed25519 signature by key over the DSSE PAE, the Statement v1
// fields, each subject's SHA-256 against the file now in dir, that no
// file is unlisted, and opts' schemas. It returns the statement and nil,
// or a *VerifyError naming each failing file and problem.
func Verify(ctx context.Context, dir string, key ed25519.PublicKey, opts Options) (*Statement, error) {
	ve := &VerifyError{Dir: dir}
	fail := func(file, format string, args ...any) {
		ve.Problems = append(ve.Problems, Problem{File: file, Problem: fmt.Sprintf(format, args...)})
	}
	done := func() (*Statement, error) { return nil, ve }

	data, err := os.ReadFile(filepath.Join(dir, EnvelopeFile))
	if err != nil {
		fail(EnvelopeFile, "%v", err)
		return done()
	}
	var env dsse.Envelope
	if err := strictJSON(data, &env); err != nil {
		fail(EnvelopeFile, "envelope: %v", err)
		return done()
	}
	if env.PayloadType != PayloadType {
		fail(EnvelopeFile, "payloadType %q: want %q", env.PayloadType, PayloadType)
	}
	ev, err := dsse.NewEnvelopeVerifier(verifier{key})
	if err != nil {
		return nil, err
	}
	if _, err := ev.Verify(ctx, &env); err != nil {
		fail(EnvelopeFile, "signature: no signature by key %s verifies (%v)", KeyID(key), err)
		return done()
	}
	if len(ve.Problems) > 0 {
		return done()
	}
	payload, _ := env.DecodeB64Payload()
	var st Statement
	if err := strictJSON(payload, &st); err != nil {
		fail(EnvelopeFile, "statement: %v", err)
		return done()
	}
	if st.Type != StatementType {
		fail(EnvelopeFile, "statement _type %q: want %q", st.Type, StatementType)
	}
	if st.PredicateType != opts.PredicateType {
		fail(EnvelopeFile, "predicateType %q: want %q", st.PredicateType, opts.PredicateType)
	}
	if len(st.Subject) == 0 {
		fail(EnvelopeFile, "statement has no subjects")
	}
	if len(ve.Problems) > 0 {
		return done()
	}

	root, err := os.OpenRoot(dir)
	if err != nil {
		fail(".", "%v", err)
		return done()
	}
	defer root.Close()
	listed := map[string]bool{}
	for i, s := range st.Subject {
		want := s.Digest["sha256"]
		switch {
		case !fs.ValidPath(s.Name) || s.Name == "." || s.Name == EnvelopeFile:
			fail(EnvelopeFile, "subject[%d] name %q is not a relative file path", i, s.Name)
			continue
		case listed[s.Name]:
			fail(s.Name, "listed twice")
			continue
		case !hex64.MatchString(want) || len(s.Digest) != 1:
			fail(s.Name, "digest %v: want exactly sha256 with 64 lowercase hex digits", s.Digest)
			continue
		}
		listed[s.Name] = true
		got, err := digestFile(root, s.Name)
		if err != nil {
			fail(s.Name, "%v", err)
			continue
		}
		if got != want {
			fail(s.Name, "sha256 mismatch: expected %s, actual %s", want, got)
		}
	}
	files, err := Files(dir)
	if err != nil {
		fail(".", "%v", err)
	}
	for _, f := range files {
		if !listed[f] {
			fail(f, "not a subject of the signed statement (added after signing)")
		}
	}
	for _, r := range opts.Required {
		if !listed[r] {
			fail(r, "required subject is missing from the statement")
		}
	}
	if len(ve.Problems) > 0 {
		return done()
	}
	read := func(name string) ([]byte, error) {
		if !listed[name] {
			return nil, fmt.Errorf("%s is not a subject", name)
		}
		f, err := root.Open(filepath.FromSlash(name))
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return io.ReadAll(f)
	}
	for _, s := range st.Subject {
		if opts.Schema == nil {
			break
		}
		check := opts.Schema(s.Name)
		if check == nil {
			continue
		}
		data, err := read(s.Name)
		if err == nil {
			err = check(data)
		}
		if err != nil {
			fail(s.Name, "schema: %v", err)
		}
	}
	if opts.Predicate != nil {
		if err := opts.Predicate(st.Predicate, read); err != nil {
			fail(EnvelopeFile, "predicate: %v", err)
		}
	}
	if len(ve.Problems) > 0 {
		return done()
	}
	return &st, nil
}

// strictJSON decodes one JSON value into out, rejecting unknown fields and
// trailing data.
func strictJSON(data []byte, out any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return err
	}
	// More() is false before a stray ']' or '}', so ask for the next token:
	// only a clean end of input is accepted.
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// StrictJSON is strictJSON for callers' schema checks.
func StrictJSON(data []byte, out any) error { return strictJSON(data, out) }
