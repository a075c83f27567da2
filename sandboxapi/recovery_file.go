package sandboxapi

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// PersistToFile returns a PersistFunc that stores each record as its JSON
// encoding in the file at path, replacing the previous one atomically: the
// record is written to a temporary file in path's directory (mode 0600),
// synced, renamed over path, and the directory is synced. A reader, or a
// controller restarted after a crash, therefore finds the previous record
// or the new one, never a torn file; ReadRecoveryRecordFile reads it back.
// path's directory must exist. ctx is not consulted: the write is local and
// short. Errors are the file system's, wrapped with the path; on an error
// the previous record stays in place.
func PersistToFile(path string) PersistFunc {
	return func(_ context.Context, record RecoveryRecord) error {
		data, err := json.Marshal(record)
		if err != nil {
			return fmt.Errorf("sandboxapi: persist recovery record to %s: %w", path, err)
		}
		if err := writeFileAtomic(path, data); err != nil {
			return fmt.Errorf("sandboxapi: persist recovery record to %s: %w", path, err)
		}
		return nil
	}
}

// ReadRecoveryRecordFile reads the record stored at path (for example by
// PersistToFile) and parses it strictly with ParseRecoveryRecord. A read
// failure is returned as the file system reports it (errors.Is(err,
// fs.ErrNotExist) for a missing file); contents that are not a valid
// record give a *ValidationError.
func ReadRecoveryRecordFile(path string) (RecoveryRecord, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return RecoveryRecord{}, err
	}
	return ParseRecoveryRecord(data)
}

// writeFileAtomic writes data to path through a synced temporary file in
// the same directory and a rename, then syncs the directory.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone after the rename; cleans up on failure
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
