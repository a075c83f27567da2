package driver

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/qualbox/qualbox/driver/archive"
	"github.com/qualbox/qualbox/driver/internal/spill"
	"github.com/qualbox/qualbox/sandboxapi"
)

// Workspace transfer (docs/contract.md#workspace-files). Bodies stream through
// the archive endpoint in transfers.chunkBytes chunks; names are checked for
// duplicates and conflicting ancestors over records sorted externally in the
// spill directory (transfers.metadataBatchBytes, metadataMergeFanIn), so memory
// does not grow with the number of entries.

var _ sandboxapi.Transferer = (*sandbox)(nil)

// transferContext applies the caller's optional transfer deadline. The
// Engine connection, response head and upload acknowledgement are each
// bounded by deadlines.startupMs whether or not a deadline is set; the body
// is bounded only by that deadline (docs/contract.md#workspace-files).
func (s *sandbox) transferContext(ctx context.Context, opts sandboxapi.TransferOptions) (context.Context, context.CancelFunc) {
	ctx = withObservation(ctx, s.b.startupTimeout(s.policy))
	if !opts.Deadline.IsZero() {
		return context.WithDeadline(ctx, opts.Deadline)
	}
	return context.WithCancel(ctx)
}

func (s *sandbox) newSorter() (*spill.Sorter, error) {
	t := s.policy.Transfers
	sorter, err := spill.New(s.b.cfg.SpillDirectory, int(t.MetadataBatchBytes), int(t.MetadataMergeFanIn), archive.MaxRecordBytes(sandboxapi.MaxPathBytes))
	if err != nil {
		return nil, &sandboxapi.OperationError{Code: sandboxapi.CodeDriverFailure, Message: "transfer metadata sorter", Err: err}
	}
	return sorter, nil
}

// preflight repeats daemon admission and check before an exec or a
// transfer, each observation bounded by deadlines.startupMs even when the
// caller set no transfer deadline (docs/contract.md#workspace-files). Both
// are reads and nothing acts before both passed, so they run concurrently:
// one round trip instead of three. A daemon failure is reported before a
// check failure, as when they ran one after the other.
func (s *sandbox) preflight(ctx context.Context, eng *engine, check func(context.Context, *engine) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.b.startupTimeout(s.policy))
	defer cancel()
	checkCtx, cancelCheck := context.WithCancel(ctx)
	defer cancelCheck()
	daemon := make(chan error, 1)
	go func() {
		err := s.checkDaemon(ctx, eng)
		if err != nil {
			cancelCheck() // reported instead of the check's outcome anyway
		}
		daemon <- err
	}()
	checkErr := check(checkCtx, eng)
	if err := <-daemon; err != nil {
		return err
	}
	return checkErr
}

// quota counts entries and file bytes against TransferOptions.
type quota struct {
	opts           sandboxapi.TransferOptions
	entries, bytes int64
}

func (q *quota) add(name string, size int64) error {
	q.entries++
	q.bytes += size
	if q.opts.MaxEntries > 0 && q.entries > q.opts.MaxEntries {
		return sandboxapi.NewOperationError(sandboxapi.CodeTransferLimit, nil, "entry %q exceeds the transfer quota of %d entries", name, q.opts.MaxEntries)
	}
	if q.opts.MaxBytes > 0 && q.bytes > q.opts.MaxBytes {
		return sandboxapi.NewOperationError(sandboxapi.CodeTransferLimit, nil, "entry %q exceeds the transfer quota of %d bytes", name, q.opts.MaxBytes)
	}
	return nil
}

