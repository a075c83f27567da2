package archive

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/qualify/archivecorpus"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite testdata/fuzz/FuzzValidate from the crafted cases")

type ent struct {
	name string
	typ  byte
	body string
	mode int64
	pax  map[string]string
	link string
}

// build writes entries with archive/tar (PAX where needed) and the two end
// blocks.
func build(t testing.TB, ents ...ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		h := &tar.Header{Typeflag: typ, Name: e.name, Mode: mode, Size: int64(len(e.body)), ModTime: time.Unix(1700000000, 0), PAXRecords: e.pax, Linkname: e.link, Uid: 65534, Gid: 65534}
		if typ != tar.TypeReg {
			h.Size = 0
		}
		assert.NilError(t, tw.WriteHeader(h))
		if typ == tar.TypeReg {
			_, err := io.WriteString(tw, e.body)
			assert.NilError(t, err)
		}
	}
	assert.NilError(t, tw.Close())
	return buf.Bytes()
}

func zeros(n int) []byte { return make([]byte, n) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func paxBlock(name string, recs ...string) []byte {
	var body []byte
	for _, r := range recs {
		n := len(r) + 3
		for len(strconv.Itoa(n))+len(r)+2 != n {
			n++
		}
		body = fmt.Appendf(body, "%d %s\n", n, r)
	}
	h := archivecorpus.RawHeader(name, 'x', fmt.Sprintf("%011o\x00", len(body)), nil)
	pad := (BlockSize - len(body)%BlockSize) % BlockSize
	return cat(h, body, zeros(pad))
}

type crafted struct {
	name   string
	data   []byte
	entry  string // the entry the error must name ("" for stream-level)
	reason string
	limit  bool
}

func craftedCases(t testing.TB) []crafted {
	good := build(t, ent{name: "a.txt", body: "hello"})
	end := zeros(2 * BlockSize)
	badSum := bytes.Clone(good)
	badSum[0] = 'b' // "b.txt" under a.txt's checksum
	truncated := good[:BlockSize+3]
	oneEnd := good[:len(good)-BlockSize]
	noEnd := good[:2*BlockSize]
	badPad := bytes.Clone(good)
	badPad[BlockSize+10] = 1
	return []crafted{
		{"dotdot", build(t, ent{name: "../evil", body: "x"}), "../evil", "traversal", false},
		{"dotdot inside", build(t, ent{name: "a/", typ: tar.TypeDir}, ent{name: "a/../../evil", body: "x"}), "a/../../evil", "traversal", false},
		{"absolute", build(t, ent{name: "/etc/passwd", body: "x"}), "/etc/passwd", "absolute", false},
		{"dot component", build(t, ent{name: "./a", body: "x"}), "./a", "not canonical", false},
		{"duplicate adjacent", build(t, ent{name: "a", body: "1"}, ent{name: "a", body: "2"}), "a", "duplicate", false},
		{"duplicate apart", build(t, ent{name: "d/", typ: tar.TypeDir}, ent{name: "d/a", body: "1"}, ent{name: "d/b"}, ent{name: "d/a", body: "2"}), "d/a", "duplicate", false},
		{"file used as directory", build(t, ent{name: "x", body: "1"}, ent{name: "x/y", body: "2"}), "x/y", "conflicting ancestor", false},
		{"missing parent", build(t, ent{name: "p/q", body: "1"}), "p/q", "parent directory", false},
		{"truncated body", truncated, "a.txt", "truncated", false},
		{"bad checksum", badSum, "b.txt", "checksum", false},
		{"missing end blocks", noEnd, "", "end-of-archive", false},
		{"one end block", oneEnd, "", "end-of-archive", false},
		{"nonzero padding", badPad, "a.txt", "padding", false},
		{"data after end", cat(good, []byte("junk")), "", "data follows", false},
		{"char device", build(t, ent{name: "null", typ: tar.TypeChar}), "null", "device", false},
		{"block device", build(t, ent{name: "sda", typ: tar.TypeBlock}), "sda", "device", false},
		{"fifo", build(t, ent{name: "pipe", typ: tar.TypeFifo}), "pipe", "FIFO", false},
		{"symlink", build(t, ent{name: "escape", typ: tar.TypeSymlink, link: "/"}), "escape", "symbolic link", false},
		{"hardlink", build(t, ent{name: "a", body: "x"}, ent{name: "b", typ: tar.TypeLink, link: "a"}), "b", "hard link", false},
		{"gnu sparse type", cat(archivecorpus.RawHeader("sparse", 'S', "00000000000\x00", nil), end), "sparse", "sparse", false},
		{"pax sparse", cat(paxBlock("x", "GNU.sparse.major=1", "GNU.sparse.name=big"), archivecorpus.RawHeader("big", '0', "00000000000\x00", nil), end), "big", "sparse", false},
		{"base-256 size", cat(archivecorpus.RawHeader("big", '0', "", func(b []byte) { b[124] = 0x80; b[135] = 1 }), end), "big", "base-256", true},
		{"pax size override", cat(paxBlock("big", "size=8589934592"), archivecorpus.RawHeader("big", '0', "00000000000\x00", nil), end), "big", "PAX size override", true},
		{"12-digit size", cat(archivecorpus.RawHeader("big", '0', "100000000000", nil), end), "big", "exceeds the limit", true},
		{"global pax", cat(paxBlock("g"), end), "", "", false},
		{"gnu long name", cat(archivecorpus.RawHeader("././@LongLink", 'L', "00000000005\x00", nil), []byte("long\x00"), zeros(BlockSize-5), end), "long", "GNU long-name", false},
		{"unknown pax key", cat(paxBlock("a", "nonsense=1"), archivecorpus.RawHeader("a", '0', "00000000000\x00", nil), end), "a", "unsupported", false},
		{"bad pax length", cat(paxBlock("a", "path=ab")[:BlockSize], []byte("99 path=ab\n"), zeros(BlockSize-11), archivecorpus.RawHeader("a", '0', "00000000000\x00", nil), end), "", "", false},
		{"unknown magic", cat(archivecorpus.RawHeader("a", '0', "00000000000\x00", func(b []byte) { copy(b[257:], "nope\x00\x00\x00\x00") }), end), "a", "magic", false},
		{"empty stream", nil, "", "end-of-archive", false},
	}
}

func TestValidateRejectsCraftedArchives(t *testing.T) {
	for _, tc := range craftedCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Validate(bytes.NewReader(tc.data))
			var ae *Error
			assert.Assert(t, errors.As(err, &ae), "got %v", err)
			if tc.entry != "" {
				assert.Check(t, is.Equal(ae.Entry, tc.entry), "%v", err)
			}
			assert.Check(t, is.ErrorContains(err, tc.reason))
			assert.Check(t, is.Equal(ae.Limit, tc.limit), "%v", err)
		})
	}
}

