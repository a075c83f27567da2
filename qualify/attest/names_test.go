package attest

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A key holder signs a report holding two subjects whose names a macOS or
// Windows checkout (where a Desktop lane's report is read) stores as one
// file: names that differ only in case, or NFC and NFD spellings of one
// name (and look-alike letters, which name another file than a reader
// thinks). The gate read one file; the checkout shows the other. Verify
// refuses the statement, naming the subject, and Sign refuses the
// directory rather than sign it.
func TestVerifyRefusesNamesAFileSystemConflates(t *testing.T) {
	pub := fuzzKey.Public().(ed25519.PublicKey)
	for _, tc := range []struct{ name, file, content, want string }{
		{"case twin", "01-a/EVIDENCE.json", `{"a":[]}` + "\n", "differs from subject 01-a/evidence.json only in case"},
		{"case twin at the top", "Summary.md", "# all passed\n", "differs from subject summary.md only in case"},
		{"NFD spelling", "01-a/checkpoint-1/re\u0301cord", "x\n", "contains a character outside printable ASCII"},
		{"look-alike", "summ\u0430ry.md", "# all passed\n", "contains a character outside printable ASCII"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := fuzzDir(t, t.TempDir(), 0)
			if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(tc.file)), []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := Sign(context.Background(), dir, fuzzKey, fuzzPredicateType, map[string]bool{"ok": true}); err == nil || !strings.Contains(err.Error(), tc.file) {
				t.Errorf("Sign: want an error naming %q, got %v", tc.file, err)
			}
			var st Statement
			if err := json.Unmarshal(validStatement(), &st); err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256([]byte(tc.content))
			st.Subject = append(st.Subject, Subject{Name: tc.file, Digest: map[string]string{"sha256": hex.EncodeToString(sum[:])}})
			payload, _ := json.Marshal(st)
			if err := os.WriteFile(filepath.Join(dir, EnvelopeFile), signPayload(t, payload), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Verify(context.Background(), dir, pub, Options{PredicateType: fuzzPredicateType})
			ve, ok := err.(*VerifyError)
			if !ok {
				t.Fatalf("want a *VerifyError, got %v", err)
			}
			for _, p := range ve.Problems {
				if strings.Contains(p.Problem, tc.want) && (p.File == tc.file || strings.Contains(p.Problem, tc.file)) {
					return
				}
			}
			t.Fatalf("want a problem naming %s: %s, got %v", tc.file, tc.want, ve.Problems)
		})
	}
}
