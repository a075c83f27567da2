package driver_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/driver/internal/enginetest"
	"github.com/qualbox/qualbox/qualify/archivecorpus"
	"github.com/qualbox/qualbox/qualify/faultproxy"
	"github.com/qualbox/qualbox/sandboxapi"
)

func transferer(t *testing.T, sb sandboxapi.Sandbox) sandboxapi.Transferer {
	t.Helper()
	tr, ok := sb.(sandboxapi.Transferer)
	assert.Assert(t, ok, "the Docker sandbox implements sandboxapi.Transferer")
	return tr
}

// memSource yields fixed entries in order.
type memSource struct {
	ents   []sandboxapi.Entry
	bodies map[string]string
	i      int
}

func (m *memSource) Next() (sandboxapi.Entry, io.Reader, error) {
	if m.i >= len(m.ents) {
		return sandboxapi.Entry{}, nil, io.EOF
	}
	e := m.ents[m.i]
	m.i++
	if e.Kind == sandboxapi.EntryDir {
		return e, nil, nil
	}
	return e, strings.NewReader(m.bodies[e.Path]), nil
}

func dirE(p string, mode fs.FileMode) sandboxapi.Entry {
	return sandboxapi.Entry{Path: p, Kind: sandboxapi.EntryDir, Mode: mode}
}

func fileE(p string, mode fs.FileMode, size int) sandboxapi.Entry {
	return sandboxapi.Entry{Path: p, Kind: sandboxapi.EntryFile, Mode: mode, Size: int64(size)}
}

// recordingSink keeps what it receives and whether it was committed.
type recordingSink struct {
	entries              []sandboxapi.Entry
	bodies               map[string]string
	committed, discarded bool
}

func (r *recordingSink) Begin() error { r.bodies = map[string]string{}; return nil }
func (r *recordingSink) Entry(e sandboxapi.Entry, body io.Reader) error {
	r.entries = append(r.entries, e)
	if body != nil {
		b, err := io.ReadAll(body)
		if err != nil {
			return err
		}
		r.bodies[e.Path] = string(b)
	}
	return nil
}
func (r *recordingSink) Commit() error  { r.committed = true; return nil }
func (r *recordingSink) Discard() error { r.discarded = true; return nil }

type node struct {
	Mode fs.FileMode
	Body string
}

// snapshot reads a host tree without following links.
func snapshot(t *testing.T, root string) map[string]node {
	t.Helper()
	out := map[string]node{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		n := node{Mode: info.Mode() & (fs.ModeType | fs.ModePerm)}
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			n.Body = string(b)
		}
		out[filepath.ToSlash(rel)] = n
		return nil
	})
	assert.NilError(t, err)
	return out
}

// Names from real bug reports: 101 and 250 characters, a path over 255
// bytes, non-ASCII names, empty files and directories, mode bits.
func bugReportTree(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	name101 := strings.Repeat("a", 97) + ".txt"
	name250 := strings.Repeat("b", 246) + ".bin"
	deep := filepath.Join("deep", strings.Repeat("c", 120), strings.Repeat("d", 120))
	must := func(err error) { t.Helper(); assert.NilError(t, err) }
	must(os.MkdirAll(filepath.Join(src, deep), 0o755))
	must(os.WriteFile(filepath.Join(src, deep, strings.Repeat("e", 60)+".txt"), []byte("over 255 bytes of path"), 0o644))
	must(os.WriteFile(filepath.Join(src, name101), []byte("101"), 0o644))
	must(os.WriteFile(filepath.Join(src, name250), []byte(strings.Repeat("x", 70000)), 0o640))
	must(os.MkdirAll(filepath.Join(src, "données", "日本語"), 0o750))
	must(os.WriteFile(filepath.Join(src, "données", "日本語", "ファイル.txt"), []byte("héllo"), 0o600))
	must(os.WriteFile(filepath.Join(src, "empty"), nil, 0o644))
	must(os.Mkdir(filepath.Join(src, "emptydir"), 0o700))
	must(os.WriteFile(filepath.Join(src, "run.sh"), []byte("#!/bin/sh\necho ok\n"), 0o755))
	must(os.MkdirAll(filepath.Join(src, "artifacts", "nested"), 0o755))
	must(os.WriteFile(filepath.Join(src, "artifacts", "nested", "report.txt"), []byte("report"), 0o644))
	must(os.Chmod(filepath.Join(src, "artifacts"), 0o711))
	return src
}

