package sandboxapi

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

func TestParseRelativePath(t *testing.T) {
	for _, ok := range []string{"a", "a/b", "données/日本.txt", strings.Repeat("n", 255), strings.Repeat("d/", 200) + "x"} {
		got, err := ParseRelativePath(ok)
		assert.Check(t, err, ok)
		assert.Check(t, is.Equal(got, ok))
	}
	for _, bad := range []string{"", "/a", "a/", "a//b", ".", "./a", "a/..", "../a", "a\x00b", "\xff", strings.Repeat("n", 256), strings.Repeat("a/", 2049)} {
		_, err := ParseRelativePath(bad)
		var ve *ValidationError
		assert.Check(t, errors.As(err, &ve), "%q: %v", bad, err)
		if ve != nil {
			assert.Check(t, is.Equal(ve.Issues[0].PathString(), "path"))
		}
	}
}

func TestSelectionAndEntryValidate(t *testing.T) {
	assert.NilError(t, Whole().Validate())
	assert.NilError(t, Subtree("artifacts").Validate())
	assert.ErrorContains(t, File("../x").Validate(), "selection.path")
	assert.ErrorContains(t, Selection{Kind: "glob"}.Validate(), "selection.kind")
	assert.ErrorContains(t, Entry{Path: "a", Kind: EntryFile, Size: MaxTransferFileBytes + 1}.Validate("e"), "e.size")
	assert.ErrorContains(t, Entry{Path: "a", Kind: EntryFile, Mode: 0o4755}.Validate("e"), "e.mode")
	assert.ErrorContains(t, TransferOptions{MaxEntries: -1}.Validate(), "options.maxEntries")
}

func collectSource(t *testing.T, src TreeSource) map[string]Entry {
	t.Helper()
	got := map[string]Entry{}
	for {
		e, body, err := src.Next()
		if err == io.EOF {
			return got
		}
		assert.NilError(t, err)
		if body != nil {
			b, err := io.ReadAll(body)
			assert.NilError(t, err)
			assert.Equal(t, int64(len(b)), e.Size)
		}
		got[e.Path] = e
	}
}

func TestDirSourceAndSinkRoundTrip(t *testing.T) {
	src := t.TempDir()
	assert.NilError(t, os.MkdirAll(filepath.Join(src, "a", "empty"), 0o755))
	assert.NilError(t, os.WriteFile(filepath.Join(src, "a", "x.sh"), []byte("#!/bin/sh\n"), 0o755))
	assert.NilError(t, os.WriteFile(filepath.Join(src, "zero"), nil, 0o600))
	assert.NilError(t, os.Chmod(filepath.Join(src, "a"), 0o550))
	t.Cleanup(func() { os.Chmod(filepath.Join(src, "a"), 0o755) })

	got := collectSource(t, DirSource(src))
	assert.DeepEqual(t, got, map[string]Entry{
		"a":       {Path: "a", Kind: EntryDir, Mode: 0o550},
		"a/empty": {Path: "a/empty", Kind: EntryDir, Mode: 0o755},
		"a/x.sh":  {Path: "a/x.sh", Kind: EntryFile, Mode: 0o755, Size: 10},
		"zero":    {Path: "zero", Kind: EntryFile, Mode: 0o600},
	})

	dest := filepath.Join(t.TempDir(), "out")
	sink := DirSink(dest)
	assert.NilError(t, sink.Begin())
	s := DirSource(src)
	for {
		e, body, err := s.Next()
		if err == io.EOF {
			break
		}
		assert.NilError(t, err)
		assert.NilError(t, sink.Entry(e, body))
	}
	_, err := os.Stat(dest)
	assert.Check(t, errors.Is(err, os.ErrNotExist), "bytes stay provisional until Commit")
	assert.NilError(t, sink.Commit())
	st, err := os.Stat(filepath.Join(dest, "a"))
	assert.NilError(t, err)
	assert.Equal(t, st.Mode().Perm(), os.FileMode(0o550))
	b, err := os.ReadFile(filepath.Join(dest, "a", "x.sh"))
	assert.NilError(t, err)
	assert.Equal(t, string(b), "#!/bin/sh\n")
	os.Chmod(filepath.Join(dest, "a"), 0o755)
}

func TestDirSinkDiscardLeavesNothing(t *testing.T) {
	parent := t.TempDir()
	sink := DirSink(filepath.Join(parent, "out"))
	assert.NilError(t, sink.Begin())
	assert.NilError(t, sink.Entry(Entry{Path: "d", Kind: EntryDir, Mode: 0o500}, nil))
	assert.NilError(t, sink.Entry(Entry{Path: "d/f", Kind: EntryFile, Mode: 0o400, Size: 3}, strings.NewReader("abc")))
	assert.NilError(t, sink.Discard())
	left, err := os.ReadDir(parent)
	assert.NilError(t, err)
	assert.Equal(t, len(left), 0)
}

func TestDirSourceRejectsLinksAndSpecialFiles(t *testing.T) {
	src := t.TempDir()
	assert.NilError(t, os.Mkdir(filepath.Join(src, "d"), 0o755))
	assert.NilError(t, os.Symlink("/", filepath.Join(src, "d", "escape")))
	_, _, err := nextUntilError(DirSource(src))
	assert.ErrorContains(t, err, "escape")
	assert.ErrorContains(t, err, "links are never followed")

	link := filepath.Join(t.TempDir(), "link")
	assert.NilError(t, os.Symlink(src, link))
	_, _, err = nextUntilError(DirSource(link))
	assert.Check(t, err != nil && err != io.EOF, "the root itself is not followed either: %v", err)
}

func nextUntilError(src TreeSource) (Entry, io.Reader, error) {
	for {
		e, r, err := src.Next()
		if err != nil {
			return e, r, err
		}
	}
}
