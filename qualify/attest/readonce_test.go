package attest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// swapOn makes openSubject replace name's file with forged content (a new
// file renamed over it, as a racing host would) either just before or
// just after Verify opens it, and counts the opens of each subject.
func swapOn(t *testing.T, dir, name string, forged []byte, before bool) map[string]int {
	t.Helper()
	opens := map[string]int{}
	swap := func() {
		tmp := filepath.Join(dir, ".swap")
		if err := os.WriteFile(tmp, forged, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, filepath.FromSlash(name))); err != nil {
			t.Fatal(err)
		}
	}
	orig := openSubject
	t.Cleanup(func() { openSubject = orig })
	openSubject = func(root *os.Root, n string) (*os.File, error) {
		opens[n]++
		if n == name && before && opens[n] == 1 {
			swap()
		}
		f, err := orig(root, n)
		if n == name && !before && opens[n] == 1 {
			swap()
		}
		return f, err
	}
	return opens
}

// A host that swaps a subject between the read that hashes it and the
// read that parses it got the swapped content parsed about 1 time in 25.
// Now each subject is opened once, and the schema and predicate checks see
// the bytes that were hashed: a swap after the open changes nothing Verify
// sees, and a swap before it is a digest mismatch.
func TestVerifyParsesTheBytesItHashed(t *testing.T) {
	pub := fuzzKey.Public().(ed25519.PublicKey)
	const name = "evidence.json"
	signed := []byte(fuzzFiles[name])
	forged := []byte(`{"schema":"forged"}` + "\n")
	for _, before := range []bool{false, true} {
		dir := fuzzDir(t, t.TempDir(), 0)
		if err := os.WriteFile(filepath.Join(dir, EnvelopeFile), signPayload(t, validStatement()), 0o644); err != nil {
			t.Fatal(err)
		}
		opens := swapOn(t, dir, name, forged, before)
		var schemaSaw, predicateSaw, summarySaw []byte
		_, err := Verify(context.Background(), dir, pub, Options{
			PredicateType: fuzzPredicateType,
			Parsed:        []string{"summary.md"},
			Schema: func(n string) func([]byte) error {
				if n != name {
					return nil
				}
				return func(data []byte) error { schemaSaw = data; return nil }
			},
			Predicate: func(_ json.RawMessage, read func(string) ([]byte, error)) error {
				var err error
				predicateSaw, err = read(name)
				if err != nil {
					return err
				}
				summarySaw, err = read("summary.md")
				return err
			},
		})
		for n, c := range opens {
			if c != 1 {
				t.Errorf("before=%v: %s opened %d times", before, n, c)
			}
		}
		if before {
			if err == nil || !strings.Contains(err.Error(), name+": sha256 mismatch") {
				t.Fatalf("a file swapped before it was hashed: want a sha256 mismatch, got %v", err)
			}
			if schemaSaw != nil || predicateSaw != nil {
				t.Fatalf("the swapped file was parsed: %q %q", schemaSaw, predicateSaw)
			}
			continue
		}
		if err != nil {
			t.Fatalf("a file swapped after it was read: %v", err)
		}
		if !bytes.Equal(schemaSaw, signed) || !bytes.Equal(predicateSaw, signed) || string(summarySaw) != fuzzFiles["summary.md"] {
			t.Fatalf("parsed %q (schema) and %q (predicate), want the signed %q", schemaSaw, predicateSaw, signed)
		}
	}
}

// A subject the predicate reads without having declared it (no Schema, not
// in Parsed) is read again, and that read must hash to the signed digest.
func TestVerifyRehashesAnUndeclaredRead(t *testing.T) {
	pub := fuzzKey.Public().(ed25519.PublicKey)
	dir := fuzzDir(t, t.TempDir(), 0)
	if err := os.WriteFile(filepath.Join(dir, EnvelopeFile), signPayload(t, validStatement()), 0o644); err != nil {
		t.Fatal(err)
	}
	swapOn(t, dir, "summary.md", []byte("# forged\n"), false)
	var saw []byte
	_, err := Verify(context.Background(), dir, pub, Options{
		PredicateType: fuzzPredicateType,
		Predicate: func(_ json.RawMessage, read func(string) ([]byte, error)) error {
			var err error
			saw, err = read("summary.md")
			return err
		},
	})
	if err == nil || !strings.Contains(err.Error(), "summary.md: sha256 mismatch") || saw != nil {
		t.Fatalf("want the re-read refused as a sha256 mismatch, got %v (read %q)", err, saw)
	}
}

// The parsed subjects held in memory are bounded in all by MaxParsedBytes.
func TestParsedBytesAreBoundedInAll(t *testing.T) {
	dir := fuzzDir(t, t.TempDir(), 0)
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	v := &verification{root: root, content: map[string][]byte{}, digests: map[string]string{}, contentBytes: MaxParsedBytes - 3}
	_, err = v.hashed("summary.md", true)
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != "MaxParsedBytes" || le.File != "summary.md" {
		t.Fatalf("want a MaxParsedBytes *LimitError for summary.md, got %v", err)
	}
}
