package lanevm

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// The guest's shared folder is mounted with security_model=none, so
// whatever the guest makes there (a symlink to a host file, a FIFO, a
// device, a file of any size) is real on the host, where the supervisor
// runs as root. Every read of the folder goes through shareFS: an
// os.Root, so no path leaves the folder; an lstat of every component, so
// only directories lead to an entry and only regular files and
// directories are taken; an open with O_NONBLOCK, so a FIFO swapped in
// cannot block; and an fstat compared with the lstat, so an entry that
// changed in between is refused. Sizes are bounded, so a guest cannot
// fill the host's memory or disk through the copy.
const (
	// MaxGuestFileBytes bounds one file taken from the guest (bytes).
	// The largest a run writes are its logs: a conformance log with a
	// goroutine dump of every test is a few MB, a report under 1 MB
	// (docs/lanes.md#cost); 64 MiB leaves room for a hundredfold more.
	MaxGuestFileBytes = 64 << 20
	// MaxGuestTreeBytes bounds the files of one copied tree together
	// (bytes): four files at their bound, and far more than the few MB
	// a run's report and logs take.
	MaxGuestTreeBytes = 256 << 20
	// MaxGuestEntries bounds the files and directories of one copied
	// tree: a report holds about a hundred, the job's state/ about
	// twenty; the bound keeps a guest from exhausting the host's inodes.
	MaxGuestEntries = 4096
	// MaxConsoleBytes bounds the copy of the serial console (bytes):
	// qemu writes it on the host, but its content is the guest's. A
	// longer console is copied from its end, after a line saying so (a
	// run's console is about 50 KB).
	MaxConsoleBytes = 16 << 20
)

// UnsafeFileError is an entry of the guest's shared folder that the
// supervisor refuses to read, show or copy: anything but a regular file
// or a directory (a symlink, a FIFO, a socket, a device), or an entry
// that changed between its lstat and its open. The folder is shared with
// security_model=none, so a symlink the guest makes is one on the host,
// where the supervisor runs as root.
type UnsafeFileError struct {
	// Path is the entry's path on the host.
	Path string
	// Mode is its type bits as lstat(2) saw them.
	Mode fs.FileMode
}

func (e *UnsafeFileError) Error() string {
	return fmt.Sprintf("refusing %s: the guest left a %s there, and only regular files and directories are read from its shared folder", e.Path, typeName(e.Mode))
}

func typeName(m fs.FileMode) string {
	switch t := m.Type(); {
	case t&fs.ModeSymlink != 0:
		return "symlink"
	case t&fs.ModeNamedPipe != 0:
		return "FIFO"
	case t&fs.ModeSocket != 0:
		return "socket"
	case t&fs.ModeCharDevice != 0:
		return "character device"
	case t&fs.ModeDevice != 0:
		return "block device"
	case t == 0:
		return "regular file that changed while it was opened"
	}
	return "file of type " + m.Type().String()
}

// TooLargeError is a file or tree of the guest's shared folder larger
// than the supervisor takes (MaxGuestFileBytes, MaxGuestTreeBytes,
// MaxGuestEntries); nothing of it was kept.
type TooLargeError struct {
	// Path is the file's or tree's path on the host.
	Path string
	// Limit is the bound it passed, in Unit.
	Limit int64
	// Unit is "bytes" or "entries".
	Unit string
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("refusing %s: the guest left more than %d %s there", e.Path, e.Limit, e.Unit)
}

// shareFS reads the guest's shared folder as described above.
type shareFS struct {
	root *os.Root
	// dir is the folder's path on the host, for errors.
	dir string
}

func openShare(dir string) (*shareFS, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &shareFS{root: root, dir: dir}, nil
}

func (s *shareFS) Close() error { return s.root.Close() }

// hostPath is rel's path on the host.
func (s *shareFS) hostPath(rel string) string { return filepath.Join(s.dir, filepath.FromSlash(rel)) }

// lstat returns rel's lstat after checking that each directory leading
// to it is a directory, not a symlink or anything else.
func (s *shareFS) lstat(rel string) (fs.FileInfo, error) {
	parts := strings.Split(path.Clean(rel), "/")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		info, err := s.root.Lstat(p)
		if err != nil {
			return nil, err
		}
		if i == len(parts)-1 {
			return info, nil
		}
		if !info.IsDir() {
			return nil, &UnsafeFileError{Path: s.hostPath(p), Mode: info.Mode()}
		}
	}
	panic("unreachable")
}