func TestTransferRoundTrip(t *testing.T) {
	b := newBackend(t)
	sb := started(t, b, enginetest.Policy())
	tr := transferer(t, sb)
	src := bugReportTree(t)
	want := snapshot(t, src)
	assert.Check(t, len(want) > 10)

	assert.NilError(t, tr.ImportTree(context.Background(), sandboxapi.DirSource(src), sandboxapi.TransferOptions{}))

	// Export needs stopped compute.
	err := tr.ExportTree(context.Background(), sandboxapi.Whole(), &recordingSink{}, sandboxapi.TransferOptions{})
	var state *sandboxapi.StateError
	assert.Check(t, errors.As(err, &state), "export while compute runs: %v", err)

	// Ownership and modes as the guest sees them.
	r := run(t, sb, nil, "/bin/sh", "-c", `stat -c '%u:%g %a %n' run.sh empty emptydir artifacts données/日本語/ファイル.txt`)
	assert.Check(t, is.Equal(string(r.stdout), "65534:65534 755 run.sh\n65534:65534 644 empty\n65534:65534 700 emptydir\n65534:65534 711 artifacts\n65534:65534 600 données/日本語/ファイル.txt\n"), "stderr: %s", r.stderr)
	err = tr.ImportTree(context.Background(), sandboxapi.DirSource(src), sandboxapi.TransferOptions{})
	assert.Check(t, errors.As(err, &state), "import after process reservation: %v", err)

	assert.NilError(t, sb.Stop(context.Background()))

	dest := filepath.Join(t.TempDir(), "whole")
	assert.NilError(t, tr.ExportTree(context.Background(), sandboxapi.Whole(), sandboxapi.DirSink(dest), sandboxapi.TransferOptions{}))
	assert.DeepEqual(t, snapshot(t, dest), want)

	sub := filepath.Join(t.TempDir(), "sub")
	assert.NilError(t, tr.ExportTree(context.Background(), sandboxapi.Subtree("artifacts/nested"), sandboxapi.DirSink(sub), sandboxapi.TransferOptions{}))
	assert.DeepEqual(t, snapshot(t, sub), map[string]node{
		"artifacts":                   {Mode: fs.ModeDir | 0o711},
		"artifacts/nested":            {Mode: fs.ModeDir | 0o755},
		"artifacts/nested/report.txt": {Mode: 0o644, Body: "report"},
	})

	one := &recordingSink{}
	assert.NilError(t, tr.ExportTree(context.Background(), sandboxapi.File("données/日本語/ファイル.txt"), one, sandboxapi.TransferOptions{}))
	assert.Check(t, one.committed && !one.discarded)
	assert.DeepEqual(t, one.entries, []sandboxapi.Entry{
		dirE("données", 0o750), dirE("données/日本語", 0o750), fileE("données/日本語/ファイル.txt", 0o600, 6),
	})
	assert.Equal(t, one.bodies["données/日本語/ファイル.txt"], "héllo")

	// Selections of the wrong kind or of nothing are validation errors.
	for _, sel := range []sandboxapi.Selection{sandboxapi.File("artifacts"), sandboxapi.Subtree("run.sh"), sandboxapi.File("missing"), sandboxapi.File("../etc/passwd")} {
		err := tr.ExportTree(context.Background(), sel, &recordingSink{}, sandboxapi.TransferOptions{})
		var ve *sandboxapi.ValidationError
		assert.Check(t, errors.As(err, &ve), "%v: %v", sel, err)
	}
	// Quotas and deadlines.
	q := &recordingSink{}
	err = tr.ExportTree(context.Background(), sandboxapi.Whole(), q, sandboxapi.TransferOptions{MaxEntries: 3})
	assert.Check(t, isOp(err, sandboxapi.CodeTransferLimit), "%v", err)
	assert.Check(t, q.discarded && !q.committed)
	err = tr.ExportTree(context.Background(), sandboxapi.Whole(), &recordingSink{}, sandboxapi.TransferOptions{MaxBytes: 1000})
	assert.Check(t, isOp(err, sandboxapi.CodeTransferLimit), "%v", err)
	err = tr.ExportTree(context.Background(), sandboxapi.Whole(), &recordingSink{}, sandboxapi.TransferOptions{Deadline: time.Now().Add(-time.Second)})
	assert.Check(t, isOp(err, sandboxapi.CodeDeadlineExceeded), "%v", err)
}