// ImportTree streams src into /workspace/work of the running compute container
// before the process is reserved (docs/contract.md#workspace-files). Entries are
// written as uncompressed tar (ustar, PAX where a name needs it) owned by the
// workload uid/gid with the entry's permission bits, through an io.Pipe into PUT
// /containers/{id}/archive; the body's first block is checked to be a tar
// header, never compressed.
//
// Errors: *sandboxapi.ValidationError naming a bad source entry (path,
// order, size mismatch, duplicate, file used as directory);
// *sandboxapi.StateError if the sandbox is not running or its process is
// reserved (while an import streams, ReserveProcess fails instead); OperationError transfer_limit (quotas), deadline_exceeded,
// cancelled or driver_failure. Names are checked for duplicates only once
// the source is exhausted, before the archive is terminated: a failing
// import aborts the upload, but entries the Engine already extracted stay
// in the workspace (no process has run yet; destroy the sandbox).
func (s *sandbox) ImportTree(ctx context.Context, src sandboxapi.TreeSource, opts sandboxapi.TransferOptions) (err error) {
	if err := opts.Validate(); err != nil {
		return err
	}
	if src == nil {
		return &sandboxapi.ValidationError{Issues: []sandboxapi.Issue{{Path: []string{"source"}, Message: "a tree source is required"}}}
	}
	// The checks and the import's registration are one step under mu, as
	// ReserveProcess's checks are: a reservation either came first (the
	// import is refused) or finds the import streaming (the reservation is
	// refused), never both in flight.
	s.mu.Lock()
	started, reserved, phase := s.started, s.proc != nil, s.record.Phase
	if started && !reserved && phase == sandboxapi.PhaseRunning {
		s.importing++
	}
	s.mu.Unlock()
	switch {
	case !started:
		return &sandboxapi.StateError{Message: "import needs a started sandbox"}
	case reserved:
		return &sandboxapi.StateError{Message: "import happens before process reservation; the process is already reserved"}
	case phase != sandboxapi.PhaseRunning:
		return &sandboxapi.StateError{Message: "import needs running compute; sandbox is " + string(phase)}
	}
	defer func() {
		s.mu.Lock()
		s.importing--
		s.mu.Unlock()
	}()
	compute, _ := s.resource(sandboxapi.RoleCompute)
	eng, err := s.b.engine()
	if err != nil {
		return err
	}
	ctx, cancel := s.transferContext(ctx, opts)
	defer cancel()
	if err := s.preflight(ctx, eng, s.checkComputeActive); err != nil {
		return err
	}
	sorter, err := s.newSorter()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, spillCloseError(sorter.Close())) }()

	pr, pw := io.Pipe()
	werr := make(chan error, 1)
	go func() {
		err := s.writeImport(ctx, src, opts, sorter, pw)
		pw.CloseWithError(err)
		werr <- err
	}()
	_, perr := eng.cli.CopyToContainer(ctx, compute.Identity.ID, client.CopyToContainerOptions{
		DestinationPath: WorkPath, Content: &tarOnly{r: pr},
	})
	pr.CloseWithError(errUploadEnded)
	if err := <-werr; err != nil && !(errors.Is(err, errUploadEnded) && perr != nil) {
		return err
	}
	// The writer only saw the pipe close: the upload's own error is the
	// cause, so classify that one.
	if perr != nil {
		var head *headError
		if errors.As(perr, &head) {
			return &sandboxapi.OperationError{Code: sandboxapi.CodeDriverFailure, Message: "import body check", Err: head.err}
		}
		return engineFailure(perr, "import into %s of compute container %s", WorkPath, compute.Identity.ID)
	}
	return nil
}

// spillCloseError reports a failure to remove the transfer's spill files:
// they live in the caller's directory, so leaving them is not silent.
func spillCloseError(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("driver: remove transfer spill files: %w", err)
}

// errUploadEnded closes the import pipe once the Engine upload returned, so
// a writer still producing learns it, and ImportTree can tell that failure
// from the writer's own.
var errUploadEnded = errors.New("driver: import upload ended")

func sourceIssue(entry, format string, args ...any) error {
	return &sandboxapi.ValidationError{Issues: []sandboxapi.Issue{{Path: []string{"source", entry}, Message: fmt.Sprintf(format, args...)}}}
}

