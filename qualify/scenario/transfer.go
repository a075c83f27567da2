package scenario

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/qualify/archivecorpus"
	"github.com/qualbox/qualbox/qualify/faultproxy"
	"github.com/qualbox/qualbox/sandboxapi"
)

// Transfer qualifies workspace transfer (docs/qualification.md#scenarios) on the
// real Engine, in three cases:
//
//   - round-trip: a host tree with names of 101 and 250 bytes, a path over
//     255 bytes, non-ASCII names, an empty file, an empty directory and
//     several mode bits is imported; a shell inside lists what it sees
//     (owner = workload uid:gid, modes, sizes); after Stop the whole
//     workspace, a subtree and a file are exported into DirSinks and
//     compared with the source byte for byte and mode for mode.
//   - guest-symlink: a workload plants `ln -s / /workspace/work/escape`;
//     file and subtree selections through it and the whole export fail,
//     and nothing is written on the host.
//   - hostile-archives: a scenario-owned proxy swaps the export GET body
//     for crafted archives (traversal, absolute name, duplicate, device
//     node, FIFO, links, truncated body, bad checksum, ...); each is
//     rejected with its own invalid_archive error naming the entry, and
//     the destination directory is unchanged.
//
// Host trees live in <Dir>/scratch while the scenario runs and are removed
// at the end; the evidence keeps their listings (path, kind, mode, size,
// SHA-256).
type Transfer struct{}

// TransferParams are the transfer params.
type TransferParams struct {
	// Cases selects "round-trip", "guest-symlink" and "hostile-archives";
	// default all three.
	Cases []string `json:"cases,omitempty"`
	// LargeFileBytes is the size of the tree's largest file; default
	// 200000 bytes (more than three 64 KiB transfer chunks).
	LargeFileBytes int64 `json:"largeFileBytes,omitempty"`
	// Hostile selects hostile-archive cases (HostileArchiveNames); default
	// all.
	Hostile []string `json:"hostile,omitempty"`
}

// HostileArchiveNames lists the hostile-archive cases of the transfer
// scenario, in the order they run (archivecorpus.HostileNames; each case's
// crafted body and expected rejection are archivecorpus.Hostiles).
var HostileArchiveNames = archivecorpus.HostileNames

// TransferCases are the transfer scenario's cases, in run order.
var TransferCases = []string{"round-trip", "guest-symlink", "hostile-archives"}

// Name returns "transfer".
func (Transfer) Name() string { return "transfer" }

func (Transfer) params(raw map[string]any) (TransferParams, error) {
	var p TransferParams
	if err := DecodeParams(raw, &p); err != nil {
		return p, err
	}
	if p.Cases == nil {
		p.Cases = TransferCases
	}
	if p.Hostile == nil {
		p.Hostile = HostileArchiveNames
	}
	if p.LargeFileBytes == 0 {
		p.LargeFileBytes = 200000
	}
	if err := oneOf("cases", p.Cases, TransferCases); err != nil {
		return p, err
	}
	if err := oneOf("hostile", p.Hostile, HostileArchiveNames); err != nil {
		return p, err
	}
	if p.LargeFileBytes < 1 || p.LargeFileBytes > 64<<20 {
		return p, fmt.Errorf("params.largeFileBytes: want 1..64 MiB, got %d", p.LargeFileBytes)
	}
	return p, nil
}

// oneOf checks that vs is a non-empty list of distinct allowed values.
func oneOf(key string, vs, allowed []string) error {
	if len(vs) == 0 {
		return fmt.Errorf("params.%s: want at least one of %s", key, strings.Join(allowed, ", "))
	}
	seen := map[string]bool{}
	for i, v := range vs {
		if !slices.Contains(allowed, v) {
			return fmt.Errorf("params.%s[%d]: unknown %q; allowed: %s", key, i, v, strings.Join(allowed, ", "))
		}
		if seen[v] {
			return fmt.Errorf("params.%s[%d]: %q is listed twice", key, i, v)
		}
		seen[v] = true
	}
	return nil
}