func TestImportRejectsBadSources(t *testing.T) {
	b := newBackend(t)
	sb := started(t, b, enginetest.Policy())
	tr := transferer(t, sb)
	for _, tc := range []struct {
		name string
		src  *memSource
		opts sandboxapi.TransferOptions
		code sandboxapi.Code
		msg  string
	}{
		{"child before parent", &memSource{ents: []sandboxapi.Entry{fileE("p/q", 0o644, 0)}}, sandboxapi.TransferOptions{}, "", "parent directory"},
		{"duplicate", &memSource{ents: []sandboxapi.Entry{dirE("d", 0o755), fileE("d/a", 0o644, 0), fileE("d/b", 0o644, 0), fileE("d/a", 0o644, 0)}}, sandboxapi.TransferOptions{}, "", "duplicate"},
		{"traversal", &memSource{ents: []sandboxapi.Entry{fileE("../x", 0o644, 0)}}, sandboxapi.TransferOptions{}, "", "not canonical"},
		{"short body", &memSource{ents: []sandboxapi.Entry{fileE("s", 0o644, 10)}, bodies: map[string]string{"s": "abc"}}, sandboxapi.TransferOptions{}, "", "3 of its declared 10"},
		{"long body", &memSource{ents: []sandboxapi.Entry{fileE("l", 0o644, 1)}, bodies: map[string]string{"l": "abc"}}, sandboxapi.TransferOptions{}, "", "more than"},
		{"entry quota", &memSource{ents: []sandboxapi.Entry{dirE("a", 0o755), dirE("b", 0o755)}}, sandboxapi.TransferOptions{MaxEntries: 1}, sandboxapi.CodeTransferLimit, "\"b\""},
		{"byte quota", &memSource{ents: []sandboxapi.Entry{fileE("big", 0o644, 5)}, bodies: map[string]string{"big": "12345"}}, sandboxapi.TransferOptions{MaxBytes: 4}, sandboxapi.CodeTransferLimit, "4 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tr.ImportTree(context.Background(), tc.src, tc.opts)
			assert.ErrorContains(t, err, tc.msg)
			if tc.code != "" {
				assert.Check(t, isOp(err, tc.code), "%v", err)
			} else {
				var ve *sandboxapi.ValidationError
				assert.Check(t, errors.As(err, &ve), "%v", err)
			}
		})
	}
	// Nothing of the rejected sources reached the workspace except entries
	// before the failure point; the sandbox still imports a good tree.
	assert.NilError(t, tr.ImportTree(context.Background(), &memSource{ents: []sandboxapi.Entry{dirE("ok", 0o755), fileE("ok/f", 0o644, 2)}, bodies: map[string]string{"ok/f": "hi"}}, sandboxapi.TransferOptions{}))
	r := run(t, sb, nil, "/bin/sh", "-c", "cat ok/f; ls ..; test -e p || echo no-p; test -e ../x || echo no-x")
	assert.Check(t, is.Equal(string(r.stdout), "hiwork\nno-p\nno-x\n"), "stderr: %s", r.stderr)
}