func (s *sandbox) writeImport(ctx context.Context, src sandboxapi.TreeSource, opts sandboxapi.TransferOptions, sorter *spill.Sorter, w io.Writer) error {
	chunk := int(s.policy.Transfers.ChunkBytes)
	bw := bufio.NewWriterSize(w, chunk)
	tw := tar.NewWriter(bw)
	buf := make([]byte, chunk)
	var tree archive.Tree
	q := quota{opts: opts}
	var rec []byte
	now := time.Now().Truncate(time.Second)
	uid, gid := int(s.b.cfg.User.UID), int(s.b.cfg.User.GID)
	// The first header is the driver's own: the workspace directory itself
	// ("./", as prepared at start: 0755, the workload's). The body's first
	// bytes are then "./" and never a caller's entry name, which could
	// spell compression magic ("BZh9...") and fail the uncompressed-only
	// check that still runs on them (docs/contract.md#workspace-files).
	if err := tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeDir, Name: "./", Mode: 0o755, Uid: uid, Gid: gid, ModTime: now, Format: tar.FormatPAX,
	}); err != nil {
		return err
	}
	for i := 0; ; i++ {
		if err := ctx.Err(); err != nil {
			return sandboxapi.FromContext(err, "import")
		}
		e, body, err := src.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			var ve *sandboxapi.ValidationError
			if errors.As(err, &ve) {
				return err
			}
			return fmt.Errorf("driver: import source entry %d: %w", i, err)
		}
		if err := e.Validate("source", strconv.Quote(e.Path)); err != nil {
			return err
		}
		dir := e.Kind == sandboxapi.EntryDir
		if err := tree.Add(e.Path, dir); err != nil {
			return sourceIssue(e.Path, "%v (sources yield pre-order, parents first)", err)
		}
		if err := q.add(e.Path, e.Size); err != nil {
			return err
		}
		rec = archive.AppendRecord(rec[:0], e.Path, dir, 0)
		if err := sorter.Add(rec); err != nil {
			return &sandboxapi.OperationError{Code: sandboxapi.CodeDriverFailure, Message: "spill import metadata", Err: err}
		}
		h := &tar.Header{
			Name: e.Path, Typeflag: tar.TypeReg, Mode: int64(e.Mode), Size: e.Size,
			Uid: uid, Gid: gid, ModTime: now, Format: tar.FormatPAX,
		}
		if dir {
			h.Name += "/"
			h.Typeflag = tar.TypeDir
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("driver: import entry %q: %w", e.Path, err)
		}
		if dir {
			continue
		}
		if body == nil {
			body = strings.NewReader("")
		}
		n, err := io.CopyBuffer(struct{ io.Writer }{tw}, io.LimitReader(body, e.Size), buf)
		if err != nil {
			if ctx.Err() != nil {
				return sandboxapi.FromContext(ctx.Err(), "import")
			}
			return fmt.Errorf("driver: import entry %q: %w", e.Path, err)
		}
		if n != e.Size {
			return sourceIssue(e.Path, "source yielded %d of its declared %d bytes", n, e.Size)
		}
		if m, _ := body.Read(buf[:1]); m > 0 {
			return sourceIssue(e.Path, "source yields more than its declared %d bytes", e.Size)
		}
	}
	var sorted archive.Sorted
	if err := sorter.Sorted(sorted.Add); err != nil {
		var ae *archive.Error
		if errors.As(err, &ae) {
			return sourceIssue(ae.Entry, "%s", ae.Reason)
		}
		return &sandboxapi.OperationError{Code: sandboxapi.CodeDriverFailure, Message: "sort import metadata", Err: err}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

// headError marks a body that failed the uncompressed-tar check.
type headError struct{ err error }

func (e *headError) Error() string { return e.err.Error() }

// tarOnly passes an archive body through after checking its first block
// (archive.CheckHead): only uncompressed tar ever reaches the Engine.
type tarOnly struct {
	r       io.Reader
	head    []byte
	checked bool
}

func (t *tarOnly) Read(p []byte) (int, error) {
	if !t.checked {
		t.checked = true
		head := make([]byte, archive.BlockSize)
		n, err := io.ReadFull(t.r, head)
		if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
			return 0, err
		}
		if err := archive.CheckHead(head[:n]); err != nil {
			return 0, &headError{err: err}
		}
		t.head = head[:n]
	}
	if len(t.head) > 0 {
		n := copy(p, t.head)
		t.head = t.head[n:]
		return n, nil
	}
	return t.r.Read(p)
}