// Validate checks params: cases, largeFileBytes, hostile.
func (s Transfer) Validate(params map[string]any) error {
	_, err := s.params(params)
	return err
}

// Run executes the selected cases; each runs in its own sandbox.
func (s Transfer) Run(ctx context.Context, env *Env, params map[string]any, rec *Record) error {
	p, err := s.params(params)
	if err != nil {
		return err
	}
	rec.Request("cases", p.Cases)
	scratch := filepath.Join(env.Dir, "scratch")
	if err := os.Mkdir(scratch, 0o700); err != nil {
		return err
	}
	defer func() { rec.CleanupError("remove scratch trees", os.RemoveAll(scratch)) }()
	var errs []error
	for _, c := range p.Cases {
		dir := filepath.Join(scratch, c)
		if err := os.Mkdir(dir, 0o700); err != nil {
			return err
		}
		var err error
		switch c {
		case "round-trip":
			err = transferRoundTrip(ctx, env, rec, dir, p.LargeFileBytes)
		case "guest-symlink":
			err = transferGuestSymlink(ctx, env, rec, dir)
		case "hostile-archives":
			err = transferHostile(ctx, env, rec, dir, p.Hostile)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c, err))
		}
	}
	return errors.Join(errs...)
}

// Names of the round-trip tree.
var (
	name101  = strings.Repeat("a", 97) + ".txt"
	name250  = strings.Repeat("b", 246) + ".bin"
	deepDir  = "deep/" + strings.Repeat("c", 120) + "/" + strings.Repeat("d", 120)
	deepFile = deepDir + "/" + strings.Repeat("e", 60) + ".txt" // 311 bytes
)

// Selections exported besides the whole workspace.
const (
	roundTripSubtree = "artifacts/nested"
)

// buildTree writes the round-trip tree into root and sets every mode
// explicitly (no umask).
func buildTree(root string, largeBytes int64) error {
	large := make([]byte, largeBytes)
	for i := range large {
		large[i] = byte(i*7 + i/251)
	}
	type item struct {
		path string
		dir  bool
		mode fs.FileMode
		body []byte
	}
	items := []item{
		{path: "deep", dir: true, mode: 0o755},
		{path: "deep/" + strings.Repeat("c", 120), dir: true, mode: 0o755},
		{path: deepDir, dir: true, mode: 0o755},
		{path: deepFile, mode: 0o644, body: []byte("a path of more than 255 bytes\n")},
		{path: name101, mode: 0o644, body: []byte("101\n")},
		{path: name250, mode: 0o640, body: large},
		{path: "données", dir: true, mode: 0o750},
		{path: "données/日本語", dir: true, mode: 0o750},
		{path: "données/日本語/ファイル.txt", mode: 0o600, body: []byte("héllo wörld\n")},
		{path: "empty", mode: 0o644, body: nil},
		{path: "emptydir", dir: true, mode: 0o700},
		{path: "run.sh", mode: 0o755, body: []byte("#!/bin/sh\necho ok\n")},
		{path: "readonly.txt", mode: 0o444, body: []byte("read only\n")},
		{path: "artifacts", dir: true, mode: 0o711},
		{path: "artifacts/other.txt", mode: 0o664, body: []byte("not selected\n")},
		{path: "artifacts/nested", dir: true, mode: 0o755},
		{path: "artifacts/nested/report.txt", mode: 0o644, body: []byte("report\n")},
	}
	for _, it := range items {
		host := filepath.Join(root, filepath.FromSlash(it.path))
		var err error
		if it.dir {
			err = os.Mkdir(host, 0o700)
		} else {
			err = os.WriteFile(host, it.body, 0o600)
		}
		if err != nil {
			return err
		}
	}
	// Modes last, deepest first, so restrictive directories do not block
	// the writes below them.
	for i := len(items) - 1; i >= 0; i-- {
		if err := os.Chmod(filepath.Join(root, filepath.FromSlash(items[i].path)), items[i].mode); err != nil {
			return err
		}
	}
	return nil
}

// treeEntry is one entry of a host tree listing.
type treeEntry struct {
	Path   string `json:"path"`
	Kind   string `json:"kind"`
	Mode   string `json:"mode"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty"`
}

