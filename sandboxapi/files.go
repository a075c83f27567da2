package sandboxapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"
)

// Workspace transfer contract (docs/contract.md#workspace-files).

// MaxTransferFileBytes is the largest regular file a transfer carries:
// 8 GiB - 1, the largest size an 11-digit octal tar size field holds. The
// archive representation has no base-256 or PAX size override; this format
// bound is separate from the caller's optional TransferOptions quotas.
const MaxTransferFileBytes = 8<<30 - 1

// MaxNameBytes bounds one path component (Linux NAME_MAX).
const MaxNameBytes = 255

// EntryKind is the kind of a transferred entry: only regular files and
// directories are transferred; links and special files are rejected.
type EntryKind string

// Entry kinds.
const (
	EntryFile EntryKind = "file"
	EntryDir  EntryKind = "dir"
)

// Entry describes one file or directory of a workspace tree.
type Entry struct {
	// Path is workspace-relative, canonical and '/'-separated
	// (ParseRelativePath), for example "artifacts/report.txt".
	Path string
	// Kind is EntryFile or EntryDir.
	Kind EntryKind
	// Mode holds the permission bits (fs.ModePerm). Set-user-ID, set-group-ID
	// and sticky bits are never transferred: exported bytes land with the
	// controller's authority.
	Mode fs.FileMode
	// Size is the exact byte length of a file's body, 0..MaxTransferFileBytes;
	// 0 for a directory.
	Size int64
}

// Validate checks e's path, kind, mode and size. Issues name the field under
// path, for example ["entries", "3", "size"].
func (e Entry) Validate(path ...string) error {
	var issues []Issue
	if _, err := ParseRelativePath(e.Path); err != nil {
		issues = append(issues, Issue{Path: at(path, "path"), Message: pathMessage(err)})
	}
	switch e.Kind {
	case EntryFile:
		if e.Size < 0 || e.Size > MaxTransferFileBytes {
			issues = append(issues, Issue{Path: at(path, "size"), Message: fmt.Sprintf("%d bytes is outside 0..%d (8 GiB - 1)", e.Size, int64(MaxTransferFileBytes))})
		}
	case EntryDir:
		if e.Size != 0 {
			issues = append(issues, Issue{Path: at(path, "size"), Message: "a directory has size 0"})
		}
	default:
		issues = append(issues, Issue{Path: at(path, "kind"), Message: fmt.Sprintf("%q is not file or dir", e.Kind)})
	}
	if e.Mode&^fs.ModePerm != 0 {
		issues = append(issues, Issue{Path: at(path, "mode"), Message: fmt.Sprintf("%v has bits beyond the permission bits", e.Mode)})
	}
	if len(issues) > 0 {
		return &ValidationError{Issues: issues}
	}
	return nil
}

func pathMessage(err error) string {
	var ve *ValidationError
	if errors.As(err, &ve) && len(ve.Issues) > 0 {
		return ve.Issues[0].Message
	}
	return err.Error()
}

// ParseRelativePath checks that p is a canonical workspace-relative path and
// returns it: non-empty valid UTF-8 without NUL, at most MaxPathBytes, no
// leading or trailing '/', no empty, "." or ".." component, each component
// at most MaxNameBytes. A violation is a *ValidationError whose issue path is
// ["path"] and whose message quotes p.
func ParseRelativePath(p string) (string, error) {
	bad := func(format string, args ...any) (string, error) {
		return "", &ValidationError{Issues: []Issue{{Path: []string{"path"}, Message: fmt.Sprintf("%q: ", p) + fmt.Sprintf(format, args...)}}}
	}
	switch {
	case p == "":
		return bad("a workspace-relative path is required")
	case len(p) > MaxPathBytes:
		return bad("%d bytes exceed %d", len(p), MaxPathBytes)
	case !utf8.ValidString(p):
		return bad("not valid UTF-8")
	case strings.IndexByte(p, 0) >= 0:
		return bad("contains NUL")
	case strings.HasPrefix(p, "/"):
		return bad("absolute paths are not workspace-relative")
	}
	for comp := range strings.SplitSeq(p, "/") {
		switch {
		case comp == "":
			return bad("empty component (leading, trailing or doubled '/')")
		case comp == "." || comp == "..":
			return bad("%q component is not canonical", comp)
		case len(comp) > MaxNameBytes:
			return bad("component of %d bytes exceeds %d", len(comp), MaxNameBytes)
		}
	}
	return p, nil
}

// TreeSource yields the entries of a tree to import, in pre-order: a
// directory before its descendants, and every entry's parent is either the
// workspace root or a directory yielded earlier whose descendants are still
// being yielded (the order of a depth-first walk such as fs.WalkDir). This
// keeps the import's bookkeeping proportional to tree depth.
type TreeSource interface {
	// Next returns the next entry and, for a file, a reader of exactly
	// Entry.Size bytes, valid until the following Next call. It returns
	// io.EOF after the last entry.
	Next() (Entry, io.Reader, error)
}

