package main

import (
	"os"
	"path/filepath"
	"testing"

	"gotest.tools/v3/assert"
)

// writeNewFile leaves the whole file or nothing, never replaces one, and
// leaves no temporary file either way.
func TestWriteNewFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "gate.html")
	assert.NilError(t, writeNewFile(p, []byte("page"), 0o644))
	data, err := os.ReadFile(p)
	assert.NilError(t, err)
	assert.Equal(t, string(data), "page")
	fi, err := os.Stat(p)
	assert.NilError(t, err)
	assert.Equal(t, fi.Mode().Perm(), os.FileMode(0o644))

	assert.ErrorContains(t, writeNewFile(p, []byte("other"), 0o644), "exists: refusing to overwrite it")
	data, err = os.ReadFile(p)
	assert.NilError(t, err)
	assert.Equal(t, string(data), "page")

	// A directory that cannot be written to: nothing appears.
	assert.Assert(t, writeNewFile(filepath.Join(dir, "missing", "x.html"), []byte("x"), 0o644) != nil)
	entries, err := os.ReadDir(dir)
	assert.NilError(t, err)
	assert.Equal(t, len(entries), 1, "only the page: %v", entries)
}