func (e treeEntry) String() string {
	return fmt.Sprintf("%s %s %d %s %s", e.Kind, e.Mode, e.Size, e.SHA256, e.Path)
}

// longNames reports whether entries hold a file whose last path element
// is 101 bytes and one whose last element is 250 bytes, and the length of
// the longest file path.
func longNames(entries []treeEntry) (has101, has250 bool, longest int) {
	for _, e := range entries {
		if e.Kind != "file" {
			continue
		}
		switch len(path.Base(e.Path)) {
		case 101:
			has101 = true
		case 250:
			has250 = true
		}
		longest = max(longest, len(e.Path))
	}
	return has101, has250, longest
}

// listTree lists root's descendants in lexical order without following
// links; a file's bytes are summarized by their SHA-256.
func listTree(root string) ([]treeEntry, error) {
	var out []treeEntry
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		e := treeEntry{Path: filepath.ToSlash(rel), Mode: fmt.Sprintf("%04o", info.Mode().Perm())}
		switch {
		case info.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			e.Kind, e.Size, e.SHA256 = "file", int64(len(data)), hex.EncodeToString(sum[:])
		case info.IsDir():
			e.Kind = "dir"
		default:
			e.Kind = "other:" + info.Mode().Type().String()
		}
		out = append(out, e)
		return nil
	})
	return out, err
}

// treeDigest renders a listing as "<n> entries sha256:<digest of the
// lines>" for compact want/got values.
func treeDigest(es []treeEntry) string {
	h := sha256.New()
	for _, e := range es {
		fmt.Fprintln(h, e.String())
	}
	return fmt.Sprintf("%d entries sha256:%s", len(es), hex.EncodeToString(h.Sum(nil))[:16])
}

// compareTrees records a check that got equals want, entry for entry
// (bytes by SHA-256, kind, mode, size); on a difference got names the
// differing lines.
func compareTrees(rec *Record, name string, want, got []treeEntry) bool {
	w, g := treeDigest(want), treeDigest(got)
	if w == g {
		return rec.Check(name, w, g, true)
	}
	return rec.Check(name, w, g+"; differs: "+strings.Join(lineDiff(lines(want), lines(got)), "; "), false)
}

func lines[T fmt.Stringer](es []T) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.String()
	}
	return out
}

// lineDiff returns "-line" for lines only in want and "+line" for lines
// only in got.
func lineDiff(want, got []string) []string {
	var out []string
	for _, l := range want {
		if !slices.Contains(got, l) {
			out = append(out, "-"+l)
		}
	}
	for _, l := range got {
		if !slices.Contains(want, l) {
			out = append(out, "+"+l)
		}
	}
	return out
}

// selectEntries returns the entries of a subtree or file selection at sel:
// its ancestors, itself and (for a subtree) its descendants.
func selectEntries(all []treeEntry, sel string) []treeEntry {
	var out []treeEntry
	for _, e := range all {
		if e.Path == sel || strings.HasPrefix(sel, e.Path+"/") || strings.HasPrefix(e.Path, sel+"/") {
			out = append(out, e)
		}
	}
	return out
}

// guestListing is the shell walk of the workspace inside the sandbox: one
// line "<kind> <uid>:<gid> <mode> <size> <path>" per entry (size 0 for a
// directory), links reported, never followed.
const guestListing = `walk() {
  for f in "$1"/*; do
    if [ -L "$f" ]; then echo "link - - 0 ${f#./}"; continue; fi
    [ -e "$f" ] || continue
    if [ -d "$f" ]; then stat -c "dir %u:%g %a 0 ${f#./}" "$f"; walk "$f"
    else stat -c "file %u:%g %a %s ${f#./}" "$f"; fi
  done
}
cd ` + driver.WorkPath + ` && walk .`

// expectedGuest renders the host listing as guestListing prints it for
// files owned by user.
func expectedGuest(es []treeEntry, user driver.User) []string {
	out := make([]string, 0, len(es))
	for _, e := range es {
		out = append(out, fmt.Sprintf("%s %d:%d %o %d %s", e.Kind, user.UID, user.GID, parseMode(e.Mode), e.Size, e.Path))
	}
	sort.Strings(out)
	return out
}

