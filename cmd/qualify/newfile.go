package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// writeNewFile writes data to path, which must not exist, so that path
// holds either nothing or all of data: the bytes go to a temporary file
// in path's directory, are synced, and are then hard-linked to path (a
// link, unlike a rename, fails when path exists, so an existing file is
// never replaced). The temporary file is removed in every case. Our own
// rather than a library's: the refusal to overwrite is the point, and
// the atomic-rename packages replace the target.
func writeNewFile(path string, data []byte, mode os.FileMode) (err error) {
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("%s exists: refusing to overwrite it", path)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".partial-*")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, os.Remove(tmp.Name())) }()
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
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
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%s exists: refusing to overwrite it", path)
		}
		return err
	}
	return nil
}
