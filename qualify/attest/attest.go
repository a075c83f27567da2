package attest

import (
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
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
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
	// EnvelopeSHA256 is, on a Statement Verify returns, the lowercase hex
	// SHA-256 of the envelope file as Verify read and verified it: what a
	// summary of the verification names as its input, with no second read
	// of a file that may have changed since. Not part of the statement.
	EnvelopeSHA256 string `json:"-"`
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
// More than MaxSubjects files is a *LimitError.
func Files(dir string) ([]string, error) {
	files, _, err := Tree(dir)
	return files, err
}

// Tree lists dir as Files does, and also its subdirectories (sorted slash
// paths relative to dir, without "."). More than MaxSubjects files, or
// more than MaxSubjects directories, is a *LimitError.
func Tree(dir string) (files, dirs []string, err error) {
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if len(files) > MaxSubjects || len(dirs) > MaxSubjects {
			return &LimitError{File: ".", Limit: "MaxSubjects", Max: MaxSubjects, Got: -1}
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			if rel != "." {
				dirs = append(dirs, rel)
			}
			return nil
		case !d.Type().IsRegular():
			return fmt.Errorf("attest: %s is not a regular file (%s)", rel, d.Type())
		case rel == EnvelopeFile:
			return nil
		}
		files = append(files, rel)
		return nil
	})
	sort.Strings(files)
	sort.Strings(dirs)
	return files, dirs, err
}

// subjectlessDirs returns the directories of dirs that hold none of
// subjects at any depth (an empty directory, or one holding only files
// that are not subjects), as "name/".
func subjectlessDirs(dirs []string, subjects func(yield func(string) bool)) []string {
	holds := map[string]bool{}
	for s := range subjects {
		for d := path.Dir(s); d != "."; d = path.Dir(d) {
			holds[d] = true
		}
	}
	var out []string
	for _, d := range dirs {
		if !holds[d] {
			out = append(out, d+"/")
		}
	}
	return out
}

// openSubject opens name inside root for reading. O_NONBLOCK: a FIFO
// planted in a report must not hang verification at open; only a regular
// file is read. Tests replace it to change a file between open and read.
var openSubject = func(root *os.Root, name string) (*os.File, error) {
	return root.OpenFile(filepath.FromSlash(name), os.O_RDONLY|syscall.O_NONBLOCK, 0)
}

// readSubject opens name inside root once and returns the hex SHA-256 of
// what it read. With keep, it also returns those bytes: the file is read
// into memory, at most max bytes (else a *LimitError naming limit), and
// hashed from that buffer, so whoever parses the returned bytes parses
// exactly what was hashed. Without keep the file is hashed as it streams,
// at most MaxSubjectBytes.
func readSubject(root *os.Root, name string, keep bool, limit string, max int64) (string, []byte, error) {
	f, err := openSubject(root, name)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", nil, err
	}
	if !st.Mode().IsRegular() {
		return "", nil, fmt.Errorf("not a regular file (%v)", st.Mode().Type())
	}
	if keep {
		if st.Size() > max {
			return "", nil, &LimitError{File: name, Limit: limit, Max: max, Got: st.Size()}
		}
		data, err := ReadBounded(f, name, limit, max)
		if err != nil {
			return "", nil, err
		}
		sum := sha256.Sum256(data)
		return hex.EncodeToString(sum[:]), data, nil
	}
	if st.Size() > MaxSubjectBytes {
		return "", nil, &LimitError{File: name, Limit: "MaxSubjectBytes", Max: MaxSubjectBytes, Got: st.Size()}
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, MaxSubjectBytes+1))
	if err != nil {
		return "", nil, err
	}
	if n > MaxSubjectBytes {
		return "", nil, &LimitError{File: name, Limit: "MaxSubjectBytes", Max: MaxSubjectBytes, Got: -1}
	}
	return hex.EncodeToString(h.Sum(nil)), nil, nil
}

