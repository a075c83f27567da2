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

// writeImport writes src to w as the import's tar body, in steps:
//
//  1. the workspace directory's own header (importWriter.workspace);
//  2. for each source entry (next): checked and counted (admit), its
//     header, and for a file its body of exactly its declared size;
//  3. finish: the names, spilled and now sorted, hold no duplicate or
//     conflict; then the archive's end and the last buffered bytes.
func (s *sandbox) writeImport(ctx context.Context, src sandboxapi.TreeSource, opts sandboxapi.TransferOptions, sorter *spill.Sorter, w io.Writer) error {
	chunk := int(s.policy.Transfers.ChunkBytes)
	iw := &importWriter{
		src: src, sorter: sorter, bw: bufio.NewWriterSize(w, chunk), buf: make([]byte, chunk), q: quota{opts: opts},
		now: time.Now().Truncate(time.Second), uid: int(s.b.cfg.User.UID), gid: int(s.b.cfg.User.GID),
	}
	iw.tw = tar.NewWriter(iw.bw)
	if err := iw.workspace(); err != nil {
		return err
	}
	for i := 0; ; i++ {
		e, body, err := iw.next(ctx, i)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if err := iw.entry(ctx, e, body); err != nil {
			return err
		}
	}
	return iw.finish()
}

// importWriter is the state of one writeImport.
type importWriter struct {
	src    sandboxapi.TreeSource
	sorter *spill.Sorter
	bw     *bufio.Writer
	tw     *tar.Writer
	// buf is the body copy buffer (transfers.chunkBytes).
	buf  []byte
	tree archive.Tree
	q    quota
	rec  []byte
	// now, uid and gid are every header's time and owner.
	now      time.Time
	uid, gid int
}

// workspace writes the first header, the driver's own: the workspace
// directory itself ("./", as prepared at start: 0755, the workload's).
// The body's first bytes are then "./" and never a caller's entry name,
// which could spell compression magic ("BZh9...") and fail the
// uncompressed-only check that still runs on them
// (docs/contract.md#workspace-files).
func (w *importWriter) workspace() error {
	return w.tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeDir, Name: "./", Mode: 0o755, Uid: w.uid, Gid: w.gid, ModTime: w.now, Format: tar.FormatPAX,
	})
}

// next returns source entry i (from 0), or io.EOF after the last; ctx
// ending fails it first.
func (w *importWriter) next(ctx context.Context, i int) (sandboxapi.Entry, io.Reader, error) {
	if err := ctx.Err(); err != nil {
		return sandboxapi.Entry{}, nil, sandboxapi.FromContext(err, "import")
	}
	e, body, err := w.src.Next()
	if err == nil || err == io.EOF {
		return e, body, err
	}
	var ve *sandboxapi.ValidationError
	if errors.As(err, &ve) {
		return e, body, err
	}
	return e, body, fmt.Errorf("driver: import source entry %d: %w", i, err)
}

// entry writes e: checked (admit), its header and, for a file, its body.
func (w *importWriter) entry(ctx context.Context, e sandboxapi.Entry, body io.Reader) error {
	if err := w.admit(e); err != nil {
		return err
	}
	dir := e.Kind == sandboxapi.EntryDir
	h := &tar.Header{
		Name: e.Path, Typeflag: tar.TypeReg, Mode: int64(e.Mode), Size: e.Size,
		Uid: w.uid, Gid: w.gid, ModTime: w.now, Format: tar.FormatPAX,
	}
	if dir {
		h.Name += "/"
		h.Typeflag = tar.TypeDir
	}
	if err := w.tw.WriteHeader(h); err != nil {
		return fmt.Errorf("driver: import entry %q: %w", e.Path, err)
	}
	if dir {
		return nil
	}
	return w.body(ctx, e, body)
}

