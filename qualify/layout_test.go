package qualify_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/qualify"
	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/evidence"
)

// A signed run with a scenario past its time limit and one that leaves a
// file of its own writes every entry of evidence.Layout, and nothing the
// layout has no place for: an entry added to the layout without a writer,
// or a writer of a file the layout lacks, fails here. Both halves are shown
// failing on purpose below.
func TestRunWritesExactlyTheLayout(t *testing.T) {
	f := fake{started: make(chan struct{})}
	cfg, out := fakeRun(t, f, "block", "artefact", "pass")
	cfg.ScenarioTimeout = 100 * time.Millisecond
	keys := t.TempDir()
	_, pubPath, err := attest.GenerateKey(keys)
	assert.NilError(t, err)
	cfg.SigningKey, err = attest.LoadPrivateKey(filepath.Join(keys, attest.PrivateKeyFile))
	assert.NilError(t, err)
	_, err = qualify.Run(context.Background(), cfg)
	assert.NilError(t, err)
	pub, err := attest.LoadPublicKey(pubPath)
	assert.NilError(t, err)
	_, err = evidence.VerifyRun(context.Background(), out, pub)
	assert.NilError(t, err)

	files := reportFiles(t, out)
	assert.DeepEqual(t, evidence.Layout.Problems(files), []string(nil))

	// An entry nothing writes.
	unwritten := append(slices.Clone(evidence.Layout), evidence.ReportFile{Name: "provenance.json", MediaType: "application/json", Required: true, Signed: true})
	assert.DeepEqual(t, unwritten.Problems(files), []string{"provenance.json: in the report layout, but no report file belongs to it"})
	// A file the layout has no place for.
	assert.DeepEqual(t, evidence.Layout.Problems(append(files, "notes.txt")), []string{"notes.txt: a file the report layout has no place for"})
}

// reportFiles lists the files (not directories) under out, slash-separated.
func reportFiles(t *testing.T, out string) []string {
	t.Helper()
	var files []string
	for _, f := range listFiles(t, out) {
		if f != "./" && !strings.HasSuffix(f, "/") {
			files = append(files, filepath.ToSlash(f))
		}
	}
	_, err := os.Stat(filepath.Join(out, attest.EnvelopeFile))
	assert.NilError(t, err)
	return files
}