// ExportTree streams the selection from the stopped sandbox's never-started,
// read-only export accessor into sink (docs/contract.md#workspace-files). File
// and subtree selections stat each ancestor with a bounded HEAD request and
// require real directories (a symbolic link is never followed), then GET only
// the selected entry; the whole workspace is GET /workspace/work. The sink first
// receives the selection's ancestors as directories, then every entry with its
// workspace-relative path. Every archive byte is validated incrementally
// (package archive); bytes stay provisional until the whole export validated,
// then sink.Commit; on any failure sink.Discard.
//
// Errors: *sandboxapi.ValidationError for a bad selection or one that names
// a missing entry, a link or the wrong kind; *sandboxapi.StateError unless
// compute is stopped; OperationError invalid_archive naming the entry,
// transfer_limit (an entry over 8 GiB - 1, base-256 or PAX size, quotas),
// deadline_exceeded, cancelled or driver_failure.
func (s *sandbox) ExportTree(ctx context.Context, sel sandboxapi.Selection, sink sandboxapi.TreeSink, opts sandboxapi.TransferOptions) (err error) {
	if err := sel.Validate(); err != nil {
		return err
	}
	if err := opts.Validate(); err != nil {
		return err
	}
	if sink == nil {
		return &sandboxapi.ValidationError{Issues: []sandboxapi.Issue{{Path: []string{"sink"}, Message: "a tree sink is required"}}}
	}
	s.mu.Lock()
	started, phase := s.started, s.record.Phase
	s.mu.Unlock()
	if !started || phase != sandboxapi.PhaseStopped {
		return &sandboxapi.StateError{Message: fmt.Sprintf("export needs stopped compute (no writer on the workspace); sandbox is %s", phase)}
	}
	accessor, ok := s.resource(sandboxapi.RoleExport)
	if !ok || accessor.Identity.Kind != sandboxapi.IdentityIdentified {
		return &sandboxapi.StateError{Message: "export accessor is not identified"}
	}
	eng, err := s.b.engine()
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			if derr := sink.Discard(); derr != nil {
				err = &sandboxapi.CleanupError{Original: err, Err: derr}
			}
		}
	}()
	ctx, cancel := s.transferContext(ctx, opts)
	defer cancel()
	if err := s.preflight(ctx, eng, s.checkAccessor); err != nil {
		return err
	}

	x := &export{s: s, eng: eng, accessor: accessor.Identity.ID, sel: sel, sink: sink, q: quota{opts: opts}}
	if err := x.resolve(ctx); err != nil {
		return err
	}
	return x.run(ctx)
}

type export struct {
	s        *sandbox
	eng      *engine
	accessor string
	sel      sandboxapi.Selection
	sink     sandboxapi.TreeSink
	q        quota

	guest     string             // guest path to GET
	root      string             // the archive's root entry name
	prefix    string             // workspace-relative directory of root ("" at top level)
	ancestors []sandboxapi.Entry // directories above the selection
	rootStat  container.PathStat // HEAD result of guest
}

func selectionIssue(format string, args ...any) error {
	return &sandboxapi.ValidationError{Issues: []sandboxapi.Issue{{Path: []string{"selection", "path"}, Message: fmt.Sprintf(format, args...)}}}
}