// TreeSink receives an exported tree. Bytes it receives are provisional:
// they become final only at Commit, which the backend calls once after the
// whole export validated; on any failure the backend calls Discard instead.
type TreeSink interface {
	// Begin is called once before the first entry.
	Begin() error
	// Entry receives one entry in pre-order (ancestors first). For a file,
	// body yields exactly e.Size bytes; a read error means the export is
	// failing and the sink should return it.
	Entry(e Entry, body io.Reader) error
	// Commit makes everything received final.
	Commit() error
	// Discard drops everything received since Begin. It may be called
	// without a preceding Begin.
	Discard() error
}

// SelectionKind names what an export selects.
type SelectionKind string

// Selection kinds (docs/contract.md#workspace-files).
const (
	SelectWhole   SelectionKind = "whole"
	SelectFile    SelectionKind = "file"
	SelectSubtree SelectionKind = "subtree"
)

// Selection is what ExportTree exports: the whole workspace, one exact
// regular file, or one directory with its descendants. Paths stay
// workspace-relative in the sink: Subtree("artifacts") yields "artifacts",
// "artifacts/a.txt", ...
type Selection struct {
	Kind SelectionKind
	// Path is the workspace-relative path of a file or subtree selection.
	Path string
}

// Whole selects the whole workspace.
func Whole() Selection { return Selection{Kind: SelectWhole} }

// File selects one regular file.
func File(path string) Selection { return Selection{Kind: SelectFile, Path: path} }

// Subtree selects one directory and its descendants.
func Subtree(path string) Selection { return Selection{Kind: SelectSubtree, Path: path} }

// Validate checks the selection; issues name ["selection", ...].
func (s Selection) Validate() error {
	switch s.Kind {
	case SelectWhole:
		if s.Path != "" {
			return &ValidationError{Issues: []Issue{{Path: []string{"selection", "path"}, Message: "a whole-workspace selection has no path"}}}
		}
		return nil
	case SelectFile, SelectSubtree:
		if _, err := ParseRelativePath(s.Path); err != nil {
			return &ValidationError{Issues: []Issue{{Path: []string{"selection", "path"}, Message: pathMessage(err)}}}
		}
		return nil
	}
	return &ValidationError{Issues: []Issue{{Path: []string{"selection", "kind"}, Message: fmt.Sprintf("%q is not whole, file or subtree", s.Kind)}}}
}

// TransferOptions are a transfer's optional bounds
// (docs/contract.md#workspace-files). The zero value sets none: there is no
// default transfer lifetime and no universal count or byte ceiling.
type TransferOptions struct {
	// Deadline, if non-zero, ends the transfer with deadline_exceeded.
	Deadline time.Time
	// MaxEntries, if positive, bounds the number of entries (files and
	// directories); exceeding it is a transfer_limit OperationError.
	MaxEntries int64
	// MaxBytes, if positive, bounds the sum of file sizes in bytes;
	// exceeding it is a transfer_limit OperationError.
	MaxBytes int64
}

// Validate checks that quotas are not negative.
func (o TransferOptions) Validate() error {
	var issues []Issue
	if o.MaxEntries < 0 {
		issues = append(issues, Issue{Path: []string{"options", "maxEntries"}, Message: "must not be negative"})
	}
	if o.MaxBytes < 0 {
		issues = append(issues, Issue{Path: []string{"options", "maxBytes"}, Message: "must not be negative"})
	}
	if len(issues) > 0 {
		return &ValidationError{Issues: issues}
	}
	return nil
}

// Transferer is implemented by sandboxes that move files in and out of the
// workspace (docs/contract.md#workspace-files). It is separate from Sandbox so
// backends without transfers keep satisfying Sandbox.
type Transferer interface {
	// ImportTree streams src into the workspace before the process is
	// reserved, owned by the workload identity with modes kept. Errors:
	// *ValidationError for a bad entry (naming it), *StateError after
	// process reservation or stop, OperationError transfer_limit for
	// quotas, deadline_exceeded/cancelled, driver_failure.
	ImportTree(ctx context.Context, src TreeSource, opts TransferOptions) error
	// ExportTree streams the selection into sink once compute is stopped.
	// Errors: *ValidationError for a bad selection, *StateError while
	// compute runs, OperationError invalid_archive naming the entry,
	// transfer_limit, deadline_exceeded/cancelled, driver_failure; on any
	// error the sink was told to Discard.
	ExportTree(ctx context.Context, sel Selection, sink TreeSink, opts TransferOptions) error
}