// open opens rel, which lstat found as want (a regular file or a
// directory), and checks that what it opened is that same entry.
func (s *shareFS) open(rel string, want fs.FileInfo) (*os.File, error) {
	f, err := s.root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	got, err := f.Stat()
	if err == nil && (!os.SameFile(want, got) || got.Mode().Type() != want.Mode().Type()) {
		err = &UnsafeFileError{Path: s.hostPath(rel), Mode: got.Mode()}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// openFile opens rel if it is a regular file; anything else is an
// *UnsafeFileError.
func (s *shareFS) openFile(rel string) (*os.File, fs.FileInfo, error) {
	info, err := s.lstat(rel)
	if err != nil {
		return nil, nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, nil, &UnsafeFileError{Path: s.hostPath(rel), Mode: info.Mode()}
	}
	f, err := s.open(rel, info)
	return f, info, err
}

// isFile reports whether rel is a regular file.
func (s *shareFS) isFile(rel string) bool {
	info, err := s.lstat(rel)
	return err == nil && info.Mode().IsRegular()
}

// isDir reports whether rel is a directory.
func (s *shareFS) isDir(rel string) bool {
	info, err := s.lstat(rel)
	return err == nil && info.IsDir()
}

// readFile reads rel, a regular file of at most limit bytes; a longer
// one is a *TooLargeError.
func (s *shareFS) readFile(rel string, limit int64) ([]byte, error) {
	data, err := s.readHead(rel, limit+1)
	if err == nil && int64(len(data)) > limit {
		return nil, &TooLargeError{Path: s.hostPath(rel), Limit: limit, Unit: "bytes"}
	}
	return data, err
}

// readHead reads at most the first n bytes of rel, a regular file.
func (s *shareFS) readHead(rel string, n int64) ([]byte, error) {
	f, _, err := s.openFile(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, n))
}

// treeCopy is what one copyTree may still take.
type treeCopy struct {
	top     string
	bytes   int64
	entries int
}

// copyTree copies what the directory rel holds into dst, an empty
// directory: directories as 0755 and regular files as 0644 (no guest mode
// bits, setuid among them, reach the host), within MaxGuestFileBytes a
// file and MaxGuestTreeBytes and MaxGuestEntries in all. Anything but a
// regular file or a directory is an *UnsafeFileError, a bound passed a
// *TooLargeError; dst may then hold part of the tree, for the caller to
// remove.
func (s *shareFS) copyTree(rel, dst string) error {
	info, err := s.lstat(rel)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return &UnsafeFileError{Path: s.hostPath(rel), Mode: info.Mode()}
	}
	c := &treeCopy{top: rel, bytes: MaxGuestTreeBytes, entries: MaxGuestEntries}
	return s.copyDir(c, rel, info, dst)
}

func (s *shareFS) copyDir(c *treeCopy, rel string, info fs.FileInfo, dst string) error {
	d, err := s.open(rel, info)
	if err != nil {
		return err
	}
	defer d.Close()
	for {
		entries, err := d.ReadDir(256)
		for _, e := range entries {
			if err := s.copyEntry(c, path.Join(rel, e.Name()), filepath.Join(dst, e.Name())); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (s *shareFS) copyEntry(c *treeCopy, rel, dst string) error {
	if c.entries--; c.entries < 0 {
		return &TooLargeError{Path: s.hostPath(c.top), Limit: MaxGuestEntries, Unit: "entries"}
	}
	info, err := s.root.Lstat(rel)
	switch {
	case err != nil:
		return err
	case info.IsDir():
		if err := os.Mkdir(dst, 0o755); err != nil {
			return err
		}
		return s.copyDir(c, rel, info, dst)
	case !info.Mode().IsRegular():
		return &UnsafeFileError{Path: s.hostPath(rel), Mode: info.Mode()}
	case info.Size() > MaxGuestFileBytes:
		return &TooLargeError{Path: s.hostPath(rel), Limit: MaxGuestFileBytes, Unit: "bytes"}
	}
	src, err := s.open(rel, info)
	if err != nil {
		return err
	}
	defer src.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	// The file may grow after its lstat: read one byte past its bound.
	limit := min(MaxGuestFileBytes, c.bytes)
	n, err := io.Copy(out, io.LimitReader(src, limit+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	c.bytes -= n
	switch {
	case err != nil:
		return err
	case n > MaxGuestFileBytes:
		return &TooLargeError{Path: s.hostPath(rel), Limit: MaxGuestFileBytes, Unit: "bytes"}
	case c.bytes < 0:
		return &TooLargeError{Path: s.hostPath(c.top), Limit: MaxGuestTreeBytes, Unit: "bytes"}
	}
	return nil
}
