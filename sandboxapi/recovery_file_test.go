package sandboxapi

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

func TestPersistToFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "record.json")
	persist := PersistToFile(path)
	r := validRecord()
	assert.NilError(t, persist(context.Background(), r))
	got, err := ReadRecoveryRecordFile(path)
	assert.NilError(t, err)
	assert.DeepEqual(t, got, r)

	r.Phase = PhaseStopped
	assert.NilError(t, persist(context.Background(), r))
	got, err = ReadRecoveryRecordFile(path)
	assert.NilError(t, err)
	assert.DeepEqual(t, got, r)

	info, err := os.Stat(path)
	assert.NilError(t, err)
	assert.Check(t, is.Equal(info.Mode().Perm(), fs.FileMode(0o600)))
	left, err := os.ReadDir(dir)
	assert.NilError(t, err)
	assert.Check(t, is.Len(left, 1), "no temporary file is left behind")
}

// A reader polling the file while records are replaced sees a whole
// record every time, never a partial file.
func TestPersistToFileIsAtomicForReaders(t *testing.T) {
	path := filepath.Join(t.TempDir(), "record.json")
	persist := PersistToFile(path)
	small := validRecord()
	small.Resources = small.Resources[:1]
	large := validRecord()
	assert.NilError(t, persist(context.Background(), small))

	var done atomic.Bool
	var wg sync.WaitGroup
	var reads, torn atomic.Int64
	var firstErr error
	var once sync.Once
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !done.Load() {
			got, err := ReadRecoveryRecordFile(path)
			reads.Add(1)
			if err != nil || (len(got.Resources) != 1 && len(got.Resources) != 3) {
				torn.Add(1)
				once.Do(func() { firstErr = err })
			}
		}
	}()
	for i := range 100 {
		r := small
		if i%2 == 0 {
			r = large
		}
		assert.NilError(t, persist(context.Background(), r))
	}
	done.Store(true)
	wg.Wait()
	assert.Check(t, reads.Load() > 0)
	assert.Check(t, is.Equal(torn.Load(), int64(0)), "%d of %d reads saw a partial record: %v", torn.Load(), reads.Load(), firstErr)
}

// A failed write reports the path and leaves no temporary file.
func TestPersistToFileFailure(t *testing.T) {
	// A non-empty directory in the way makes the rename fail.
	dir := t.TempDir()
	blocked := filepath.Join(dir, "record.json")
	assert.NilError(t, os.Mkdir(blocked, 0o700))
	assert.NilError(t, os.WriteFile(filepath.Join(blocked, "x"), nil, 0o600))
	err := PersistToFile(blocked)(context.Background(), validRecord())
	assert.Check(t, is.ErrorContains(err, "persist recovery record to "+blocked))
	left, _ := os.ReadDir(dir)
	assert.Check(t, is.Len(left, 1), "the temporary file is removed")

	err = PersistToFile(filepath.Join(t.TempDir(), "missing", "record.json"))(context.Background(), validRecord())
	assert.Check(t, errors.Is(err, fs.ErrNotExist), "%v", err)
}

func TestReadRecoveryRecordFileRejectsBadContents(t *testing.T) {
	dir := t.TempDir()
	_, err := ReadRecoveryRecordFile(filepath.Join(dir, "missing.json"))
	assert.Check(t, errors.Is(err, fs.ErrNotExist), "%v", err)

	for name, data := range map[string]string{
		"empty":         "",
		"partial":       validRecordJSON[:40],
		"not an object": `[1]`,
		"unknown field": string(mutate(t, validRecordJSON, "extra", 1)),
		"bad phase":     string(mutate(t, validRecordJSON, "phase", "gone")),
	} {
		path := filepath.Join(dir, "record.json")
		assert.NilError(t, os.WriteFile(path, []byte(data), 0o600))
		_, err := ReadRecoveryRecordFile(path)
		var ve *ValidationError
		assert.Check(t, errors.As(err, &ve), "%s: %v", name, err)
	}
}