// DirSource returns a TreeSource over the host directory dir (its contents,
// not dir itself). It never follows symbolic links: a link, device, FIFO or
// socket anywhere below dir is an error naming it, and files are opened with
// O_NOFOLLOW. Memory is bounded by tree depth: each directory is read in
// batches, unsorted. Close the source (it is an io.Closer) to release the
// directory descriptors if iteration stops early.
func DirSource(dir string) TreeSource {
	return &dirSource{root: dir}
}

type dirSource struct {
	root    string
	started bool
	stack   []dirLevel
	file    *os.File
	err     error
}

type dirLevel struct {
	f   *os.File
	rel string
	buf []os.DirEntry
}

func (s *dirSource) Close() error {
	if s.file != nil {
		s.file.Close()
		s.file = nil
	}
	for _, l := range s.stack {
		l.f.Close()
	}
	s.stack = nil
	return nil
}

func (s *dirSource) fail(err error) (Entry, io.Reader, error) {
	s.err = err
	s.Close()
	return Entry{}, nil, err
}

// Next returns the next entry in pre-order. The steps: the sticky error,
// the previous file closed, the root opened on the first call; then the
// next directory entry (nextDirEntry) as an entry (entry), or io.EOF once
// every directory is read.
func (s *dirSource) Next() (Entry, io.Reader, error) {
	if s.err != nil {
		return Entry{}, nil, s.err
	}
	if s.file != nil {
		s.file.Close()
		s.file = nil
	}
	if !s.started {
		s.started = true
		f, err := openNoFollow(s.root, true)
		if err != nil {
			return s.fail(fmt.Errorf("sandbox: source %s: %w", s.root, err))
		}
		s.stack = append(s.stack, dirLevel{f: f})
	}
	de, rel, err := s.nextDirEntry()
	if err != nil {
		return s.fail(err)
	}
	if de == nil {
		s.err = io.EOF
		return Entry{}, nil, io.EOF
	}
	return s.entry(de, rel)
}

// nextDirEntry returns the next directory entry of the innermost open
// directory and its slash-separated path under the root, closing each
// directory it exhausts; nil once none is left.
func (s *dirSource) nextDirEntry() (os.DirEntry, string, error) {
	for len(s.stack) > 0 {
		top := &s.stack[len(s.stack)-1]
		if len(top.buf) == 0 {
			ents, err := top.f.ReadDir(256)
			if err != nil && err != io.EOF {
				return nil, "", fmt.Errorf("sandbox: source %s: %w", filepath.Join(s.root, top.rel), err)
			}
			if len(ents) == 0 {
				top.f.Close()
				s.stack = s.stack[:len(s.stack)-1]
				continue
			}
			top.buf = ents
		}
		de := top.buf[0]
		top.buf = top.buf[1:]
		rel := de.Name()
		if top.rel != "" {
			rel = top.rel + "/" + rel
		}
		return de, rel, nil
	}
	return nil, "", nil
}

// entry makes directory entry de, at rel, an entry: a directory is
// descended into, a regular file (at most MaxTransferFileBytes) opened
// for its body, anything else refused. Nothing is followed.
func (s *dirSource) entry(de os.DirEntry, rel string) (Entry, io.Reader, error) {
	host := filepath.Join(s.root, filepath.FromSlash(rel))
	if _, err := ParseRelativePath(rel); err != nil {
		return s.fail(fmt.Errorf("sandbox: source %s: %w", host, err))
	}
	switch de.Type() {
	case fs.ModeDir:
		f, err := openNoFollow(host, true)
		if err != nil {
			return s.fail(fmt.Errorf("sandbox: source %s: %w", host, err))
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return s.fail(fmt.Errorf("sandbox: source %s: %w", host, err))
		}
		s.stack = append(s.stack, dirLevel{f: f, rel: rel})
		return Entry{Path: rel, Kind: EntryDir, Mode: st.Mode().Perm()}, nil, nil
	case 0:
		f, err := openNoFollow(host, false)
		if err != nil {
			return s.fail(fmt.Errorf("sandbox: source %s: %w", host, err))
		}
		st, err := f.Stat()
		if err != nil || !st.Mode().IsRegular() {
			f.Close()
			return s.fail(fmt.Errorf("sandbox: source %s: not a regular file (%v)", host, err))
		}
		if st.Size() > MaxTransferFileBytes {
			f.Close()
			return s.fail(&ValidationError{Issues: []Issue{{Path: []string{"source", rel}, Message: fmt.Sprintf("%d bytes exceed 8 GiB - 1", st.Size())}}})
		}
		s.file = f
		return Entry{Path: rel, Kind: EntryFile, Mode: st.Mode().Perm(), Size: st.Size()}, &exactReader{r: f, left: st.Size(), name: host}, nil
	default:
		return s.fail(&ValidationError{Issues: []Issue{{Path: []string{"source", rel}, Message: fmt.Sprintf("%s is a %v, only regular files and directories are transferred (links are never followed)", host, de.Type())}}})
	}
}