func TestValidateAcceptsEngineShapes(t *testing.T) {
	long101 := strings.Repeat("n", 101)
	long250 := strings.Repeat("é", 125)
	deep := strings.Repeat("d", 200) + "/" + strings.Repeat("e", 200)
	data := build(t,
		ent{name: "work/", typ: tar.TypeDir, mode: 0o755},
		ent{name: "work/empty", body: ""},
		ent{name: "work/emptydir/", typ: tar.TypeDir, mode: 0o700},
		ent{name: "work/" + long101, body: "101"},
		ent{name: "work/" + long250, body: "250"},
		ent{name: "work/" + strings.Repeat("d", 200) + "/", typ: tar.TypeDir},
		ent{name: "work/" + deep, body: "deep", mode: 0o640},
		ent{name: "work/x", body: strings.Repeat("z", 1000), mode: 0o755, pax: map[string]string{"SCHILY.xattr.user.k": "v"}},
		ent{name: "work/x-1", body: "sibling sorts between x and x/ in byte order"},
	)
	// Trailing zero record padding, as GNU tar writes it.
	data = append(data, zeros(3*BlockSize)...)
	hdrs, err := Validate(bytes.NewReader(data))
	assert.NilError(t, err)
	assert.Equal(t, len(hdrs), 9)
	assert.DeepEqual(t, hdrs[6], Header{Name: "work/" + deep, Mode: 0o640, Size: 4, Offset: 8192})
	assert.Check(t, hdrs[2].Dir && hdrs[2].Mode == 0o700)
}