// stat is one bounded HEAD of the accessor's archive endpoint.
func (x *export) stat(ctx context.Context, guest string) (container.PathStat, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, x.s.b.startupTimeout(x.s.policy))
	defer cancel()
	res, err := x.eng.cli.ContainerStatPath(ctx, x.accessor, client.ContainerStatPathOptions{Path: guest})
	if err != nil {
		if isNotFound(err) {
			return container.PathStat{}, false, nil
		}
		return container.PathStat{}, false, engineFailure(err, "stat %s in export accessor %s", guest, x.accessor)
	}
	return res.Stat, true, nil
}

func kindOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link (export never follows links)"
	case m.IsDir():
		return "a directory"
	case m.IsRegular():
		return "a regular file"
	}
	return "a special file"
}

// resolve checks the workspace root and each ancestor of the selection.
func (x *export) resolve(ctx context.Context) error {
	st, ok, err := x.stat(ctx, WorkPath)
	if err != nil {
		return err
	}
	if !ok || !st.Mode.IsDir() || st.Mode&fs.ModeSymlink != 0 {
		return &sandboxapi.StateError{Message: fmt.Sprintf("workspace %s is not a real directory", WorkPath)}
	}
	x.guest, x.root, x.rootStat = WorkPath, path.Base(WorkPath), st
	if x.sel.Kind == sandboxapi.SelectWhole {
		return nil
	}
	comps := strings.Split(x.sel.Path, "/")
	for i, c := range comps {
		rel := strings.Join(comps[:i+1], "/")
		x.guest += "/" + c
		st, ok, err := x.stat(ctx, x.guest)
		if err != nil {
			return err
		}
		if !ok {
			return selectionIssue("%q does not exist in the workspace", rel)
		}
		last := i == len(comps)-1
		switch {
		case !last && (!st.Mode.IsDir() || st.Mode&fs.ModeSymlink != 0):
			return selectionIssue("ancestor %q is %s, not a directory", rel, kindOf(st.Mode))
		case !last:
			x.ancestors = append(x.ancestors, sandboxapi.Entry{Path: rel, Kind: sandboxapi.EntryDir, Mode: st.Mode.Perm()})
		case x.sel.Kind == sandboxapi.SelectFile && !st.Mode.IsRegular():
			return selectionIssue("%q is %s, not a regular file", rel, kindOf(st.Mode))
		case x.sel.Kind == sandboxapi.SelectSubtree && (!st.Mode.IsDir() || st.Mode&fs.ModeSymlink != 0):
			return selectionIssue("%q is %s, not a directory", rel, kindOf(st.Mode))
		}
		x.rootStat = st
	}
	x.root = comps[len(comps)-1]
	x.prefix = strings.Join(comps[:len(comps)-1], "/")
	return nil
}

// archiveFailure converts a Reader failure into the contract's error.
func archiveFailure(err error, what string) error {
	var ae *archive.Error
	if errors.As(err, &ae) {
		code := sandboxapi.CodeInvalidArchive
		if ae.Limit {
			code = sandboxapi.CodeTransferLimit
		}
		return &sandboxapi.OperationError{Code: code, Message: what, Err: ae}
	}
	return engineFailure(err, "%s", what)
}

// rel maps an archive name to its workspace-relative path ("" for the
// whole-workspace root itself).
func (x *export) rel(name string) string {
	if x.sel.Kind == sandboxapi.SelectWhole {
		if name == x.root {
			return ""
		}
		return strings.TrimPrefix(name, x.root+"/")
	}
	if x.prefix == "" {
		return name
	}
	return x.prefix + "/" + name
}