// Sign hashes every file of dir (see Files), builds a Statement with
// predicateType and predicate, signs it with key and writes the envelope
// to dir/EnvelopeFile. It returns the envelope.
func Sign(ctx context.Context, dir string, key ed25519.PrivateKey, predicateType string, predicate any) (*dsse.Envelope, error) {
	names, dirs, err := Tree(dir)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("attest: %s has no files to sign", dir)
	}
	// Verify refuses a directory that holds no subject; so does Sign,
	// rather than sign a report that cannot verify.
	if empty := subjectlessDirs(dirs, slices.Values(names)); len(empty) > 0 {
		return nil, fmt.Errorf("attest: %s: directory %s holds no file to sign (remove it first)", dir, strings.Join(empty, ", "))
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	st := Statement{Type: StatementType, PredicateType: predicateType}
	folded := map[string]string{}
	for _, n := range names {
		if p := subjectNameProblem(n); p != "" {
			return nil, fmt.Errorf("attest: %s: file name %q %s", dir, n, p)
		}
		if other, ok := folded[foldName(n)]; ok {
			return nil, fmt.Errorf("attest: %s: file names %q and %q differ only in case", dir, other, n)
		}
		folded[foldName(n)] = n
		d, _, err := readSubject(root, n, false, "", 0)
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
	env, data, err := signEnvelope(ctx, key, payload)
	if err != nil {
		return nil, err
	}
	return env, writeNew(filepath.Join(dir, EnvelopeFile), data, 0o644)
}

// Problem is one reason a signed directory does not verify.
type Problem struct {
	// File is the subject or file concerned, relative to the directory;
	// EnvelopeFile for envelope, signature and statement problems.
	File string `json:"file"`
	// Problem says what is wrong, e.g. "sha256 mismatch: expected X, actual Y".
	Problem string `json:"problem"`
	// Limit is set when the problem is a crossed limit (see limits.go).
	Limit *LimitError `json:"limit,omitempty"`
}

// VerifyError lists every problem Verify found, in the order checked:
// envelope, signature, statement, subjects, unlisted files, schemas,
// predicate. errors.As finds a *LimitError in it when a limit was crossed.
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

// Unwrap returns the crossed limits, so errors.As(err, **LimitError) works.
func (e *VerifyError) Unwrap() []error {
	var errs []error
	for _, p := range e.Problems {
		if p.Limit != nil {
			errs = append(errs, p.Limit)
		}
	}
	return errs
}

// Options select what Verify checks beyond the signature and digests.
type Options struct {
	// PredicateType is the required predicateType.
	PredicateType string
	// Predicate, when set, checks the predicate JSON (schema, and that it
	// agrees with the signed files read through read). read returns a
	// subject's bytes, at most MaxFileBytes (else a *LimitError): the very
	// bytes whose SHA-256 matched the signed digest, never a second read
	// of the file.
	Predicate func(raw json.RawMessage, read func(name string) ([]byte, error)) error
	// Schema, when set, returns the content check for a subject name, or
	// nil when that subject has no schema. It is called once per subject,
	// in the statement's order, before any subject is read; a subject with
	// a check is read once into memory, hashed from that buffer, and the
	// buffer is what the check and Predicate see.
	Schema func(name string) func(data []byte) error
	// Parsed lists subjects without a Schema that Predicate reads (e.g.
	// "summary.md"): they too are read once into memory when hashed. A
	// subject Predicate reads that is in neither is read again then and
	// its SHA-256 compared with the signed digest once more.
	Parsed []string
	// Required lists subjects that must be present, e.g. "evidence.json".
	Required []string
}

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// maxSubjectName bounds a subject name's length in bytes.
const maxSubjectName = 1024

// Verify checks dir/EnvelopeFile against key: envelope shape and payload
// type, an ed25519 signature by key over the DSSE PAE, the Statement v1
// fields, each subject's SHA-256 against the file now in dir, that no
// file is unlisted, and opts' schemas and predicate check. Every read is
// bounded (limits.go). It returns the statement and nil, or a
// *VerifyError naming each failing file and problem.
//
// The steps run in order; a step that finds a problem later steps depend
// on (an unreadable envelope, a bad signature, a malformed statement,
// a missing or changed subject) ends verification there, so nothing is
// parsed from a file that is not yet known to be the signed one.
func Verify(ctx context.Context, dir string, key ed25519.PublicKey, opts Options) (*Statement, error) {
	v := &verification{dir: dir, key: key, opts: opts, problems: &VerifyError{Dir: dir}}
	defer v.close()
	for _, step := range []func(context.Context) bool{
		v.readEnvelope,    // 1. bounded read and strict decode of the envelope
		v.checkSignature,  // 2. payload type, signature count, ed25519 over the PAE
		v.decodeStatement, // 3. the signed payload is an in-toto Statement v1
		v.checkSubjects,   // 4. each subject names a plain file whose SHA-256 matches
		v.checkUnlisted,   // 5. no file was added, every required subject is listed
		v.checkSchemas,    // 6. opts.Schema of each subject's content
		v.checkPredicate,  // 7. opts.Predicate against the signed files
	} {
		if !step(ctx) {
			break
		}
	}
	if len(v.problems.Problems) > 0 {
		return nil, v.problems
	}
	v.st.EnvelopeSHA256 = v.envelopeSHA256
	return &v.st, nil
}

// verification is the state Verify's steps share.
type verification struct {
	dir      string
	key      ed25519.PublicKey
	opts     Options
	problems *VerifyError
	env      dsse.Envelope
	st       Statement
	// envelopeSHA256 is the SHA-256 of the envelope bytes read (hex).
	envelopeSHA256 string
	root           *os.Root
	listed         map[string]bool
	// digests are the signed SHA-256s of the listed subjects.
	digests map[string]string
	// checks are opts.Schema's checks, asked once per subject.
	checks map[string]func([]byte) error
	// content holds the parsed subjects' bytes, exactly as hashed.
	content map[string][]byte
	// contentBytes is the sum of content's sizes (MaxParsedBytes).
	contentBytes int64
}

func (v *verification) fail(file, format string, args ...any) {
	v.problems.Problems = append(v.problems.Problems, Problem{File: file, Problem: fmt.Sprintf(format, args...)})
}

// failErr records err, keeping a *LimitError inside it reachable.
func (v *verification) failErr(file, prefix string, err error) {
	p := Problem{File: file, Problem: prefix + err.Error()}
	var le *LimitError
	if errors.As(err, &le) {
		p.Limit = le
	}
	v.problems.Problems = append(v.problems.Problems, p)
}

func (v *verification) ok() bool { return len(v.problems.Problems) == 0 }

func (v *verification) close() {
	if v.root != nil {
		v.root.Close()
	}
}

func (v *verification) readEnvelope(context.Context) bool {
	data, err := readFileBounded(filepath.Join(v.dir, EnvelopeFile), EnvelopeFile, "MaxEnvelopeBytes", MaxEnvelopeBytes)
	if err != nil {
		v.failErr(EnvelopeFile, "", err)
		return false
	}
	if err := strictJSONFile(data, EnvelopeFile, &v.env); err != nil {
		v.failErr(EnvelopeFile, "envelope: ", err)
		return false
	}
	sum := sha256.Sum256(data)
	v.envelopeSHA256 = hex.EncodeToString(sum[:])
	return true
}

func (v *verification) checkSignature(ctx context.Context) bool {
	if v.env.PayloadType != PayloadType {
		v.fail(EnvelopeFile, "payloadType %q: want %q", v.env.PayloadType, PayloadType)
	}
	if n := len(v.env.Signatures); n > MaxSignatures {
		v.failErr(EnvelopeFile, "signatures: ", &LimitError{File: EnvelopeFile, Limit: "MaxSignatures", Max: MaxSignatures, Got: int64(n)})
		return false
	}
	ev, err := dsse.NewEnvelopeVerifier(verifier{v.key})
	if err != nil {
		v.fail(EnvelopeFile, "signature: %v", err)
		return false
	}
	if _, err := ev.Verify(ctx, &v.env); err != nil {
		v.fail(EnvelopeFile, "signature: no signature by key %s verifies (%v)", KeyID(v.key), err)
		return false
	}
	return v.ok()
}

func (v *verification) decodeStatement(context.Context) bool {
	// The payload decoded from at most MaxEnvelopeBytes of base64 is
	// smaller than that; the signature already verified over it.
	payload, err := v.env.DecodeB64Payload()
	if err != nil {
		v.fail(EnvelopeFile, "payload: %v", err)
		return false
	}
	if err := strictJSONFile(payload, EnvelopeFile, &v.st); err != nil {
		v.failErr(EnvelopeFile, "statement: ", err)
		return false
	}
	if v.st.Type != StatementType {
		v.fail(EnvelopeFile, "statement _type %q: want %q", v.st.Type, StatementType)
	}
	if v.st.PredicateType != v.opts.PredicateType {
		v.fail(EnvelopeFile, "predicateType %q: want %q", v.st.PredicateType, v.opts.PredicateType)
	}
	switch n := len(v.st.Subject); {
	case n == 0:
		v.fail(EnvelopeFile, "statement has no subjects")
	case n > MaxSubjects:
		v.failErr(EnvelopeFile, "statement: ", &LimitError{File: EnvelopeFile, Limit: "MaxSubjects", Max: MaxSubjects, Got: int64(n)})
	}
	return v.ok()
}

// subjectNameProblem says why name cannot be a subject, or "".
func subjectNameProblem(name string) string {
	switch {
	case len(name) > maxSubjectName:
		return fmt.Sprintf("is longer than %d bytes", maxSubjectName)
	case !fs.ValidPath(name) || name == "." || name == EnvelopeFile:
		return "is not a relative file path"
	case strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' }):
		return "contains a control character or backslash"
	case strings.ContainsFunc(name, func(r rune) bool { return r > 0x7e }):
		// macOS file systems hold one file for the NFC and NFD spellings
		// of a name, and a look-alike letter names another file than the
		// one a reader thinks: a report's names are ASCII.
		return "contains a character outside printable ASCII"
	}
	return ""
}

// foldName is the key under which a case-insensitive file system (macOS,
// Windows: where a Desktop lane's report is checked out) stores name.
func foldName(name string) string { return strings.ToLower(strings.ToUpper(name)) }

func (v *verification) checkSubjects(context.Context) bool {
	root, err := os.OpenRoot(v.dir)
	if err != nil {
		v.fail(".", "%v", err)
		return false
	}
	v.root = root
	v.listed = map[string]bool{}
	v.digests = map[string]string{}
	v.checks = map[string]func([]byte) error{}
	v.content = map[string][]byte{}
	folded := map[string]string{}
	parsed := map[string]bool{}
	for _, n := range v.opts.Parsed {
		parsed[n] = true
	}
	for i, s := range v.st.Subject {
		want := s.Digest["sha256"]
		if p := subjectNameProblem(s.Name); p != "" {
			v.fail(EnvelopeFile, "subject[%d] name %q %s", i, s.Name, p)
			continue
		}
		if v.listed[s.Name] {
			v.fail(s.Name, "listed twice")
			continue
		}
		if other, ok := folded[foldName(s.Name)]; ok {
			v.fail(s.Name, "differs from subject %s only in case: a case-insensitive file system holds one file for both", other)
			continue
		}
		folded[foldName(s.Name)] = s.Name
		if !hex64.MatchString(want) || len(s.Digest) != 1 {
			v.fail(s.Name, "digest %v: want exactly sha256 with 64 lowercase hex digits", s.Digest)
			continue
		}
		v.listed[s.Name] = true
		v.digests[s.Name] = want
		if v.opts.Schema != nil {
			if check := v.opts.Schema(s.Name); check != nil {
				v.checks[s.Name] = check
				parsed[s.Name] = true
			}
		}
		if _, err := v.hashed(s.Name, parsed[s.Name]); err != nil {
			v.failErr(s.Name, "", err)
		}
	}
	return true
}

// hashed reads a listed subject once and compares its SHA-256 with the
// signed digest. With keep, the bytes are kept in v.content (at most
// MaxFileBytes each and MaxParsedBytes in all) and returned: what is
// parsed is what was hashed, whatever happens to the file afterwards.
func (v *verification) hashed(name string, keep bool) ([]byte, error) {
	limit, max := "MaxFileBytes", int64(MaxFileBytes)
	if left := MaxParsedBytes - v.contentBytes; left < max {
		limit, max = "MaxParsedBytes", left
	}
	got, data, err := readSubject(v.root, name, keep, limit, max)
	if err != nil {
		return nil, err
	}
	if want := v.digests[name]; got != want {
		return nil, fmt.Errorf("sha256 mismatch: expected %s, actual %s", want, got)
	}
	if keep {
		v.content[name] = data
		v.contentBytes += int64(len(data))
	}
	return data, nil
}

func (v *verification) checkUnlisted(context.Context) bool {
	files, dirs, err := Tree(v.dir)
	if err != nil {
		v.failErr(".", "", err)
	}
	for _, f := range files {
		if !v.listed[f] {
			v.fail(f, "not a subject of the signed statement (added after signing)")
		}
	}
	// A directory is part of what a reader of the report sees (an empty
	// NN-name/ looks like a scenario's evidence directory): each must
	// hold a subject.
	for _, d := range subjectlessDirs(dirs, maps.Keys(v.listed)) {
		v.fail(d, "directory holding no subject of the signed statement (empty, or added after signing)")
	}
	for _, r := range v.opts.Required {
		if !v.listed[r] {
			v.fail(r, "required subject is missing from the statement")
		}
	}
	return v.ok()
}

// read returns a listed subject's content, at most MaxFileBytes: the
// bytes checkSubjects hashed for a schema'd or Parsed subject, else the
// bytes of one more read whose SHA-256 must again match the signed digest.
func (v *verification) read(name string) ([]byte, error) {
	if !v.listed[name] {
		return nil, fmt.Errorf("%s is not a subject", name)
	}
	if data, ok := v.content[name]; ok {
		return data, nil
	}
	data, err := v.hashed(name, true)
	if err != nil {
		return nil, &FileError{File: name, Err: err}
	}
	return data, nil
}

func (v *verification) checkSchemas(context.Context) bool {
	for _, s := range v.st.Subject {
		check := v.checks[s.Name]
		if check == nil {
			continue
		}
		data, ok := v.content[s.Name]
		if !ok {
			continue // not read: its problem is already recorded
		}
		if err := check(data); err != nil {
			v.failErr(s.Name, "schema: ", err)
		}
	}
	return true
}

func (v *verification) checkPredicate(context.Context) bool {
	if v.opts.Predicate == nil || !v.ok() {
		return v.ok()
	}
	err := v.opts.Predicate(v.st.Predicate, v.read)
	if err == nil {
		return v.ok()
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, err := range errs {
		var fe *FileError
		if errors.As(err, &fe) {
			v.failErr(fe.File, "", fe.Err)
		} else {
			v.failErr(EnvelopeFile, "predicate: ", err)
		}
	}
	return v.ok()
}

// FileError is a problem an Options.Predicate check found in one signed
// file (e.g. junit.xml disagreeing with evidence.json); Verify reports it
// under that file. A Predicate may return several joined with errors.Join.
type FileError struct {
	File string
	Err  error
}

func (e *FileError) Error() string { return e.File + ": " + e.Err.Error() }
func (e *FileError) Unwrap() error { return e.Err }

// readFileBounded reads path (named file in errors) if it is a regular
// file of at most max bytes, without blocking on a FIFO; the size is
// checked before reading and again while reading.
func readFileBounded(path, file, limit string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%v)", st.Mode().Type())
	}
	if st.Size() > max {
		return nil, &LimitError{File: file, Limit: limit, Max: max, Got: st.Size()}
	}
	return ReadBounded(f, file, limit, max)
}