// A guest-planted symlink is never followed by export, a hardlink alias of
// a selected file exports as its bytes, and nothing lands on the host.
func TestExportNeverFollowsGuestLinks(t *testing.T) {
	b := newBackend(t)
	sb := started(t, b, enginetest.Policy())
	tr := transferer(t, sb)
	r := run(t, sb, nil, "/bin/sh", "-c", "mkdir -p sub && echo hi > sub/f && ln sub/f alias && ln -s / escape && ln -s / sub/link && echo planted")
	assert.Assert(t, is.Equal(string(r.stdout), "planted\n"), "stderr: %s", r.stderr)
	assert.NilError(t, sb.Stop(context.Background()))

	parent := t.TempDir()
	for _, sel := range []sandboxapi.Selection{
		sandboxapi.Subtree("escape"), sandboxapi.Subtree("escape/etc"), sandboxapi.File("escape/etc/passwd"),
		sandboxapi.File("sub/link"), sandboxapi.Subtree("sub/link"), sandboxapi.File("escape"),
	} {
		dest := filepath.Join(parent, "out")
		err := tr.ExportTree(context.Background(), sel, sandboxapi.DirSink(dest), sandboxapi.TransferOptions{})
		var ve *sandboxapi.ValidationError
		assert.Check(t, errors.As(err, &ve), "%v: %v", sel, err)
		assert.Check(t, is.ErrorContains(err, "symbolic link"), "%v", sel)
	}
	err := tr.ExportTree(context.Background(), sandboxapi.Whole(), sandboxapi.DirSink(filepath.Join(parent, "out")), sandboxapi.TransferOptions{})
	assert.Check(t, isOp(err, sandboxapi.CodeInvalidArchive), "%v", err)
	assert.Check(t, is.ErrorContains(err, "link"))
	left, _ := os.ReadDir(parent)
	assert.Check(t, is.Len(left, 0), "no host path is written, staging removed")

	for _, p := range []string{"alias", "sub/f"} {
		one := &recordingSink{}
		assert.NilError(t, tr.ExportTree(context.Background(), sandboxapi.File(p), one, sandboxapi.TransferOptions{}))
		assert.Check(t, is.Equal(one.bodies[p], "hi\n"), "hardlink alias %s exports as its bytes", p)
	}
}

// A sparse 8 GiB file is one byte over the archive bound: exported as a
// transfer_limit error, never as a short file.
func TestExportSparse8GiB(t *testing.T) {
	b := newBackend(t)
	sb := started(t, b, enginetest.Policy())
	tr := transferer(t, sb)
	r := run(t, sb, nil, "/bin/sh", "-c", "dd if=/dev/zero of=big bs=1 count=0 seek=8589934592 2>/dev/null && stat -c %s big")
	assert.Assert(t, is.Equal(string(r.stdout), "8589934592\n"), "stderr: %s", r.stderr)
	assert.NilError(t, sb.Stop(context.Background()))
	for _, sel := range []sandboxapi.Selection{sandboxapi.File("big"), sandboxapi.Whole()} {
		dest := filepath.Join(t.TempDir(), "out")
		start := time.Now()
		err := tr.ExportTree(context.Background(), sel, sandboxapi.DirSink(dest), sandboxapi.TransferOptions{})
		assert.Check(t, isOp(err, sandboxapi.CodeTransferLimit), "%v: %v", sel, err)
		assert.Check(t, is.ErrorContains(err, "8 GiB - 1"))
		assert.Check(t, is.ErrorContains(err, "big"))
		assert.Check(t, time.Since(start) < 30*time.Second, "rejected at the header, not after streaming 8 GiB")
		_, serr := os.Stat(dest)
		assert.Check(t, errors.Is(serr, fs.ErrNotExist), "no short file lands")
	}
}

// TestExportRejectsCraftedArchives swaps the body of the export's GET
// .../archive for crafted archives through a fault proxy that keeps the
// Engine's stat header: the driver's validator sees exactly what a hostile
// Engine or volume could send.
func TestExportRejectsCraftedArchives(t *testing.T) {
	assert.Assert(t, is.Equal(archivecorpus.Root, path.Base(driver.WorkPath)), "the crafted archives start at the workspace's base name")
	proxy := newProxy(t)
	b := newBackend(t, viaProxy(proxy))
	sb := started(t, b, enginetest.Policy())
	tr := transferer(t, sb)
	assert.NilError(t, sb.Stop(context.Background()))

	cases, err := archivecorpus.Hostiles()
	assert.NilError(t, err)
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			proxy.SetRules(faultproxy.ReplaceBody(faultproxy.Request("GET", `/containers/[^/]+/archive`), "application/x-tar", tc.Body))
			defer proxy.SetRules()
			fired := len(proxy.Fired())
			parent := t.TempDir()
			err := tr.ExportTree(context.Background(), sandboxapi.Whole(), sandboxapi.DirSink(filepath.Join(parent, "out")), sandboxapi.TransferOptions{})
			assert.Check(t, is.Equal(len(proxy.Fired())-fired, 1), "the export body was swapped once")
			assert.Check(t, isOp(err, sandboxapi.CodeInvalidArchive), "%v", err)
			assert.Check(t, is.ErrorContains(err, tc.Reason))
			if tc.Entry != "" {
				assert.Check(t, is.ErrorContains(err, fmt.Sprintf("%q", tc.Entry)))
			}
			left, _ := os.ReadDir(parent)
			assert.Check(t, is.Len(left, 0), "destination unchanged")
		})
	}
	// The same sandbox exports normally without the crafted body.
	one := &recordingSink{}
	assert.NilError(t, tr.ExportTree(context.Background(), sandboxapi.Whole(), one, sandboxapi.TransferOptions{}))
	assert.Check(t, one.committed && len(one.entries) == 0)
}

