package qualify_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/qualify"
	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/evidence"
	"github.com/qualbox/qualbox/qualify/manifest"
	"github.com/qualbox/qualbox/qualify/scenario"
)

// other is the fake scenario under another name, so that a manifest can
// list two scenarios to select from.
type other struct{ fake }

func (other) Name() string { return "other" }

// syncBuffer is a bytes.Buffer that a test may read while a run writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A run with a selection runs only the selected entries, lists the others
// as not selected with no directory, records the selection and signs a
// report that verifies, with or without --repeat.
func TestRunWithASelection(t *testing.T) {
	for _, repeat := range []int{1, 2} {
		t.Run(fmt.Sprintf("repeat %d", repeat), func(t *testing.T) {
			reg := scenario.NewRegistry(fake{}, other{})
			doc := fmt.Sprintf(fakeManifest, strings.Repeat("a", 64)) +
				"  - {name: fake, params: {outcome: pass}}\n  - {name: other, params: {outcome: fail-check}}\n  - {name: fake, params: {outcome: pass}}\n"
			m, err := manifest.Parse("sel.yaml", []byte(doc), reg)
			assert.NilError(t, err)
			keys := t.TempDir()
			priv, pub, err := attest.GenerateKey(keys)
			assert.NilError(t, err)
			key, err := attest.LoadPrivateKey(priv)
			assert.NilError(t, err)
			sel := evidence.NewSelection([]string{"other"}, false, []string{"fake", "other", "fake"})
			out := filepath.Join(t.TempDir(), "run")
			var stdout, stderr bytes.Buffer
			run, err := qualify.Run(context.Background(), qualify.Config{Manifest: m, Output: out, Registry: reg, ImageID: "sha256:" + strings.Repeat("a", 64),
				ImageSource: "manifest", Selection: sel, SigningKey: key, Repeat: repeat, Stderr: &stderr})
			assert.NilError(t, err)
			assert.NilError(t, evidence.Table(&stdout, run.Run))
			// The failing scenario was not run, so the run passed.
			assert.Equal(t, run.Verdict.Kind, evidence.Passed)
			assert.DeepEqual(t, run.Selection, &evidence.Selection{Skip: []string{"other"}, Skipped: []string{"other"}})
			assert.Equal(t, len(run.Scenarios), 3*repeat)
			var wantFiles []string
			for i, s := range run.Scenarios {
				if s.Name == "other" {
					assert.Check(t, is.Equal(s.Dir, ""))
					assert.Check(t, is.Equal(s.Verdict, evidence.Verdict{Kind: evidence.Skipped, Reason: evidence.NotSelectedReason}))
					label := fmt.Sprintf("[%d/%d] other", i+1, 3*repeat)
					if repeat > 1 {
						label += fmt.Sprintf(" (run %d)", s.Repeat)
					}
					assert.Check(t, is.Contains(stderr.String(), label+" ... skipped (not run: not selected)\n"))
					continue
				}
				assert.Check(t, is.Equal(s.Verdict.Kind, evidence.Passed))
				wantFiles = append(wantFiles, s.Dir+"/", s.Dir+"/evidence.json")
			}
			files := listFiles(t, out)
			for _, f := range wantFiles {
				assert.Check(t, is.Contains(files, f))
			}
			assert.Check(t, !strings.Contains(strings.Join(files, " "), "other"), "%v", files)
			pk, err := attest.LoadPublicKey(pub)
			assert.NilError(t, err)
			s, err := evidence.VerifyRun(context.Background(), out, pk)
			assert.NilError(t, err)
			assert.DeepEqual(t, s.Run.Selection, run.Selection)
			assert.Check(t, is.Contains(stdout.String(), "PARTIAL (--skip other): not run: other\n"))
		})
	}
}

// While a scenario runs, a heartbeat line comes every Heartbeat; every
// progress line ends with a newline, and the heartbeat stops when the
// scenario returns.
func TestRunHeartbeat(t *testing.T) {
	f := fake{started: make(chan struct{}), release: make(chan struct{})}
	cfg, _ := fakeRun(t, f, "hang", "pass")
	var stderr syncBuffer
	cfg.Stderr, cfg.Heartbeat = &stderr, 20*time.Millisecond
	done := make(chan error, 1)
	go func() {
		_, err := qualify.Run(context.Background(), cfg)
		done <- err
	}()
	<-f.started
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(stderr.String(), "qualify: fake still running after 60ms\n") {
		assert.Assert(t, time.Now().Before(deadline), "no third heartbeat: %q", stderr.String())
		time.Sleep(5 * time.Millisecond)
	}
	close(f.release)
	assert.NilError(t, <-done)
	got := stderr.String()
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, stderr.String(), got, "a heartbeat after the run returned")

	assert.Check(t, strings.HasSuffix(got, "\n"), "%q", got)
	line := regexp.MustCompile(`^(\[[12]/2\] fake: running|qualify: fake still running after [0-9]+ms|\[[12]/2\] fake \.\.\. passed \([0-9.]+s\))$`)
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	for _, l := range lines {
		assert.Check(t, line.MatchString(l), "progress line %q", l)
	}
	assert.Check(t, is.Equal(lines[0], "[1/2] fake: running"))
	assert.Check(t, is.Equal(lines[1], "qualify: fake still running after 20ms"))
	assert.Check(t, is.Equal(lines[2], "qualify: fake still running after 40ms"))
	// The quick second scenario gets no heartbeat.
	assert.Check(t, is.Equal(lines[len(lines)-2], "[2/2] fake: running"))
	assert.Check(t, strings.HasPrefix(lines[len(lines)-1], "[2/2] fake ... passed ("))
}
