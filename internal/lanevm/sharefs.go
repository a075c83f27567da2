package lanevm

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The guest's shared folder is mounted with security_model=none, so
// whatever the guest makes there (a symlink to a host file, a FIFO, a
// device, a file of any size) is real on the host, where the supervisor
// runs as root, and the guest can swap one entry for another between any
// two of the supervisor's system calls. Every read of the folder goes
// through shareFS, which never opens a guest-controlled name for reading:
// it looks each name up with openat2(2) as an O_PATH descriptor (which
// runs no device's or FIFO's open), beneath the folder's directory
// descriptor, through no symlink and past no mount's magic link
// (RESOLVE_BENEATH, RESOLVE_NO_SYMLINKS, RESOLVE_NO_MAGICLINKS, and
// O_NOFOLLOW for the last component); it fstats that descriptor and
// takes only a regular file or a directory; only then does it open that
// very inode for reading, through /proc/self/fd (O_RDONLY, O_NOCTTY,
// O_NONBLOCK), and fstat again to check it is the same inode. A device
// or FIFO the guest races in is thus never opened; a swap is refused.
// Sizes are bounded, so a guest cannot fill the host's memory or disk
// through the copy. Linux only, as the lanes are (openat2: Linux 5.6).
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

// UnsafeFileError is an entry of the guest's shared folder (or of the
// host's own host/ directory, Host) that the supervisor refuses to read,
// show or copy: anything but a regular file or a directory (a symlink, a
// FIFO, a socket, a device), a directory where a regular file is read or
// the reverse, anything but a directory on the way to an entry, or an
// entry swapped for another while it was opened. The folder is shared
// with security_model=none, so a symlink the guest makes is one on the
// host, where the supervisor runs as root.
type UnsafeFileError struct {
	// Path is the entry's path on the host.
	Path string
	// Mode is its type bits as fstat(2) saw them.
	Mode fs.FileMode
	// Leads, when not empty, is the path (under the folder) the entry
	// was on the way to: the entry should have been a directory.
	Leads string
	// Want is what was to be read there: "regular file", "directory",
	// or empty for either (a copied tree's entries).
	Want string
	// Swapped: the entry was a regular file or directory when looked up
	// and another inode when opened, or a directory on its way was not
	// one during the lookup and was one again after it; Mode is then
	// the type looked up, or zero.
	Swapped bool
	// Host: the entry is in the host's own directory, not the guest's.
	Host bool
}

func (e *UnsafeFileError) Error() string {
	what := "the guest left a " + typeName(e.Mode) + " there"
	if e.Host {
		what = "it is a " + typeName(e.Mode)
	}
	var why string
	switch {
	case e.Swapped && e.Host:
		return fmt.Sprintf("refusing %q: it was replaced while it was opened", e.Path)
	case e.Swapped:
		return fmt.Sprintf("refusing %q: the guest replaced it while it was opened", e.Path)
	case e.Leads != "":
		why = fmt.Sprintf(", where a directory leads to %q", e.Leads)
	case e.Want != "" && (e.Mode.IsDir() || e.Mode.IsRegular()):
		why = ", where a " + e.Want + " is read"
	case e.Host:
		why = ", and only regular files and directories are copied from the host's work directory"
	default:
		why = ", and only regular files and directories are read from its shared folder"
	}
	return fmt.Sprintf("refusing %q: %s%s", e.Path, what, why)
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
	case t == fs.ModeDir:
		return "directory"
	case t == 0:
		return "regular file"
	}
	return "file of type " + m.Type().String()
}

// TooLargeError is a file or tree of the guest's shared folder (or of the
// host's host/ directory, Host) larger than the supervisor takes
// (MaxGuestFileBytes, MaxGuestTreeBytes, MaxGuestEntries); nothing of it
// was kept.
type TooLargeError struct {
	// Path is the file's or tree's path on the host.
	Path string
	// Limit is the bound it passed, in Unit.
	Limit int64
	// Unit is "bytes" or "entries".
	Unit string
	// Host: the file is in the host's own directory, not the guest's.
	Host bool
}

func (e *TooLargeError) Error() string {
	who := "the guest left"
	if e.Host {
		who = "it holds"
	}
	return fmt.Sprintf("refusing %q: %s more than %d %s there", e.Path, who, e.Limit, e.Unit)
}

// kind is what a lookup takes: a regular file, a directory, or either.
type kind int

const (
	regularFile kind = iota
	directory
	either
)

func (k kind) String() string {
	switch k {
	case regularFile:
		return "regular file"
	case directory:
		return "directory"
	}
	return ""
}

