package attest

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The fuzz seed corpora under testdata/fuzz are checked in and run by
// every `go test`. TestWriteFuzzSeeds regenerates the hostile ones when
// QUALBOX_WRITE_FUZZ_SEEDS=1; the real envelope is copied from a committed
// report.

func TestValidStatementSeedVerifies(t *testing.T) {
	dir := fuzzDir(t, t.TempDir(), 0)
	if err := os.WriteFile(filepath.Join(dir, EnvelopeFile), signPayload(t, validStatement()), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := Verify(context.Background(), dir, fuzzKey.Public().(ed25519.PublicKey), Options{PredicateType: fuzzPredicateType})
	if err != nil {
		t.Fatal(err)
	}
	checkVerifyOutcome(t, dir, 0, st, nil)
}

func writeSeed(t *testing.T, target, name string, values ...any) {
	t.Helper()
	var b strings.Builder
	b.WriteString("go test fuzz v1\n")
	for _, v := range values {
		switch v := v.(type) {
		case []byte:
			fmt.Fprintf(&b, "[]byte(%s)\n", strconv.Quote(string(v)))
		case uint8:
			fmt.Fprintf(&b, "byte(%d)\n", v)
		default:
			t.Fatalf("seed value %T", v)
		}
	}
	dir := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func statementWith(mut func(st map[string]any)) []byte {
	var st map[string]any
	_ = json.Unmarshal(validStatement(), &st)
	mut(st)
	data, _ := json.Marshal(st)
	return data
}

func subjectsWith(names ...string) []byte {
	return statementWith(func(st map[string]any) {
		subs := st["subject"].([]any)
		for _, n := range names {
			subs = append(subs, map[string]any{"name": n, "digest": map[string]any{"sha256": strings.Repeat("a", 64)}})
		}
		st["subject"] = subs
	})
}

func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("QUALBOX_WRITE_FUZZ_SEEDS") != "1" {
		t.Skip("set QUALBOX_WRITE_FUZZ_SEEDS=1 to regenerate testdata/fuzz")
	}
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	// Statements: signed by the trusted key, hostile inside.
	st := "FuzzVerifyStatement"
	writeSeed(t, st, "valid", validStatement(), uint8(0))
	writeSeed(t, st, "valid-beside-symlinks-and-fifo", validStatement(), uint8(0x0f))
	writeSeed(t, st, "dotdot", subjectsWith("../outside"), uint8(0))
	writeSeed(t, st, "absolute", subjectsWith("/etc/passwd"), uint8(0))
	writeSeed(t, st, "nul", subjectsWith("evidence.json\x00.txt"), uint8(0))
	writeSeed(t, st, "backslash", subjectsWith(`01-a\evidence.json`), uint8(0))
	writeSeed(t, st, "symlink-subject", subjectsWith("link"), uint8(layoutSymlinkInside))
	writeSeed(t, st, "symlink-escape", subjectsWith("esc"), uint8(layoutSymlinkOutside))
	writeSeed(t, st, "fifo-subject", subjectsWith("fifo"), uint8(layoutFIFO))
	writeSeed(t, st, "through-symlinked-dir", subjectsWith("01-b/evidence.json"), uint8(layoutSymlinkDir))
	writeSeed(t, st, "duplicate", subjectsWith("evidence.json"), uint8(0))
	writeSeed(t, st, "envelope-as-subject", subjectsWith(EnvelopeFile), uint8(0))
	writeSeed(t, st, "dot", subjectsWith(".", "01-a/", "01-a//x", ""), uint8(0))
	huge := make([]string, MaxSubjects+1)
	for i := range huge {
		huge[i] = fmt.Sprintf("f%d", i)
	}
	writeSeed(t, st, "huge-subject-list", subjectsWith(huge...), uint8(0))
	writeSeed(t, st, "deep-predicate", statementWith(func(st map[string]any) { st["predicate"] = json.RawMessage(deep(MaxJSONDepth + 1)) }), uint8(0))
	writeSeed(t, st, "deep-payload", []byte(deep(100000)), uint8(0))
	writeSeed(t, st, "many-values", []byte("["+strings.Repeat("0,", MaxJSONValues)+"0]"), uint8(0))
	writeSeed(t, st, "not-a-statement-array", []byte(`[{"_type":"https://in-toto.io/Statement/v1"}]`), uint8(0))
	writeSeed(t, st, "statement-v01", statementWith(func(st map[string]any) { st["_type"] = "https://in-toto.io/Statement/v0.1" }), uint8(0))
	writeSeed(t, st, "unknown-field", statementWith(func(st map[string]any) { st["predicateTypo"] = 1 }), uint8(0))
	writeSeed(t, st, "two-digests", statementWith(func(st map[string]any) {
		st["subject"].([]any)[0].(map[string]any)["digest"] = map[string]any{"sha256": strings.Repeat("a", 64), "sha512": "b"}
	}), uint8(0))
	writeSeed(t, st, "trailing", append(validStatement(), ']'), uint8(0))
	writeSeed(t, st, "empty", []byte{}, uint8(0))

	// Envelopes: arbitrary bytes.
	en := "FuzzVerifyEnvelope"
	real, err := os.ReadFile(filepath.Join("..", "..", "reports", "linux-x64-cgroupv1", "20261129T113142Z", EnvelopeFile))
	if err != nil {
		t.Fatal(err)
	}
	writeSeed(t, en, "real-report", real)
	writeSeed(t, en, "valid", signPayload(t, validStatement()))
	sigs := make([]string, 5000)
	for i := range sigs {
		sigs[i] = `{"keyid":"","sig":"AAAA"}`
	}
	payload := base64.StdEncoding.EncodeToString(validStatement())
	writeSeed(t, en, "thousands-of-signatures", []byte(`{"payloadType":"`+PayloadType+`","payload":"`+payload+`","signatures":[`+strings.Join(sigs, ",")+`]}`))
	writeSeed(t, en, "deep", []byte(`{"payloadType":`+deep(50000)+`}`))
	writeSeed(t, en, "wrong-payload-type", []byte(`{"payloadType":"application/json","payload":"`+payload+`","signatures":[]}`))
	writeSeed(t, en, "payload-not-base64", []byte(`{"payloadType":"`+PayloadType+`","payload":"***","signatures":[{"keyid":"","sig":"AAAA"}]}`))
	writeSeed(t, en, "not-json", []byte("\x00\xff{"))
	writeSeed(t, en, "two-values", []byte(`{}{}`))
}