func parseMode(s string) fs.FileMode {
	var m uint32
	fmt.Sscanf(s, "%o", &m)
	return fs.FileMode(m)
}

func transferer(sb sandboxapi.Sandbox) (sandboxapi.Transferer, error) {
	tr, ok := sb.(sandboxapi.Transferer)
	if !ok {
		return nil, fmt.Errorf("sandbox %T does not implement sandboxapi.Transferer", sb)
	}
	return tr, nil
}

func transferRoundTrip(ctx context.Context, env *Env, rec *Record, dir string, largeBytes int64) error {
	src := filepath.Join(dir, "source")
	if err := os.Mkdir(src, 0o700); err != nil {
		return err
	}
	if err := buildTree(src, largeBytes); err != nil {
		return fmt.Errorf("build host tree: %w", err)
	}
	want, err := listTree(src)
	if err != nil {
		return err
	}
	rec.Request("round-trip: host tree", want)
	n101, n250, longest := longNames(want)
	rec.Check("round-trip: host tree (as listed from disk) has a 101-byte name, a 250-byte name and a path over 255 bytes",
		"101, 250, >255", fmt.Sprintf("%t, %t, %d", n101, n250, longest), n101 && n250 && longest > 255)

	o, err := startObserved(ctx, env, rec, "round-trip", env.Policy)
	defer o.cleanup(ctx)
	if err != nil {
		return err
	}
	tr, err := transferer(o.sb)
	if err != nil {
		return err
	}
	err = tr.ImportTree(ctx, sandboxapi.DirSource(src), sandboxapi.TransferOptions{})
	if !rec.Check("round-trip: ImportTree", "nil", errText(err), err == nil) {
		return nil
	}
	// Export needs stopped compute: while it runs, a StateError.
	err = tr.ExportTree(ctx, sandboxapi.Whole(), sandboxapi.DirSink(filepath.Join(dir, "early")), sandboxapi.TransferOptions{})
	var state *sandboxapi.StateError
	rec.Check("round-trip: export while compute runs", "*sandboxapi.StateError", fmt.Sprintf("%T: %s", err, errText(err)), errors.As(err, &state))

	exit, stdout, stderr, err := o.run(ctx, shellSpec(guestListing))
	if err != nil {
		return err
	}
	rec.Equal("round-trip: guest listing exit", sandboxapi.Exited(0).String(), exit.String())
	got := strings.Split(strings.TrimSpace(string(stdout)), "\n")
	sort.Strings(got)
	exp := expectedGuest(want, env.User)
	rec.Observe("round-trip: guest listing", got)
	diff := lineDiff(exp, got)
	rec.Check("round-trip: guest sees every entry owned by the workload uid:gid with its mode and size",
		fmt.Sprintf("%d entries, owner %d:%d, modes and sizes as imported", len(exp), env.User.UID, env.User.GID),
		fmt.Sprintf("%d entries; differs: %q; stderr %q", len(got), diff, stderr), len(diff) == 0)
	o.snap("during")

	stopErr := o.stop(ctx)
	if !rec.Check("round-trip: stop compute", "nil", errText(stopErr), stopErr == nil) {
		return nil
	}
	exports := []struct {
		name string
		sel  sandboxapi.Selection
		want []treeEntry
	}{
		{"whole workspace", sandboxapi.Whole(), want},
		{"subtree " + roundTripSubtree, sandboxapi.Subtree(roundTripSubtree), selectEntries(want, roundTripSubtree)},
		{"file " + deepFile[:24] + "…", sandboxapi.File(deepFile), selectEntries(want, deepFile)},
	}
	for i, x := range exports {
		dest := filepath.Join(dir, fmt.Sprintf("export-%d", i))
		err := tr.ExportTree(ctx, x.sel, sandboxapi.DirSink(dest), sandboxapi.TransferOptions{})
		if !rec.Check("round-trip: export "+x.name, "nil", errText(err), err == nil) {
			continue
		}
		got, err := listTree(dest)
		if err != nil {
			return err
		}
		rec.Observe("round-trip: exported "+x.name, got)
		compareTrees(rec, "round-trip: export "+x.name+" equals the source (bytes, kinds, modes)", x.want, got)
	}
	return nil
}