// shareFS reads the guest's shared folder as described above.
type shareFS struct {
	// root writes the job's inputs into the folder before the guest
	// boots (prepare); nothing is read through it.
	root *os.Root
	// dirfd is the folder, opened O_PATH: the base of every lookup.
	dirfd int
	// dir is the folder's path on the host, for errors.
	dir string
	// host: the directory is the host's own (the work directory's
	// host/), so errors do not blame the guest.
	host bool
}

func openShare(dir string) (*shareFS, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &shareFS{root: root, dirfd: fd, dir: dir}, nil
}

func (s *shareFS) Close() error {
	unix.Close(s.dirfd)
	return s.root.Close()
}

// hostPath is rel's path on the host.
func (s *shareFS) hostPath(rel string) string { return filepath.Join(s.dir, filepath.FromSlash(rel)) }

func (s *shareFS) unsafe(rel string, mode fs.FileMode, want kind) error {
	return &UnsafeFileError{Path: s.hostPath(rel), Mode: mode, Want: want.String(), Host: s.host}
}

func (s *shareFS) tooLarge(rel string, limit int64, unit string) error {
	return &TooLargeError{Path: s.hostPath(rel), Limit: limit, Unit: unit, Host: s.host}
}

// resolveFlags keep a lookup beneath its directory and off every
// symlink; a last component that is a symlink is returned as itself
// (O_PATH|O_NOFOLLOW), for fstat to refuse.
const resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// lookup returns an O_PATH descriptor of name beneath the directory at
// (the folder's, or one lookup and reopen gave) and its fstat; rel is
// name's path under the folder, for errors. An O_PATH open runs no
// file's open: a device or FIFO there is not opened. Not found is an
// error matching os.ErrNotExist; a symlink or non-directory on the way,
// an *UnsafeFileError.
func (s *shareFS) lookup(at int, name, rel string) (int, *unix.Stat_t, error) {
	how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: resolveFlags}
	var fd int
	var err error
	// EAGAIN: a rename elsewhere in the folder raced the lookup.
	for range 16 {
		if fd, err = unix.Openat2(at, name, how); err != unix.EAGAIN && err != unix.EINTR {
			break
		}
	}
	switch err {
	case nil:
	case unix.ELOOP, unix.ENOTDIR, unix.EXDEV:
		return -1, nil, s.onTheWay(at, name, rel)
	default:
		return -1, nil, &fs.PathError{Op: "open", Path: s.hostPath(rel), Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, nil, &fs.PathError{Op: "fstat", Path: s.hostPath(rel), Err: err}
	}
	return fd, &st, nil
}

// onTheWay names what stopped a lookup of name (ELOOP, ENOTDIR, EXDEV):
// the first component on the way that is not a directory, looked up the
// same way (each prefix as O_PATH, its last component not followed).
func (s *shareFS) onTheWay(at int, name, rel string) error {
	base := strings.TrimSuffix(rel, name)
	parts := strings.Split(name, "/")
	for i := range len(parts) - 1 {
		prefix := strings.Join(parts[:i+1], "/")
		fd, st, err := s.lookup(at, prefix, base+prefix)
		if err != nil {
			return err
		}
		unix.Close(fd)
		if mode := fileMode(st); !mode.IsDir() {
			return &UnsafeFileError{Path: s.hostPath(base + prefix), Mode: mode, Leads: rel, Host: s.host}
		}
	}
	// Each directory on the way is one again: one was swapped back.
	return &UnsafeFileError{Path: s.hostPath(rel), Swapped: true, Host: s.host}
}

// open looks name up beneath at (lookup), takes it only if it is want,
// and opens that inode for reading through /proc/self/fd, never by its
// name again: O_RDONLY, O_NOCTTY and O_NONBLOCK, and O_DIRECTORY for a
// directory. A second fstat checks the opened file is the inode looked
// up. The file's name is its host path.
func (s *shareFS) open(at int, name, rel string, want kind) (*os.File, *unix.Stat_t, error) {
	pfd, st, err := s.lookup(at, name, rel)
	if err != nil {
		return nil, nil, err
	}
	defer unix.Close(pfd)
	mode := fileMode(st)
	switch {
	case mode.IsRegular() && want != directory, mode.IsDir() && want != regularFile:
	default:
		return nil, nil, s.unsafe(rel, mode, want)
	}
	flags := unix.O_RDONLY | unix.O_NOCTTY | unix.O_NONBLOCK | unix.O_CLOEXEC
	if mode.IsDir() {
		flags |= unix.O_DIRECTORY
	}
	var fd int
	for {
		if fd, err = unix.Open("/proc/self/fd/"+strconv.Itoa(pfd), flags, 0); err != unix.EINTR {
			break
		}
	}
	if err != nil {
		// Not %w: the file was there; an error of the reopen (no /proc)
		// must not read as its absence.
		return nil, nil, fmt.Errorf("opening %q through /proc/self/fd: %v", s.hostPath(rel), err)
	}
	var got unix.Stat_t
	if err := unix.Fstat(fd, &got); err != nil || got.Dev != st.Dev || got.Ino != st.Ino || got.Mode&unix.S_IFMT != st.Mode&unix.S_IFMT {
		unix.Close(fd)
		if err != nil {
			return nil, nil, &fs.PathError{Op: "fstat", Path: s.hostPath(rel), Err: err}
		}
		return nil, nil, &UnsafeFileError{Path: s.hostPath(rel), Mode: mode, Swapped: true, Host: s.host}
	}
	return os.NewFile(uintptr(fd), s.hostPath(rel)), st, nil
}