// admit validates e, checks it comes in pre-order (its parent already
// written as a directory), counts it against the quotas and spills its
// name for the duplicate check.
func (w *importWriter) admit(e sandboxapi.Entry) error {
	if err := e.Validate("source", strconv.Quote(e.Path)); err != nil {
		return err
	}
	dir := e.Kind == sandboxapi.EntryDir
	if err := w.tree.Add(e.Path, dir); err != nil {
		return sourceIssue(e.Path, "%v (sources yield pre-order, parents first)", err)
	}
	if err := w.q.add(e.Path, e.Size); err != nil {
		return err
	}
	w.rec = archive.AppendRecord(w.rec[:0], e.Path, dir, 0)
	if err := w.sorter.Add(w.rec); err != nil {
		return &sandboxapi.OperationError{Code: sandboxapi.CodeDriverFailure, Message: "spill import metadata", Err: err}
	}
	return nil
}

// body copies file e's body (nil is empty), which must be exactly
// e.Size bytes.
func (w *importWriter) body(ctx context.Context, e sandboxapi.Entry, body io.Reader) error {
	if body == nil {
		body = strings.NewReader("")
	}
	n, err := io.CopyBuffer(struct{ io.Writer }{w.tw}, io.LimitReader(body, e.Size), w.buf)
	if err != nil {
		if ctx.Err() != nil {
			return sandboxapi.FromContext(ctx.Err(), "import")
		}
		return fmt.Errorf("driver: import entry %q: %w", e.Path, err)
	}
	if n != e.Size {
		return sourceIssue(e.Path, "source yielded %d of its declared %d bytes", n, e.Size)
	}
	if m, _ := body.Read(w.buf[:1]); m > 0 {
		return sourceIssue(e.Path, "source yields more than its declared %d bytes", e.Size)
	}
	return nil
}

// finish checks the names hold no duplicate or conflict, then ends the
// archive and flushes it.
func (w *importWriter) finish() error {
	var sorted archive.Sorted
	if err := w.sorter.Sorted(sorted.Add); err != nil {
		var ae *archive.Error
		if errors.As(err, &ae) {
			return sourceIssue(ae.Entry, "%s", ae.Reason)
		}
		return &sandboxapi.OperationError{Code: sandboxapi.CodeDriverFailure, Message: "sort import metadata", Err: err}
	}
	if err := w.tw.Close(); err != nil {
		return err
	}
	return w.bw.Flush()
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

	what   string        // names the export in errors: guest and accessor
	sorter *spill.Sorter // the archive's names, for the duplicate check
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

// run streams the resolved selection into the sink, in steps:
//
//  1. open: GET the selection from the accessor, its stat matching the
//     HEAD's;
//  2. begin: the sink's Begin, then the selection's ancestors;
//  3. stream: each archive entry checked for its place in the selection
//     (place), its name spilled for the duplicate check, then passed to
//     the sink (deliver);
//  4. settle: the archive held an entry, its names are unique and
//     consistent (the spilled records, sorted), ctx is still live;
//  5. commit the sink.
func (x *export) run(ctx context.Context) (err error) {
	x.what = fmt.Sprintf("export %s from accessor %s", x.guest, x.accessor)
	content, err := x.open(ctx)
	if err != nil {
		return err
	}
	defer content.Close()
	sorter, err := x.s.newSorter()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, spillCloseError(sorter.Close())) }()
	x.sorter = sorter
	if err := x.begin(); err != nil {
		return err
	}
	n, err := x.stream(ctx, archive.NewReader(content, int(x.s.policy.Transfers.ChunkBytes)))
	if err != nil {
		return err
	}
	if err := x.settle(ctx, n); err != nil {
		return err
	}
	if err := x.sink.Commit(); err != nil {
		return fmt.Errorf("driver: export sink commit: %w", err)
	}
	return nil
}

// open GETs the selection's archive. The Engine's stat of it must name
// and type what the HEAD in resolve found.
func (x *export) open(ctx context.Context) (io.ReadCloser, error) {
	res, err := x.eng.cli.CopyFromContainer(withStreaming(ctx), x.accessor, client.CopyFromContainerOptions{SourcePath: x.guest})
	if err != nil {
		return nil, engineFailure(err, "%s", x.what)
	}
	if res.Stat.Name != x.root || res.Stat.Mode.Type() != x.rootStat.Mode.Type() {
		res.Content.Close()
		return nil, &sandboxapi.OperationError{Code: sandboxapi.CodeInvalidArchive, Message: fmt.Sprintf("%s: Engine reports %q (%v), HEAD reported %q (%v)", x.what, res.Stat.Name, res.Stat.Mode, x.rootStat.Name, x.rootStat.Mode)}
	}
	return res.Content, nil
}