func (x *export) run(ctx context.Context) (err error) {
	what := fmt.Sprintf("export %s from accessor %s", x.guest, x.accessor)
	res, err := x.eng.cli.CopyFromContainer(withStreaming(ctx), x.accessor, client.CopyFromContainerOptions{SourcePath: x.guest})
	if err != nil {
		return engineFailure(err, "%s", what)
	}
	defer res.Content.Close()
	if res.Stat.Name != x.root || res.Stat.Mode.Type() != x.rootStat.Mode.Type() {
		return &sandboxapi.OperationError{Code: sandboxapi.CodeInvalidArchive, Message: fmt.Sprintf("%s: Engine reports %q (%v), HEAD reported %q (%v)", what, res.Stat.Name, res.Stat.Mode, x.rootStat.Name, x.rootStat.Mode)}
	}
	sorter, err := x.s.newSorter()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, spillCloseError(sorter.Close())) }()
	if err := x.sink.Begin(); err != nil {
		return fmt.Errorf("driver: export sink: %w", err)
	}
	for _, a := range x.ancestors {
		if err := x.sink.Entry(a, nil); err != nil {
			return fmt.Errorf("driver: export sink entry %q: %w", a.Path, err)
		}
	}
	tr := archive.NewReader(res.Content, int(x.s.policy.Transfers.ChunkBytes))
	var rec []byte
	n := 0
	for ; ; n++ {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return archiveFailure(err, what)
		}
		switch {
		case n == 0 && h.Name != x.root:
			return archiveFailure(&archive.Error{Entry: h.Name, Reason: fmt.Sprintf("the archive does not start with the selected %q", x.root)}, what)
		case n == 0 && h.Dir != (x.sel.Kind != sandboxapi.SelectFile):
			return archiveFailure(&archive.Error{Entry: h.Name, Reason: "the selected entry changed kind"}, what)
		case n > 0 && x.sel.Kind == sandboxapi.SelectFile:
			return archiveFailure(&archive.Error{Entry: h.Name, Reason: "a file selection's archive holds more than the selected file"}, what)
		case n > 0 && !strings.HasPrefix(h.Name, x.root+"/"):
			return archiveFailure(&archive.Error{Entry: h.Name, Reason: fmt.Sprintf("entry outside the selected %q", x.root)}, what)
		}
		rec = archive.AppendRecord(rec[:0], h.Name, h.Dir, h.Offset)
		if err := sorter.Add(rec); err != nil {
			return &sandboxapi.OperationError{Code: sandboxapi.CodeDriverFailure, Message: "spill export metadata", Err: err}
		}
		rel := x.rel(h.Name)
		if rel == "" {
			continue
		}
		if _, err := sandboxapi.ParseRelativePath(rel); err != nil {
			return archiveFailure(&archive.Error{Entry: h.Name, Reason: fmt.Sprintf("workspace path is not representable: %v", err)}, what)
		}
		if err := x.q.add(rel, h.Size); err != nil {
			return err
		}
		e := sandboxapi.Entry{Path: rel, Kind: sandboxapi.EntryFile, Mode: h.Mode, Size: h.Size}
		var body io.Reader
		if h.Dir {
			e.Kind = sandboxapi.EntryDir
		} else {
			body = tr
		}
		if err := x.sink.Entry(e, body); err != nil {
			if rerr := tr.Err(); rerr != nil {
				return archiveFailure(rerr, what)
			}
			if cerr := ctx.Err(); cerr != nil {
				return sandboxapi.FromContext(cerr, what)
			}
			return fmt.Errorf("driver: export sink entry %q: %w", rel, err)
		}
	}
	if n == 0 {
		return archiveFailure(&archive.Error{Reason: "the archive holds no entry"}, what)
	}
	var sorted archive.Sorted
	if err := sorter.Sorted(sorted.Add); err != nil {
		return archiveFailure(err, what)
	}
	if err := ctx.Err(); err != nil {
		return sandboxapi.FromContext(err, what)
	}
	if err := x.sink.Commit(); err != nil {
		return fmt.Errorf("driver: export sink commit: %w", err)
	}
	return nil
}