func TestReaderBodyIsExact(t *testing.T) {
	data := build(t, ent{name: "a", body: "abc"}, ent{name: "b", body: strings.Repeat("q", 513)})
	r := NewReader(bytes.NewReader(data), BlockSize)
	h, err := r.Next()
	assert.NilError(t, err)
	assert.Equal(t, h.Name, "a")
	// Unread body is skipped and its padding checked.
	h, err = r.Next()
	assert.NilError(t, err)
	assert.Equal(t, h.Name, "b")
	body, err := io.ReadAll(r)
	assert.NilError(t, err)
	assert.Equal(t, len(body), 513)
	_, err = r.Next()
	assert.Equal(t, err, io.EOF)
	assert.Equal(t, r.Offset(), int64(len(data)))
}

func TestSortRecordsGroupDescendants(t *testing.T) {
	var s Sorted
	names := []struct {
		n   string
		dir bool
	}{{"x", false}, {"x-1", false}, {"x.txt", false}}
	var recs [][]byte
	for _, n := range names {
		recs = append(recs, AppendRecord(nil, n.n, n.dir, 0))
	}
	recs = append(recs, AppendRecord(nil, "x/y", false, 0))
	// In byte order "x-1" < "x/y"; in record order x/y must come right after x.
	for _, r := range sortedCopy(recs) {
		if err := s.Add(r); err != nil {
			assert.ErrorContains(t, err, "conflicting ancestor")
			return
		}
	}
	t.Fatal("x/y under regular file x was not rejected")
}

func sortedCopy(recs [][]byte) [][]byte {
	out := make([][]byte, len(recs))
	copy(out, recs)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if bytes.Compare(out[j], out[i]) < 0 {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestRecordEncodingIsInjective(t *testing.T) {
	a := AppendRecord(nil, "a\x01b", false, 0)
	b := AppendRecord(nil, "a/b", false, 0)
	assert.Check(t, !bytes.Equal(a, b))
	assert.Equal(t, decode(a[:len(a)-recordTail]), "a\x01b")
}

// TestSeedCorpus keeps testdata/fuzz/FuzzValidate in step with the crafted
// cases; run with -update-corpus to rewrite it.
func TestSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzValidate")
	seeds := craftedCases(t)
	seeds = append(seeds, crafted{name: "valid", data: build(t, ent{name: "w/", typ: tar.TypeDir}, ent{name: "w/a", body: "hello"}, ent{name: "w/" + strings.Repeat("p", 150), body: ""})})
	if *updateCorpus {
		assert.NilError(t, os.MkdirAll(dir, 0o755))
		for _, s := range seeds {
			name := strings.ReplaceAll(s.name, " ", "-")
			content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s.data)
			assert.NilError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
		}
	}
	ents, err := os.ReadDir(dir)
	assert.NilError(t, err)
	assert.Check(t, len(ents) >= len(seeds), "seed corpus is checked in (go test -run TestSeedCorpus -update-corpus)")
}

func FuzzValidate(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		hdrs, err := Validate(bytes.NewReader(data))
		if err != nil {
			var ae *Error
			if !errors.As(err, &ae) {
				t.Fatalf("non-archive error %T: %v", err, err)
			}
			return
		}
		// Whatever passes is also a well-formed archive for archive/tar,
		// with the same entries, and respects the bounds.
		tr := tar.NewReader(bytes.NewReader(data))
		for i := 0; ; i++ {
			h, err := tr.Next()
			if err == io.EOF {
				if i != len(hdrs) {
					t.Fatalf("archive/tar saw %d entries, validator %d", i, len(hdrs))
				}
				break
			}
			if err != nil {
				t.Fatalf("validator accepted what archive/tar rejects: %v", err)
			}
			if i >= len(hdrs) {
				t.Fatalf("archive/tar saw more entries than the validator")
			}
			want := hdrs[i]
			if strings.TrimSuffix(h.Name, "/") != want.Name || h.Size != want.Size {
				t.Fatalf("entry %d: archive/tar %q/%d, validator %q/%d", i, h.Name, h.Size, want.Name, want.Size)
			}
			if want.Size > MaxSize || strings.HasPrefix(want.Name, "/") || strings.Contains("/"+want.Name+"/", "/../") {
				t.Fatalf("entry %q escapes the bounds", want.Name)
			}
		}
	})
}