// strictJSON decodes one JSON value into out, rejecting unknown fields and
// trailing data, after scanJSON checked MaxJSONDepth and MaxJSONValues.
func strictJSON(data []byte, out any) error { return strictJSONFile(data, "json", out) }

// strictOptions make the decoder read a document the way every other JSON
// reader of a report does (jq, Python, a browser), so that no two readers
// of one signed file can see different values: object member names match
// struct fields case-sensitively, a name repeated in one object (at any
// depth) is an error, as are invalid UTF-8, an unknown member and trailing
// data. encoding/json matches names case-insensitively and keeps the last
// duplicate, so {"ok":false,"OK":true} read as true to it and false to jq.
// github.com/go-json-experiment/json is the maintained upstream of
// encoding/json/v2 and checks all of this in its tokenizer, where our own
// pre-pass would have to re-implement JSON string unescaping to compare
// names; its v1 options keep encoding/json's semantics for everything
// else (the data model was written for them), and
// ReportErrorsWithLegacySemantics(false) keeps the member name and its
// JSON pointer in the errors.
var strictOptions = []jsonv2.Options{
	jsonv1.DefaultOptionsV1(),
	jsonv1.ReportErrorsWithLegacySemantics(false),
	jsonv2.MatchCaseInsensitiveNames(false),
	jsonv2.RejectUnknownMembers(true),
	jsontext.AllowDuplicateNames(false),
	jsontext.AllowInvalidUTF8(false),
}

func strictJSONFile(data []byte, file string, out any) error {
	if err := scanJSON(data, file); err != nil && !errors.Is(err, errSyntax) {
		return err
	}
	if err := jsonv2.Unmarshal(data, out, strictOptions...); err != nil {
		return &JSONError{File: file, Err: err}
	}
	return nil
}

// JSONError is a document that is not one strictly well-formed JSON value
// of the expected shape (see strictOptions): a duplicate or differently
// cased member name, an unknown member, invalid UTF-8, a syntax error or
// trailing data. Err's text names the member and its JSON pointer, e.g.
// `jsontext: duplicate object member name "ok" within "/checks/0"`.
type JSONError struct {
	// File is the document concerned, relative to the report directory.
	File string
	Err  error
}

func (e *JSONError) Error() string { return e.File + ": " + e.Err.Error() }
func (e *JSONError) Unwrap() error { return e.Err }

// StrictJSON is strictJSON for callers' schema checks.
func StrictJSON(data []byte, out any) error { return strictJSON(data, out) }

// StrictJSONFile is StrictJSON naming the document file in a *LimitError.
func StrictJSONFile(data []byte, file string, out any) error { return strictJSONFile(data, file, out) }