// symlinkSelections go through the guest-planted link.
var symlinkSelections = []sandboxapi.Selection{
	sandboxapi.Subtree("escape"), sandboxapi.Subtree("escape/etc"), sandboxapi.File("escape/etc/passwd"),
	sandboxapi.File("escape"), sandboxapi.Subtree("sub/link"), sandboxapi.File("sub/link/etc/hostname"),
}

func selName(s sandboxapi.Selection) string {
	if s.Kind == sandboxapi.SelectWhole {
		return "whole"
	}
	return string(s.Kind) + " " + s.Path
}

func transferGuestSymlink(ctx context.Context, env *Env, rec *Record, dir string) error {
	o, err := startObserved(ctx, env, rec, "guest-symlink", env.Policy)
	defer o.cleanup(ctx)
	if err != nil {
		return err
	}
	tr, err := transferer(o.sb)
	if err != nil {
		return err
	}
	plant := "mkdir sub && echo hi > sub/f && ln -s / " + driver.WorkPath + "/escape && ln -s / sub/link && echo planted"
	rec.Request("guest-symlink: planted by the workload", plant)
	exit, stdout, stderr, err := o.run(ctx, shellSpec(plant))
	if err != nil {
		return err
	}
	if !rec.Check("guest-symlink: workload planted the links", "planted, exit 0", fmt.Sprintf("%q, %s, stderr %q", stdout, exit, stderr),
		string(stdout) == "planted\n" && exit == sandboxapi.Exited(0)) {
		return nil
	}
	o.snap("during")
	stopErr := o.stop(ctx)
	if !rec.Check("guest-symlink: stop compute", "nil", errText(stopErr), stopErr == nil) {
		return nil
	}
	parent := filepath.Join(dir, "exports")
	if err := os.Mkdir(parent, 0o700); err != nil {
		return err
	}
	hostAfter := func() string {
		es, err := os.ReadDir(parent)
		if err != nil {
			return err.Error()
		}
		return fmt.Sprintf("%d host entries", len(es))
	}
	for _, sel := range symlinkSelections {
		err := tr.ExportTree(ctx, sel, sandboxapi.DirSink(filepath.Join(parent, "out")), sandboxapi.TransferOptions{})
		var ve *sandboxapi.ValidationError
		host := hostAfter()
		rec.Check("guest-symlink: export "+selName(sel)+" is refused, nothing written",
			"*sandboxapi.ValidationError naming a symbolic link; 0 host entries",
			fmt.Sprintf("%T: %s; %s", err, errText(err), host),
			errors.As(err, &ve) && strings.Contains(errText(err), "symbolic link") && host == "0 host entries")
	}
	err = tr.ExportTree(ctx, sandboxapi.Whole(), sandboxapi.DirSink(filepath.Join(parent, "out")), sandboxapi.TransferOptions{})
	host := hostAfter()
	rec.Check("guest-symlink: export whole is refused, nothing written",
		"invalid_archive naming the symbolic link escape; 0 host entries",
		fmt.Sprintf("%s; %s", errText(err), host),
		isOp(err, sandboxapi.CodeInvalidArchive) && strings.Contains(errText(err), `"work/escape"`) && strings.Contains(errText(err), "symbolic link") && host == "0 host entries")
	// Control: a real file of the same workspace exports.
	control := filepath.Join(dir, "control")
	err = tr.ExportTree(ctx, sandboxapi.File("sub/f"), sandboxapi.DirSink(control), sandboxapi.TransferOptions{})
	data, rerr := os.ReadFile(filepath.Join(control, "sub", "f"))
	rec.Check("guest-symlink: control: file sub/f exports its bytes", `nil, "hi\n"`, fmt.Sprintf("%s, %q", errText(err), data), err == nil && rerr == nil && string(data) == "hi\n")
	return nil
}

