package attest

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

// fuzzKey is a fixed ed25519 key so that fuzzed statements can be signed
// and reach every step after the signature check.
var fuzzKey = ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))

const fuzzPredicateType = "https://qualbox.dev/fuzz/v1"

// fuzzFiles are the plain files of every fuzzed report directory.
var fuzzFiles = map[string]string{
	"evidence.json":       `{"schema":"x"}` + "\n",
	"01-a/evidence.json":  `{"a":[1,2,3]}` + "\n",
	"01-a/checkpoint-1/r": "record\n",
	"summary.md":          "# s\n",
}

// Layout bits add hostile entries to a fuzzed report directory.
const (
	layoutSymlinkInside  = 1 << iota // link -> evidence.json
	layoutSymlinkOutside             // esc -> /etc/passwd
	layoutFIFO                       // fifo
	layoutSymlinkDir                 // 01-b -> 01-a
)

// fuzzDir writes fuzzFiles and the hostile entries of layout into a fresh
// directory under base.
func fuzzDir(t testing.TB, base string, layout uint8) string {
	dir, err := os.MkdirTemp(base, "r")
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range fuzzFiles {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mk := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if layout&layoutSymlinkInside != 0 {
		mk(os.Symlink("evidence.json", filepath.Join(dir, "link")))
	}
	if layout&layoutSymlinkOutside != 0 {
		mk(os.Symlink("/etc/passwd", filepath.Join(dir, "esc")))
	}
	if layout&layoutFIFO != 0 {
		mk(syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644))
	}
	if layout&layoutSymlinkDir != 0 {
		mk(os.Symlink("01-a", filepath.Join(dir, "01-b")))
	}
	return dir
}

// validStatement is a Statement that verifies in a directory with no
// hostile entries.
func validStatement() []byte {
	st := Statement{Type: StatementType, PredicateType: fuzzPredicateType, Predicate: json.RawMessage(`{"ok":true}`)}
	names := make([]string, 0, len(fuzzFiles))
	for n := range fuzzFiles {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		sum := sha256.Sum256([]byte(fuzzFiles[n]))
		st.Subject = append(st.Subject, Subject{Name: n, Digest: map[string]string{"sha256": hex.EncodeToString(sum[:])}})
	}
	data, _ := json.Marshal(st)
	return data
}

func signPayload(t testing.TB, payload []byte) []byte {
	es, err := dsse.NewEnvelopeSigner(signer{fuzzKey})
	if err != nil {
		t.Fatal(err)
	}
	env, err := es.SignPayload(context.Background(), PayloadType, payload)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// checkVerifyOutcome asserts the invariants of any Verify outcome: an
// error is a *VerifyError with at least one problem naming a file; a
// success lists exactly the directory's plain files, each once, each with
// the SHA-256 of its content, and the directory holds no symlink or FIFO.
func checkVerifyOutcome(t *testing.T, dir string, layout uint8, st *Statement, err error) {
	t.Helper()
	if err != nil {
		var ve *VerifyError
		if !errors.As(err, &ve) || len(ve.Problems) == 0 {
			t.Fatalf("error is not a *VerifyError with problems: %#v", err)
		}
		for _, p := range ve.Problems {
			if p.File == "" || p.Problem == "" {
				t.Fatalf("problem without file or text: %+v", p)
			}
		}
		return
	}
	if layout != 0 {
		t.Fatalf("verified a directory with hostile entries (layout %#x)", layout)
	}
	var names []string
	for _, s := range st.Subject {
		names = append(names, s.Name)
		content, ok := fuzzFiles[s.Name]
		if !ok {
			t.Fatalf("verified subject %q that is not a file of the directory", s.Name)
		}
		sum := sha256.Sum256([]byte(content))
		if s.Digest["sha256"] != hex.EncodeToString(sum[:]) || len(s.Digest) != 1 {
			t.Fatalf("verified subject %q with digest %v", s.Name, s.Digest)
		}
	}
	slices.Sort(names)
	if len(slices.Compact(slices.Clone(names))) != len(names) || len(names) != len(fuzzFiles) {
		t.Fatalf("verified subjects %v for files %v", names, fuzzFiles)
	}
}

// FuzzVerifyStatement signs arbitrary payloads with the trusted key, so
// that every step after the signature sees hostile statements: path
// tricks in subject names ("..", absolute, NUL, symlinked files and
// directories, FIFOs), duplicates, huge subject lists, deep nesting and
// payloads that are no Statement (docs/untrusted-inputs.md).
func FuzzVerifyStatement(f *testing.F) {
	f.Add(validStatement(), uint8(0))
	f.Add(validStatement(), uint8(layoutSymlinkInside|layoutFIFO))
	base := f.TempDir()
	pub := fuzzKey.Public().(ed25519.PublicKey)
	// One directory per layout, made once: Verify only reads it, and each
	// iteration replaces the envelope.
	dirs := map[uint8]string{}
	f.Fuzz(func(t *testing.T, payload []byte, layout uint8) {
		layout &= layoutSymlinkInside | layoutSymlinkOutside | layoutFIFO | layoutSymlinkDir
		dir, ok := dirs[layout]
		if !ok {
			dir = fuzzDir(t, base, layout)
			dirs[layout] = dir
		}
		if err := os.WriteFile(filepath.Join(dir, EnvelopeFile), signPayload(t, payload), 0o644); err != nil {
			t.Fatal(err)
		}
		st, err := Verify(context.Background(), dir, pub, Options{
			PredicateType: fuzzPredicateType,
			Required:      []string{"evidence.json"},
			Schema: func(name string) func([]byte) error {
				return func(data []byte) error { var v any; return StrictJSON(data, &v) }
			},
			Predicate: func(raw json.RawMessage, read func(string) ([]byte, error)) error {
				var v map[string]any
				if err := StrictJSON(raw, &v); err != nil {
					return err
				}
				_, err := read("evidence.json")
				return err
			},
		})
		checkVerifyOutcome(t, dir, layout, st, err)
	})
}

// FuzzVerifyEnvelope feeds arbitrary bytes as evidence.dsse.json: oversize
// or deeply nested JSON, thousands of signatures, wrong payload types.
// Nothing but a *VerifyError may come out, and without the key's
// signature nothing verifies.
func FuzzVerifyEnvelope(f *testing.F) {
	f.Add(signPayload(f, validStatement()))
	base := f.TempDir()
	pub := fuzzKey.Public().(ed25519.PublicKey)
	dir := fuzzDir(f, base, 0)
	f.Fuzz(func(t *testing.T, envelope []byte) {
		if err := os.WriteFile(filepath.Join(dir, EnvelopeFile), envelope, 0o644); err != nil {
			t.Fatal(err)
		}
		st, err := Verify(context.Background(), dir, pub, Options{PredicateType: fuzzPredicateType})
		checkVerifyOutcome(t, dir, 0, st, err)
		if err == nil {
			// Only an envelope carrying the fuzz key's signature over a
			// valid statement gets here; its payload must be that statement.
			var env dsse.Envelope
			if json.Unmarshal(envelope, &env) != nil || len(env.Signatures) == 0 {
				t.Fatalf("verified an envelope without signatures: %q", envelope)
			}
		}
	})
}
