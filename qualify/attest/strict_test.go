package attest

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestStrictJSONRejectsTrailingBytes(t *testing.T) {
	var v struct{ A int }
	if err := strictJSON([]byte(`{"A":1}`+" \n"), &v); err != nil {
		t.Fatalf("clean value with trailing space: %v", err)
	}
	for _, bad := range []string{`{"A":1}]`, `{"A":1}}`, `{"A":1}{"A":2}`, `{"A":1} x`, `{"A":1,"B":2}`} {
		if err := strictJSON([]byte(bad), &v); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

// A FIFO planted in place of a subject must fail verification at once, not
// block the verifier at open.
func TestVerifyDoesNotBlockOnAFIFO(t *testing.T) {
	keys := t.TempDir()
	privPath, pubPath, err := GenerateKey(keys)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := LoadPrivateKey(privPath)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := LoadPublicKey(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	subject := filepath.Join(dir, "evidence.json")
	if err := os.WriteFile(subject, []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := Sign(ctx, dir, priv, "https://example.test/p", map[string]string{}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(subject); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(subject, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Verify(ctx, dir, pub, Options{PredicateType: "https://example.test/p"})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "evidence.json") {
			t.Fatalf("verify of a FIFO subject: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("verify blocked on a FIFO")
	}
}

// Every reader of a report must see the same values: a member name that
// differs only in case from a field, or a name repeated in one object at
// any depth, is refused naming the name and where it is, not resolved the
// way encoding/json would (case-insensitively, last one wins).
func TestStrictJSONRefusesNamesOtherReadersSeeDifferently(t *testing.T) {
	type check struct {
		Name string `json:"name"`
		OK   bool   `json:"ok"`
	}
	var v struct {
		Checks []check            `json:"checks"`
		Digest map[string]string  `json:"digest"`
		Raw    json.RawMessage    `json:"raw"`
		Deep   map[string][]check `json:"deep"`
	}
	for _, tc := range []struct{ in, want string }{
		{`{"checks":[{"name":"a","ok":false,"OK":true}]}`, `unknown object member name "OK" within "/checks/0"`},
		{`{"checks":[{"name":"a","Ok":true}]}`, `unknown object member name "Ok" within "/checks/0"`},
		{`{"checks":[{"name":"a","ok":false,"ok":true}]}`, `duplicate object member name "ok" within "/checks/0"`},
		{`{"digest":{"sha256":"aa","sha256":"bb"}}`, `duplicate object member name "sha256" within "/digest"`},
		{`{"raw":{"x":{"y":1,"y":2}}}`, `duplicate object member name "y" within "/raw/x"`},
		{`{"deep":{"k":[{"name":"a"},{"name":"b","n\u0061me":"c"}]}}`, `duplicate object member name "name" within "/deep/k/1"`},
		{`{"checks":[],"checks":[]}`, `duplicate object member name "checks"`},
		{"{\"checks\":[{\"name\":\"\xff\"}]}", `invalid UTF-8 within "/checks/0/name"`},
		{`{"checks":[]}{}`, `after top-level value`},
	} {
		err := strictJSONFile([]byte(tc.in), "01-a/evidence.json", &v)
		var je *JSONError
		if !errors.As(err, &je) || je.File != "01-a/evidence.json" || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "01-a/evidence.json: ") {
			t.Errorf("%s: want a *JSONError naming the file and %s, got %v", tc.in, tc.want, err)
		}
	}
	if err := strictJSON([]byte(`{"checks":[{"name":"a","ok":true}],"digest":{"sha256":"aa"},"raw":{"x":1}}`), &v); err != nil {
		t.Fatalf("clean document: %v", err)
	}
}

// A key holder signs a statement whose subject digest names sha256 twice,
// once with the file's real digest: encoding/json kept the last one, a
// reader keeping the first checks another file. Verify refuses it.
func TestVerifyRefusesASignedStatementWithADuplicateName(t *testing.T) {
	pub := fuzzKey.Public().(ed25519.PublicKey)
	dir := fuzzDir(t, t.TempDir(), 0)
	st := validStatement()
	real := `"name":"summary.md","digest":{"sha256":"`
	i := strings.Index(string(st), real)
	if i < 0 {
		t.Fatalf("no summary.md subject in %s", st)
	}
	forged := strings.Replace(string(st), real, real+strings.Repeat("0", 64)+`","sha256":"`, 1)
	for _, tc := range []struct{ name, payload, want string }{
		{"digest", forged, `duplicate object member name "sha256" within "/subject/`},
		{"type", strings.Replace(string(st), `"_type":`, `"_TYPE":"x","_type":`, 1), `unknown object member name "_TYPE"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(filepath.Join(dir, EnvelopeFile), signPayload(t, []byte(tc.payload)), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Verify(context.Background(), dir, pub, Options{PredicateType: fuzzPredicateType})
			if err == nil || !strings.Contains(err.Error(), EnvelopeFile+": statement: ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want the statement refused for %s, got %v", tc.want, err)
			}
		})
	}
	// The envelope itself is read the same way.
	env := signPayload(t, st)
	env = []byte(strings.Replace(string(env), `"payloadType":`, `"payloadType":"text/plain","payloadType":`, 1))
	if err := os.WriteFile(filepath.Join(dir, EnvelopeFile), env, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Verify(context.Background(), dir, pub, Options{PredicateType: fuzzPredicateType})
	if err == nil || !strings.Contains(err.Error(), `envelope: evidence.dsse.json: jsontext: duplicate object member name "payloadType"`) {
		t.Fatalf("want the envelope refused for its duplicate payloadType, got %v", err)
	}
}

// A signed directory holds no directory that is not some subject's: an
// empty directory, or one holding only unsigned files, planted after
// signing is refused naming it; Sign refuses to sign one.
func TestSubjectlessDirectoriesAreRefused(t *testing.T) {
	pub := fuzzKey.Public().(ed25519.PublicKey)
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, dir string)
		want  []string
	}{
		{"empty", func(t *testing.T, dir string) {
			mkdir(t, filepath.Join(dir, "02-forged"))
		}, []string{"02-forged/: directory holding no subject"}},
		{"empty nested", func(t *testing.T, dir string) {
			mkdir(t, filepath.Join(dir, "01-a", "spill", "x"))
		}, []string{"01-a/spill/: directory holding no subject", "01-a/spill/x/: directory holding no subject"}},
		{"only an unsigned file", func(t *testing.T, dir string) {
			mkdir(t, filepath.Join(dir, "03-b"))
			if err := os.WriteFile(filepath.Join(dir, "03-b", "evidence.json"), []byte("{}"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, []string{"03-b/evidence.json: not a subject", "03-b/: directory holding no subject"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := fuzzDir(t, t.TempDir(), 0)
			if err := os.WriteFile(filepath.Join(dir, EnvelopeFile), signPayload(t, validStatement()), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := Verify(context.Background(), dir, pub, Options{PredicateType: fuzzPredicateType}); err != nil {
				t.Fatalf("before planting: %v", err)
			}
			tc.plant(t, dir)
			_, err := Verify(context.Background(), dir, pub, Options{PredicateType: fuzzPredicateType})
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("want %q, got %v", w, err)
				}
			}
			if err := os.Remove(filepath.Join(dir, EnvelopeFile)); err != nil {
				t.Fatal(err)
			}
			if tc.name != "only an unsigned file" {
				_, err = Sign(context.Background(), dir, fuzzKey, fuzzPredicateType, map[string]string{})
				if err == nil || !strings.Contains(err.Error(), "holds no file to sign") {
					t.Errorf("Sign of a directory with %s: %v", tc.name, err)
				}
			}
		})
	}
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}
