package attest

import (
	"context"
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