func isOp(err error, code sandboxapi.Code) bool {
	var op *sandboxapi.OperationError
	return errors.As(err, &op) && op.Code == code
}

// transferHostile exports crafted archives through a proxy that swaps
// them in for the Engine's, in steps:
//
//  1. the hostile cases named (archivecorpus.Hostiles);
//  2. a swap proxy to the Engine (openProxy) and a backend behind it;
//  3. a started sandbox whose workspace holds a control file, then
//     stopped (prepare);
//  4. a destination directory holding one file (destination);
//  5. each case (hostileCase): rejected with its reason, its body
//     swapped once, the destination unchanged, an error of its own;
//  6. the control: without a swap the same sandbox exports (control).
func transferHostile(ctx context.Context, env *Env, rec *Record, dir string, names []string) error {
	cases, err := archivecorpus.Hostiles(names...)
	if err != nil {
		return err
	}
	h := &hostile{env: env, rec: rec, dir: dir, exportGET: faultproxy.Request("GET", `/containers/[^/]+/archive`), seen: map[string]string{}}
	if err := h.openProxy(); err != nil {
		return err
	}
	defer h.closeProxy()
	b, err := h.backend()
	if err != nil {
		return err
	}
	o, err := startObservedWith(ctx, env, rec, "hostile-archives", env.Policy, b)
	defer o.cleanup(ctx)
	if err != nil {
		return err
	}
	if ready, err := h.prepare(ctx, o); !ready || err != nil {
		return err
	}
	if err := h.destination(); err != nil {
		return err
	}
	rec.Request("hostile-archives: cases", cases)
	for _, c := range cases {
		if err := h.hostileCase(ctx, c); err != nil {
			return err
		}
	}
	h.control(ctx)
	return nil
}

// hostile is the state of one transferHostile as its steps fill it.
type hostile struct {
	env *Env
	rec *Record
	dir string
	// proxy, in its own short directory pdir (the Unix socket path
	// limit), swaps the body of the export GETs exportGET matches.
	pdir      string
	proxy     *faultproxy.Proxy
	exportGET faultproxy.Match
	tr        sandboxapi.Transferer
	// parent is the destination's parent directory and before its
	// listing before any export; seen maps each case's error text to
	// the case.
	parent string
	before []treeEntry
	seen   map[string]string
}

// openProxy starts the swap proxy, which keeps the Engine's headers (the
// path stat the driver compares) when it swaps a body.
func (h *hostile) openProxy() error {
	pdir, err := os.MkdirTemp("", "qualbox-swap-")
	if err != nil {
		return err
	}
	proxy, err := faultproxy.New(pdir, h.env.Endpoint)
	if err != nil {
		os.RemoveAll(pdir)
		return err
	}
	h.pdir, h.proxy = pdir, proxy
	return nil
}

// closeProxy closes the proxy and removes its directory, recording a
// failure as a cleanup error.
func (h *hostile) closeProxy() {
	h.rec.CleanupError("close swap proxy", errors.Join(h.proxy.Close(), os.RemoveAll(h.pdir)))
}

// backend is a driver backend whose Engine endpoint is the proxy.
func (h *hostile) backend() (*driver.Backend, error) {
	env := h.env
	spill := filepath.Join(env.Dir, "spill-hostile")
	if err := os.MkdirAll(spill, 0o700); err != nil {
		return nil, err
	}
	return driver.New(driver.Config{
		Profile: env.Profile, Endpoint: h.proxy.Endpoint(), Namespace: env.Namespace,
		SpillDirectory: spill, ImageID: env.ImageID, User: env.User,
	})
}

// prepare writes the control file, so the control export has something
// to commit, and stops compute. It reports false when a check failed and
// nothing more can be judged.
func (h *hostile) prepare(ctx context.Context, o *observed) (bool, error) {
	tr, err := transferer(o.sb)
	if err != nil {
		return false, err
	}
	h.tr = tr
	exit, _, _, err := o.run(ctx, shellSpec("printf 'control\\n' > "+controlFile))
	if err != nil {
		return false, err
	}
	if !h.rec.Equal("hostile-archives: control file written", sandboxapi.Exited(0).String(), exit.String()) {
		return false, nil
	}
	o.snap("during")
	if stopErr := o.stop(ctx); !h.rec.Check("hostile-archives: stop compute", "nil", errText(stopErr), stopErr == nil) {
		return false, nil
	}
	return true, nil
}

