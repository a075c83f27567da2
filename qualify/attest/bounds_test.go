package attest

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// zeroReader yields n bytes of '0' without holding them.
type zeroReader struct{ n int64 }

func (r *zeroReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.n {
		p = p[:r.n]
	}
	for i := range p {
		p[i] = '0'
	}
	r.n -= int64(len(p))
	return len(p), nil
}

func TestReadBoundedStopsAtTheLimit(t *testing.T) {
	r := &zeroReader{n: 1 << 30}
	_, err := ReadBounded(r, "x.json", "MaxFileBytes", 1<<20)
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != "MaxFileBytes" || le.File != "x.json" {
		t.Fatalf("ReadBounded of 1 GiB: %v", err)
	}
	if read := int64(1<<30) - r.n; read > 1<<20+64<<10 {
		t.Fatalf("read %d bytes for a 1 MiB limit", read)
	}
	data, err := ReadBounded(&zeroReader{n: 1 << 20}, "x.json", "MaxFileBytes", 1<<20)
	if err != nil || len(data) != 1<<20 {
		t.Fatalf("exactly at the limit: %d bytes, %v", len(data), err)
	}
}

// Each limit is named by the error a hostile input gets.
func TestLimitsAreNamed(t *testing.T) {
	pub := fuzzKey.Public().(ed25519.PublicKey)
	huge := make([]string, MaxSubjects+1)
	for i := range huge {
		huge[i] = fmt.Sprintf("f%d", i)
	}
	many := make([]string, MaxSignatures+1)
	for i := range many {
		many[i] = `{"keyid":"","sig":"AAAA"}`
	}
	for _, tc := range []struct {
		limit    string
		envelope []byte
	}{
		{"MaxSubjects", signPayload(t, subjectsWith(huge...))},
		{"MaxJSONDepth", signPayload(t, statementWith(func(st map[string]any) {
			st["predicate"] = json.RawMessage(strings.Repeat("[", MaxJSONDepth+1) + strings.Repeat("]", MaxJSONDepth+1))
		}))},
		{"MaxJSONValues", signPayload(t, []byte("["+strings.Repeat("0,", MaxJSONValues)+"0]"))},
		{"MaxSignatures", []byte(`{"payloadType":"` + PayloadType + `","payload":"e30=","signatures":[` + strings.Join(many, ",") + `]}`)},
		{"MaxJSONDepth", []byte(strings.Repeat("[", 100000))},
	} {
		t.Run(tc.limit, func(t *testing.T) {
			dir := fuzzDir(t, t.TempDir(), 0)
			if err := os.WriteFile(filepath.Join(dir, EnvelopeFile), tc.envelope, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Verify(context.Background(), dir, pub, Options{PredicateType: fuzzPredicateType})
			var le *LimitError
			if !errors.As(err, &le) || le.Limit != tc.limit {
				t.Fatalf("want a *LimitError naming %s, got %v", tc.limit, err)
			}
			if !strings.Contains(err.Error(), tc.limit) {
				t.Fatalf("message does not name %s: %v", tc.limit, err)
			}
		})
	}
}

// hugeChildEnv tells the test binary, re-run as a child, to verify the
// directory it names and report; the parent measures the child's peak RSS.
const hugeChildEnv = "QUALBOX_ATTEST_HUGE_DIR"

// TestVerifyHugeEnvelopeChild is the child half of the test below; it does
// nothing unless hugeChildEnv is set.
func TestVerifyHugeEnvelopeChild(t *testing.T) {
	dir := os.Getenv(hugeChildEnv)
	if dir == "" {
		t.Skip("child of TestVerifyOfHugeFilesStaysBounded")
	}
	_, err := Verify(context.Background(), dir, fuzzKey.Public().(ed25519.PublicKey), Options{PredicateType: fuzzPredicateType})
	var le *LimitError
	if !errors.As(err, &le) {
		t.Fatalf("want a *LimitError, got %v", err)
	}
	fmt.Printf("LIMIT %s\n", le.Limit)
}

// sparse writes prefix at the start of a file of size bytes whose rest is
// a hole: the 1 GiB inputs below cost no disk.
func sparse(t *testing.T, path string, prefix []byte, size int64) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(prefix); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
}

// A 1 GiB hostile envelope, and a signed 1 GiB subject, fail quickly with a
// limit error while the verifying process's peak RSS stays under 64 MiB
// (measured by the kernel for a child process: getrusage ru_maxrss).
func TestVerifyOfHugeFilesStaysBounded(t *testing.T) {
	const gib = 1 << 30
	envelopeDir := fuzzDir(t, t.TempDir(), 0)
	sparse(t, filepath.Join(envelopeDir, EnvelopeFile), []byte(`{"payloadType":"`+PayloadType+`","payload":"`), gib)

	// A validly signed statement whose evidence.json is 1 GiB.
	subjectDir := fuzzDir(t, t.TempDir(), 0)
	sparse(t, filepath.Join(subjectDir, "evidence.json"), []byte("{"), gib)
	payload := statementWith(func(st map[string]any) {})
	if err := os.WriteFile(filepath.Join(subjectDir, EnvelopeFile), signPayload(t, payload), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct{ name, dir, limit string }{
		{"1 GiB envelope", envelopeDir, "MaxEnvelopeBytes"},
		{"1 GiB subject", subjectDir, "MaxSubjectBytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run", "^TestVerifyHugeEnvelopeChild$", "-test.v")
			cmd.Env = append(os.Environ(), hugeChildEnv+"="+tc.dir)
			start := time.Now()
			out, err := cmd.CombinedOutput()
			elapsed := time.Since(start)
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), "LIMIT "+tc.limit) {
				t.Fatalf("child did not fail on %s:\n%s", tc.limit, out)
			}
			maxRSS := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss
			if runtime.GOOS != "darwin" {
				maxRSS *= 1024 // KiB on Linux, bytes on macOS
			}
			t.Logf("%s: %s in %v, child peak RSS %.1f MiB", tc.name, tc.limit, elapsed.Round(time.Millisecond), float64(maxRSS)/(1<<20))
			if maxRSS >= 64<<20 {
				t.Errorf("peak RSS %d bytes >= 64 MiB", maxRSS)
			}
			if elapsed > 10*time.Second {
				t.Errorf("took %v", elapsed)
			}
		})
	}
}