func openNoFollow(path string, dir bool) (*os.File, error) {
	flags := os.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_CLOEXEC
	if dir {
		flags |= syscall.O_DIRECTORY
	}
	return os.OpenFile(path, flags, 0)
}

// exactReader yields exactly left bytes and fails if the file is shorter.
type exactReader struct {
	r    io.Reader
	left int64
	name string
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	if err == io.EOF && e.left > 0 {
		return n, fmt.Errorf("sandbox: source %s shrank while being read: %w", e.name, io.ErrUnexpectedEOF)
	}
	if e.left == 0 && err == nil {
		return n, nil
	}
	return n, err
}

// DirSink returns a TreeSink that writes into a fresh staging directory
// created next to dest (in dest's parent, which must exist) and renames it to
// dest on Commit; Discard removes the staging directory. dest must not exist
// at Begin or Commit. Files and directories get the entry's permission bits;
// directories are writable by the owner while being filled and get their
// final mode once their subtree is complete, so the sink's bookkeeping is
// bounded by tree depth.
func DirSink(dest string) TreeSink {
	return &dirSink{dest: filepath.Clean(dest)}
}

type dirSink struct {
	dest    string
	staging string
	open    []openDir
}

type openDir struct {
	rel  string
	mode fs.FileMode
}

func (d *dirSink) Begin() error {
	if _, err := os.Lstat(d.dest); err == nil {
		return fmt.Errorf("sandbox: export destination %s already exists", d.dest)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sandbox: export destination: %w", err)
	}
	staging, err := os.MkdirTemp(filepath.Dir(d.dest), "."+filepath.Base(d.dest)+".partial-*")
	if err != nil {
		return fmt.Errorf("sandbox: export staging: %w", err)
	}
	d.staging = staging
	return nil
}

// closeDirs applies the final mode of every open directory that is not an
// ancestor of rel (all of them when rel is "").
func (d *dirSink) closeDirs(rel string) error {
	for len(d.open) > 0 {
		top := d.open[len(d.open)-1]
		if rel != "" && strings.HasPrefix(rel, top.rel+"/") {
			break
		}
		d.open = d.open[:len(d.open)-1]
		if err := os.Chmod(filepath.Join(d.staging, filepath.FromSlash(top.rel)), top.mode); err != nil {
			return fmt.Errorf("sandbox: export sink %s: %w", top.rel, err)
		}
	}
	return nil
}

func (d *dirSink) Entry(e Entry, body io.Reader) error {
	if d.staging == "" {
		return errors.New("sandbox: export sink: Entry before Begin")
	}
	if err := e.Validate("entry"); err != nil {
		return err
	}
	if err := d.closeDirs(e.Path); err != nil {
		return err
	}
	host := filepath.Join(d.staging, filepath.FromSlash(e.Path))
	if e.Kind == EntryDir {
		if err := os.Mkdir(host, 0o700); err != nil {
			// A repeated directory is left to the backend's duplicate check,
			// which fails the export before Commit.
			if st, serr := os.Lstat(host); serr != nil || !st.IsDir() {
				return fmt.Errorf("sandbox: export sink %s: %w", e.Path, err)
			}
		}
		d.open = append(d.open, openDir{rel: e.Path, mode: e.Mode})
		return nil
	}
	// O_TRUNC rather than O_EXCL: a repeated file is left to the backend's
	// duplicate check, which fails the export before Commit.
	f, err := os.OpenFile(host, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("sandbox: export sink %s: %w", e.Path, err)
	}
	n, err := io.Copy(f, body)
	if err == nil && n != e.Size {
		err = fmt.Errorf("sandbox: export sink %s: received %d of %d bytes", e.Path, n, e.Size)
	}
	if err == nil {
		err = f.Chmod(e.Mode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (d *dirSink) Commit() error {
	if d.staging == "" {
		return errors.New("sandbox: export sink: Commit before Begin")
	}
	if err := d.closeDirs(""); err != nil {
		return err
	}
	if err := os.Chmod(d.staging, 0o755); err != nil {
		return err
	}
	if _, err := os.Lstat(d.dest); err == nil {
		return fmt.Errorf("sandbox: export destination %s appeared during the export", d.dest)
	}
	if err := os.Rename(d.staging, d.dest); err != nil {
		return fmt.Errorf("sandbox: export commit: %w", err)
	}
	d.staging = ""
	return nil
}

func (d *dirSink) Discard() error {
	if d.staging == "" {
		return nil
	}
	// Directories may have lost their write bit already.
	_ = filepath.WalkDir(d.staging, func(p string, de fs.DirEntry, err error) error {
		if err == nil && de.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	err := os.RemoveAll(d.staging)
	d.staging = ""
	d.open = nil
	return err
}