// destination makes the directory every hostile export writes under,
// holding one file, and lists it.
func (h *hostile) destination() error {
	h.parent = filepath.Join(h.dir, "dest")
	if err := os.Mkdir(h.parent, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(h.parent, "keep.txt"), []byte("unchanged\n"), 0o644); err != nil {
		return err
	}
	before, err := listTree(h.parent)
	if err != nil {
		return err
	}
	h.before = before
	return nil
}

// hostileCase exports the whole workspace with c's archive swapped in and
// checks the export is rejected with c's reason (and entry), the body was
// swapped once, the destination is unchanged, and no earlier case failed
// with the same error.
func (h *hostile) hostileCase(ctx context.Context, c archivecorpus.Hostile) error {
	n := len(h.proxy.Fired())
	h.proxy.SetRules(faultproxy.ReplaceBody(h.exportGET, "application/x-tar", c.Body))
	err := h.tr.ExportTree(ctx, sandboxapi.Whole(), sandboxapi.DirSink(filepath.Join(h.parent, "out")), sandboxapi.TransferOptions{})
	h.proxy.SetRules()
	after, lerr := listTree(h.parent)
	if lerr != nil {
		return lerr
	}
	msg := errText(err)
	want := "invalid_archive: " + c.Reason
	ok := isOp(err, sandboxapi.CodeInvalidArchive) && strings.Contains(msg, c.Reason)
	if c.Entry != "" {
		want += fmt.Sprintf(" at %q", c.Entry)
		ok = ok && strings.Contains(msg, fmt.Sprintf("%q", c.Entry))
	}
	other, dup := h.seen[msg]
	h.seen[msg] = c.Name
	unchanged := treeDigest(after) == treeDigest(h.before)
	swapped := len(h.proxy.Fired()) - n
	got := fmt.Sprintf("%s; body swapped %d time(s); destination %s", msg, swapped, map[bool]string{true: "unchanged", false: "CHANGED: " + strings.Join(lineDiff(lines(h.before), lines(after)), "; ")}[unchanged])
	if dup {
		got += "; same error as " + other
	}
	h.rec.Check("hostile-archives: "+c.Name+" is rejected", want+"; body swapped 1 time(s); destination unchanged", got,
		ok && swapped == 1 && unchanged && !dup)
	return nil
}

// control checks that without a swapped body the same sandbox exports
// the workspace, the control file alone, normally.
func (h *hostile) control(ctx context.Context) {
	control := filepath.Join(h.dir, "control")
	err := h.tr.ExportTree(ctx, sandboxapi.Whole(), sandboxapi.DirSink(control), sandboxapi.TransferOptions{})
	es, lerr := listTree(control)
	listed := "listed"
	if lerr != nil {
		listed = "list: " + lerr.Error()
	}
	sum := sha256.Sum256([]byte("control\n"))
	wantEntry := treeEntry{Path: controlFile, Kind: "file", Size: 8, SHA256: hex.EncodeToString(sum[:])}
	got := make([]string, 0, len(es))
	ok := err == nil && lerr == nil && len(es) == 1
	for _, e := range es {
		got = append(got, fmt.Sprintf("%s %s %d %s", e.Kind, e.Path, e.Size, e.SHA256))
		ok = ok && e.Path == wantEntry.Path && e.Kind == wantEntry.Kind && e.Size == wantEntry.Size && e.SHA256 == wantEntry.SHA256
	}
	h.rec.Check("hostile-archives: control: the untouched export commits the workspace",
		fmt.Sprintf("nil; listed; [file %s %d %s]", wantEntry.Path, wantEntry.Size, wantEntry.SHA256),
		fmt.Sprintf("%s; %s; %v", errText(err), listed, got), ok)
}

// controlFile is what the hostile-archives control exports.
const controlFile = "control.txt"