// At the least metadataBatchBytes the contract accepts, an import and an
// export of a tree whose metadata spans many batches round-trip through the
// Engine (docs/contract.md#policy).
func TestTransferAtMinimumMetadataBatch(t *testing.T) {
	policy := enginetest.Policy()
	policy.Transfers.MetadataBatchBytes = sandboxapi.MinMetadataBatchBytes
	policy.Transfers.MetadataMergeFanIn = 2
	sb := started(t, newBackend(t), policy)
	tr := transferer(t, sb)
	src := t.TempDir()
	long := strings.Repeat("d", 200)
	for i := range 120 {
		name := filepath.Join(src, long, fmt.Sprintf("%s-%03d.txt", long, i))
		assert.NilError(t, os.MkdirAll(filepath.Dir(name), 0o755))
		assert.NilError(t, os.WriteFile(name, []byte(strconv.Itoa(i)), 0o644))
	}
	want := snapshot(t, src)
	assert.NilError(t, tr.ImportTree(context.Background(), sandboxapi.DirSource(src), sandboxapi.TransferOptions{}))
	assert.NilError(t, sb.Stop(context.Background()))
	dest := filepath.Join(t.TempDir(), "whole")
	assert.NilError(t, tr.ExportTree(context.Background(), sandboxapi.Whole(), sandboxapi.DirSink(dest), sandboxapi.TransferOptions{}))
	assert.DeepEqual(t, snapshot(t, dest), want)
}

// gatedSource yields one file whose body blocks until release is closed,
// so an import is observably in flight.
type gatedSource struct {
	release chan struct{}
	reading chan struct{}
	done    bool
}

func (g *gatedSource) Next() (sandboxapi.Entry, io.Reader, error) {
	if g.done {
		return sandboxapi.Entry{}, nil, io.EOF
	}
	g.done = true
	return fileE("gated.txt", 0o644, 5), &gatedBody{g: g, r: strings.NewReader("gated")}, nil
}

type gatedBody struct {
	g    *gatedSource
	r    io.Reader
	once sync.Once
}

func (b *gatedBody) Read(p []byte) (int, error) {
	b.once.Do(func() { close(b.g.reading); <-b.g.release })
	return b.r.Read(p)
}

// Import happens before process reservation, and the order holds while an
// import streams: a reservation then fails with a StateError instead of
// reserving a process whose workspace is still being written
// (docs/contract.md#workspace-files). Once the import returned, the
// reservation succeeds and the process sees the imported file.
func TestReservationRefusedWhileImportStreams(t *testing.T) {
	sb := started(t, newBackend(t), enginetest.Policy())
	tr := transferer(t, sb)
	src := &gatedSource{release: make(chan struct{}), reading: make(chan struct{})}
	ierr := make(chan error, 1)
	go func() { ierr <- tr.ImportTree(context.Background(), src, sandboxapi.TransferOptions{}) }()
	select {
	case <-src.reading:
	case err := <-ierr:
		t.Fatalf("import returned before it streamed: %v", err)
	}
	spec := sandboxapi.ProcessSpec{Executable: "/bin/cat", Args: []string{"gated.txt"}, Cwd: sb.Workspace()}
	_, err := sb.ReserveProcess(spec)
	close(src.release)
	var state *sandboxapi.StateError
	assert.Check(t, errors.As(err, &state), "reservation during an import: %v", err)
	assert.NilError(t, <-ierr)
	r := run(t, sb, nil, "/bin/cat", "gated.txt")
	assert.Check(t, is.Equal(string(r.stdout), "gated"), "stderr: %s", r.stderr)
}