// begin starts the sink and gives it the selection's ancestors.
func (x *export) begin() error {
	if err := x.sink.Begin(); err != nil {
		return fmt.Errorf("driver: export sink: %w", err)
	}
	for _, a := range x.ancestors {
		if err := x.sink.Entry(a, nil); err != nil {
			return fmt.Errorf("driver: export sink entry %q: %w", a.Path, err)
		}
	}
	return nil
}

// stream reads every entry of tr into the sink and returns how many the
// archive held.
func (x *export) stream(ctx context.Context, tr *archive.Reader) (int, error) {
	var rec []byte
	for n := 0; ; n++ {
		h, err := tr.Next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, archiveFailure(err, x.what)
		}
		if err := x.place(n, h); err != nil {
			return n, err
		}
		rec = archive.AppendRecord(rec[:0], h.Name, h.Dir, h.Offset)
		if err := x.sorter.Add(rec); err != nil {
			return n, &sandboxapi.OperationError{Code: sandboxapi.CodeDriverFailure, Message: "spill export metadata", Err: err}
		}
		if err := x.deliver(ctx, tr, h); err != nil {
			return n, err
		}
	}
}

// place checks that h, the archive's n-th entry (from 0), belongs where
// it is: the first is the selected root, of the selected kind; the rest
// lie under it, and a file selection has no rest.
func (x *export) place(n int, h *archive.Header) error {
	switch {
	case n == 0 && h.Name != x.root:
		return archiveFailure(&archive.Error{Entry: h.Name, Reason: fmt.Sprintf("the archive does not start with the selected %q", x.root)}, x.what)
	case n == 0 && h.Dir != (x.sel.Kind != sandboxapi.SelectFile):
		return archiveFailure(&archive.Error{Entry: h.Name, Reason: "the selected entry changed kind"}, x.what)
	case n > 0 && x.sel.Kind == sandboxapi.SelectFile:
		return archiveFailure(&archive.Error{Entry: h.Name, Reason: "a file selection's archive holds more than the selected file"}, x.what)
	case n > 0 && !strings.HasPrefix(h.Name, x.root+"/"):
		return archiveFailure(&archive.Error{Entry: h.Name, Reason: fmt.Sprintf("entry outside the selected %q", x.root)}, x.what)
	}
	return nil
}

// deliver passes h (with tr as a file's body) to the sink under its
// workspace-relative path, counted against the quotas; the whole
// workspace's root itself is not an entry. A sink failure is reported as
// the archive's or ctx's when either failed first.
func (x *export) deliver(ctx context.Context, tr *archive.Reader, h *archive.Header) error {
	rel := x.rel(h.Name)
	if rel == "" {
		return nil
	}
	if _, err := sandboxapi.ParseRelativePath(rel); err != nil {
		return archiveFailure(&archive.Error{Entry: h.Name, Reason: fmt.Sprintf("workspace path is not representable: %v", err)}, x.what)
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
			return archiveFailure(rerr, x.what)
		}
		if cerr := ctx.Err(); cerr != nil {
			return sandboxapi.FromContext(cerr, x.what)
		}
		return fmt.Errorf("driver: export sink entry %q: %w", rel, err)
	}
	return nil
}

// settle checks the whole archive once it ended: it held n > 0 entries,
// whose names (spilled, now sorted) hold no duplicate or conflict, and
// ctx did not end meanwhile.
func (x *export) settle(ctx context.Context, n int) error {
	if n == 0 {
		return archiveFailure(&archive.Error{Reason: "the archive holds no entry"}, x.what)
	}
	var sorted archive.Sorted
	if err := x.sorter.Sorted(sorted.Add); err != nil {
		return archiveFailure(err, x.what)
	}
	if err := ctx.Err(); err != nil {
		return sandboxapi.FromContext(err, x.what)
	}
	return nil
}