// fileMode is st's type as fs.FileMode type bits.
func fileMode(st *unix.Stat_t) fs.FileMode {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return 0
	case unix.S_IFDIR:
		return fs.ModeDir
	case unix.S_IFLNK:
		return fs.ModeSymlink
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFSOCK:
		return fs.ModeSocket
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		return fs.ModeDevice
	}
	return fs.ModeIrregular
}

// stat returns the type of rel, looked up without opening it (lookup).
func (s *shareFS) stat(rel string) (fs.FileMode, error) {
	rel = path.Clean(rel)
	fd, st, err := s.lookup(s.dirfd, rel, rel)
	if err != nil {
		return 0, err
	}
	unix.Close(fd)
	return fileMode(st), nil
}

// openFile opens rel if it is a regular file; anything else is an
// *UnsafeFileError.
func (s *shareFS) openFile(rel string) (*os.File, error) {
	rel = path.Clean(rel)
	f, _, err := s.open(s.dirfd, rel, rel, regularFile)
	return f, err
}

// isFile reports whether rel is a regular file.
func (s *shareFS) isFile(rel string) bool {
	mode, err := s.stat(rel)
	return err == nil && mode.IsRegular()
}

// isDir reports whether rel is a directory.
func (s *shareFS) isDir(rel string) bool {
	mode, err := s.stat(rel)
	return err == nil && mode.IsDir()
}

// readFile reads rel, a regular file of at most limit bytes; a longer
// one is a *TooLargeError.
func (s *shareFS) readFile(rel string, limit int64) ([]byte, error) {
	data, err := s.readHead(rel, limit+1)
	if err == nil && int64(len(data)) > limit {
		return nil, s.tooLarge(rel, limit, "bytes")
	}
	return data, err
}

// readHead reads at most the first n bytes of rel, a regular file.
func (s *shareFS) readHead(rel string, n int64) ([]byte, error) {
	f, err := s.openFile(rel)
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
// file and MaxGuestTreeBytes and MaxGuestEntries in all. Each entry is
// looked up beneath its directory's descriptor (open), so a directory
// renamed or swapped during the copy cannot lead out of the folder.
// Anything but a regular file or a directory is an *UnsafeFileError, a
// bound passed a *TooLargeError; dst may then hold part of the tree, for
// the caller to remove.
func (s *shareFS) copyTree(rel, dst string) error {
	rel = path.Clean(rel)
	d, _, err := s.open(s.dirfd, rel, rel, directory)
	if err != nil {
		return err
	}
	defer d.Close()
	c := &treeCopy{top: rel, bytes: MaxGuestTreeBytes, entries: MaxGuestEntries}
	return s.copyDir(c, d, rel, dst)
}

func (s *shareFS) copyDir(c *treeCopy, d *os.File, rel, dst string) error {
	for {
		entries, err := d.ReadDir(256)
		for _, e := range entries {
			if err := s.copyEntry(c, int(d.Fd()), e.Name(), path.Join(rel, e.Name()), filepath.Join(dst, e.Name())); err != nil {
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

func (s *shareFS) copyEntry(c *treeCopy, at int, name, rel, dst string) error {
	if c.entries--; c.entries < 0 {
		return s.tooLarge(c.top, MaxGuestEntries, "entries")
	}
	src, st, err := s.open(at, name, rel, either)
	if err != nil {
		return err
	}
	defer src.Close()
	if fileMode(st).IsDir() {
		if err := os.Mkdir(dst, 0o755); err != nil {
			return err
		}
		return s.copyDir(c, src, rel, dst)
	}
	if st.Size > MaxGuestFileBytes {
		return s.tooLarge(rel, MaxGuestFileBytes, "bytes")
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	// The file may grow after its fstat: read one byte past its bound.
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
		return s.tooLarge(rel, MaxGuestFileBytes, "bytes")
	case c.bytes < 0:
		return s.tooLarge(c.top, MaxGuestTreeBytes, "bytes")
	}
	return nil
}