func TestCheckHeadRejectsCompressedBodies(t *testing.T) {
	good := build(t, ent{name: "a", body: "x"})
	assert.NilError(t, CheckHead(good))
	assert.NilError(t, CheckHead(zeros(2*BlockSize)), "an empty archive is two zero blocks")
	for name, head := range map[string][]byte{
		"gzip":  append([]byte("\x1f\x8b\x08\x00"), zeros(BlockSize)...),
		"bzip2": append([]byte("BZh91AY"), zeros(BlockSize)...),
		"xz":    append([]byte("\xfd7zXZ\x00"), zeros(BlockSize)...),
		"zstd":  append([]byte("\x28\xb5\x2f\xfd"), zeros(BlockSize)...),
	} {
		assert.Check(t, is.ErrorContains(CheckHead(head), name), name)
	}
	assert.Check(t, is.ErrorContains(CheckHead(good[:100]), "shorter than one tar block"))
	bad := bytes.Clone(good)
	bad[0] ^= 1
	assert.Check(t, is.ErrorContains(CheckHead(bad), "checksum"))
}

// Errors about GNU long-name and PAX records name the entry they apply to
// (its real path), not "././@LongLink" or the PAX header's own name.
func TestLongNameAndPAXErrorsNameTheRealPath(t *testing.T) {
	long := strings.Repeat("l", 150)
	lrec := func(typ byte, body string) []byte {
		h := archivecorpus.RawHeader("././@LongLink", typ, fmt.Sprintf("%011o\x00", len(body)+1), nil)
		return cat(h, []byte(body+"\x00"), zeros((BlockSize-(len(body)+1)%BlockSize)%BlockSize))
	}
	file := archivecorpus.RawHeader("real", '0', "00000000000\x00", nil)
	end := zeros(2 * BlockSize)
	for name, tc := range map[string]struct {
		data  []byte
		entry string
	}{
		"GNU long name":             {cat(lrec('L', long), archivecorpus.RawHeader(long[:99], '0', "00000000000\x00", nil), end), long},
		"GNU long link":             {cat(lrec('K', "target"), file, end), "real"},
		"GNU long link, long name":  {cat(lrec('K', "target"), lrec('L', long), file, end), long},
		"PAX unknown key":           {cat(paxBlock("PaxHeaders.0/real", "nonsense=1"), file, end), "real"},
		"PAX unknown key and path":  {cat(paxBlock("PaxHeaders.0/x", "nonsense=1", "path="+long), file, end), long},
		"PAX size override":         {cat(paxBlock("PaxHeaders.0/real", "size=1"), file, end), "real"},
		"PAX then a second PAX":     {cat(paxBlock("PaxHeaders.0/a"), paxBlock("PaxHeaders.0/real"), file, end), "PaxHeaders.0/real"},
		"PAX path, then bad header": {cat(paxBlock("PaxHeaders.0/x", "path="+long), archivecorpus.RawHeader("real", '0', "00000000000\x00", func(b []byte) { copy(b[257:], "nope\x00\x00\x00\x00") }), end), long},
	} {
		_, err := Validate(bytes.NewReader(tc.data))
		var ae *Error
		if assert.Check(t, errors.As(err, &ae), "%s: got %v", name, err) {
			assert.Check(t, is.Equal(ae.Entry, tc.entry), "%s: %v", name, err)
		}
	}
}

// Whole-archive errors found over sorted names carry the offset of the
// offending entry's header: a duplicate, its later occurrence.
func TestSortedErrorsCarryOffsets(t *testing.T) {
	// d/ at 0, d/a at 512 (body 1024), d/b at 1536, d/a again at 2048.
	data := build(t, ent{name: "d/", typ: tar.TypeDir}, ent{name: "d/a", body: "1"}, ent{name: "d/b"}, ent{name: "d/a", body: "2"})
	_, err := Validate(bytes.NewReader(data))
	var ae *Error
	assert.Assert(t, errors.As(err, &ae), "got %v", err)
	assert.Check(t, is.Equal(ae.Entry, "d/a"))
	assert.Check(t, is.Equal(ae.Offset, int64(2048)), "%v", err)
	// A directory and a file of one name: the later one is the duplicate,
	// although the directory record sorts first.
	data = build(t, ent{name: "d/", typ: tar.TypeDir}, ent{name: "d/a", body: "1"}, ent{name: "d/b"}, ent{name: "d/a/", typ: tar.TypeDir})
	_, err = Validate(bytes.NewReader(data))
	assert.Assert(t, errors.As(err, &ae), "got %v", err)
	assert.Check(t, is.Equal(ae.Offset, int64(2048)), "%v", err)
}
