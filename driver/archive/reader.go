package archive

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/qualbox/qualbox/sandboxapi"
)

// BlockSize is the tar block size in bytes.
const BlockSize = 512

// MaxSize is the largest entry body: 8 GiB - 1, the largest value of an
// 11-digit octal size field.
const MaxSize = sandboxapi.MaxTransferFileBytes

// MaxPAXBytes bounds one local PAX extended header body.
const MaxPAXBytes = 64 << 10

// maxTrailingBytes bounds the zero bytes accepted after the two end blocks
// (the rest of a 10240-byte tar record).
const maxTrailingBytes = 20 * BlockSize

// Header is one validated entry.
type Header struct {
	// Name is canonical and relative, without a trailing '/'.
	Name string
	// Dir is true for a directory, false for a regular file.
	Dir bool
	// Mode holds the permission bits only.
	Mode fs.FileMode
	// Size is the body length in bytes (0 for a directory).
	Size int64
	// Offset is the stream offset in bytes of the entry's header block.
	Offset int64
}

// Error reports an archive the validator rejects. Entry is the offending
// entry's name as read (possibly not canonical), or empty for stream-level
// problems; Offset is the stream offset of the entry's header block.
type Error struct {
	Entry  string
	Offset int64
	Reason string
	// Limit marks an entry outside the supported size representation
	// (larger than 8 GiB - 1, base-256 or PAX size override).
	Limit bool
}

var _ error = (*Error)(nil)

func (e *Error) Error() string {
	if e.Entry == "" {
		return fmt.Sprintf("archive at offset %d: %s", e.Offset, e.Reason)
	}
	return fmt.Sprintf("archive entry %q at offset %d: %s", e.Entry, e.Offset, e.Reason)
}

// Reader validates a tar stream incrementally. Call Next for each entry and
// Read for a file's body; Next skips (and validates) unread body bytes.
type Reader struct {
	r     *bufio.Reader
	off   int64
	blk   [BlockSize]byte
	left  int64
	pad   int64
	name  string
	hoff  int64
	tree  Tree
	err   error
	ended bool
}

// NewReader returns a Reader over r, reading through a buffer of bufSize
// bytes (at least one block).
func NewReader(r io.Reader, bufSize int) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, max(bufSize, BlockSize))}
}

// Offset returns the number of stream bytes consumed so far.
func (r *Reader) Offset() int64 { return r.off }

func (r *Reader) fail(entry string, off int64, limit bool, format string, args ...any) error {
	r.err = &Error{Entry: entry, Offset: off, Reason: fmt.Sprintf(format, args...), Limit: limit}
	return r.err
}

func (r *Reader) readBlock(entry, what string) error {
	n, err := io.ReadFull(r.r, r.blk[:])
	r.off += int64(n)
	if err == io.EOF {
		return r.fail(entry, r.off, false, "stream ends without the two end-of-archive blocks")
	}
	if err == io.ErrUnexpectedEOF {
		return r.fail(entry, r.off, false, "stream ends inside a %s block", what)
	}
	if err != nil {
		r.err = err
		return err
	}
	return nil
}

// Next validates and returns the next entry. It returns io.EOF after a
// complete termination; every other failure is an *Error (or the
// underlying read error), and it is sticky.
func (r *Reader) Next() (*Header, error) {
	if r.err != nil {
		return nil, r.err
	}
	if r.ended {
		return nil, io.EOF
	}
	if err := r.skipBody(); err != nil {
		return nil, err
	}
	hoff := r.off
	if err := r.readBlock("", "header"); err != nil {
		return nil, err
	}
	if isZero(r.blk[:]) {
		return nil, r.end(hoff)
	}
	h, err := r.header(hoff)
	if err != nil {
		return nil, err
	}
	if err := r.tree.Add(h.Name, h.Dir); err != nil {
		return nil, r.fail(h.Name, hoff, false, "%v", err)
	}
	r.name, r.hoff = h.Name, hoff
	r.left = h.Size
	r.pad = (BlockSize - h.Size%BlockSize) % BlockSize
	return h, nil
}

func (r *Reader) end(hoff int64) error {
	if err := r.readBlock("", "end-of-archive"); err != nil {
		return err
	}
	if !isZero(r.blk[:]) {
		return r.fail("", hoff, false, "a single zero block is followed by data")
	}
	var buf [BlockSize]byte
	trailing := 0
	for {
		n, err := r.r.Read(buf[:])
		if !isZero(buf[:n]) {
			return r.fail("", r.off, false, "data follows the end-of-archive blocks")
		}
		r.off += int64(n)
		trailing += n
		if trailing > maxTrailingBytes {
			return r.fail("", r.off, false, "more than %d bytes follow the end-of-archive blocks", maxTrailingBytes)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			r.err = err
			return err
		}
	}
	r.ended = true
	return io.EOF
}

func (r *Reader) skipBody() error {
	var buf [8 * BlockSize]byte
	for r.left > 0 {
		if _, err := r.Read(buf[:min(int64(len(buf)), r.left)]); err != nil {
			return err
		}
	}
	if r.pad > 0 {
		n, err := io.ReadFull(r.r, buf[:r.pad])
		r.off += int64(n)
		if err != nil {
			return r.fail(r.name, r.hoff, false, "stream ends inside the body padding")
		}
		if !isZero(buf[:n]) {
			return r.fail(r.name, r.hoff, false, "body padding is not zero")
		}
		r.pad = 0
	}
	return nil
}

// Read reads the current file's body; it returns io.EOF at the body's end.
// A stream that ends early is an *Error naming the entry.
func (r *Reader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if r.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.r.Read(p)
	r.off += int64(n)
	r.left -= int64(n)
	if err == io.EOF {
		if r.left > 0 {
			return n, r.fail(r.name, r.hoff, false, "body truncated: %d bytes missing", r.left)
		}
		err = nil
	}
	if err != nil {
		r.err = err
	}
	return n, err
}

// header parses the header block in r.blk (and a preceding local PAX
// header, if any) into a validated Header, in steps:
//
//  1. the block's checksum and magic; a GNU long record is rejected
//     (gnuLong);
//  2. a local PAX header: its records, then the entry's own block, where
//     the entry starts (paxEntry);
//  3. the entry's type: a regular file or a directory, without a link
//     name (checkType);
//  4. its numeric fields: an octal size within 8 GiB - 1, an octal mode
//     and owners (fields);
//  5. its name: a trailing '/' for a directory only, no directory body,
//     canonical (entryName).
func (r *Reader) header(hoff int64) (*Header, error) {
	raw := cstring(r.blk[0:100])
	if err := checkBlock(&r.blk); err != nil {
		return nil, r.fail(raw, hoff, false, "%v", err)
	}
	if typ := r.blk[156]; typ == 'L' || typ == 'K' {
		return nil, r.gnuLong(hoff)
	}
	var pax map[string]string
	if r.blk[156] == 'x' {
		var err error
		if pax, hoff, err = r.paxEntry(raw, hoff); err != nil {
			return nil, err
		}
	}
	name := blockName(&r.blk)
	if p, ok := pax["path"]; ok {
		name = p
	}
	typ := r.blk[156]
	if err := r.checkType(name, hoff, typ); err != nil {
		return nil, err
	}
	size, mode, err := r.fields(name, hoff)
	if err != nil {
		return nil, err
	}
	dir := typ == '5'
	if name, err = r.entryName(name, hoff, dir, size); err != nil {
		return nil, err
	}
	return &Header{Name: name, Dir: dir, Mode: fs.FileMode(mode) & fs.ModePerm, Size: size, Offset: hoff}, nil
}

// paxEntry reads the local PAX header in r.blk (named raw, at hoff) and
// the entry block that must follow it into r.blk. It returns the PAX
// records and the entry block's offset, where the entry starts.
func (r *Reader) paxEntry(raw string, hoff int64) (map[string]string, int64, error) {
	pax, err := r.readPAX(raw, hoff)
	if err != nil {
		return nil, hoff, err
	}
	subject := raw
	if p, ok := pax["path"]; ok {
		subject = p
	}
	hoff = r.off
	if err := r.readBlock(subject, "header"); err != nil {
		return nil, hoff, err
	}
	if isZero(r.blk[:]) {
		return nil, hoff, r.fail(subject, hoff, false, "PAX extended header is not followed by an entry")
	}
	if _, ok := pax["path"]; !ok {
		subject = blockName(&r.blk)
	}
	if err := checkBlock(&r.blk); err != nil {
		return nil, hoff, r.fail(subject, hoff, false, "%v", err)
	}
	if r.blk[156] == 'x' {
		return nil, hoff, r.fail(subject, hoff, false, "two PAX extended headers in a row")
	}
	return pax, hoff, nil
}

// checkType accepts entry type typ of the entry name (at hoff) only for a
// regular file or a directory, and a link name only for a directory.
func (r *Reader) checkType(name string, hoff int64, typ byte) error {
	switch typ {
	case '0', 0, '5':
	case '1':
		return r.fail(name, hoff, false, "hard link record to %q rejected: links are never transferred", cstring(r.blk[157:257]))
	case '2':
		return r.fail(name, hoff, false, "symbolic link record to %q rejected: links are never followed or transferred", cstring(r.blk[157:257]))
	case '3', '4':
		return r.fail(name, hoff, false, "device node rejected: only regular files and directories are transferred")
	case '6':
		return r.fail(name, hoff, false, "FIFO rejected: only regular files and directories are transferred")
	case 'S':
		return r.fail(name, hoff, false, "GNU sparse file rejected: sparse entries are unsupported")
	case 'g':
		return r.fail(name, hoff, false, "global PAX header rejected: only local PAX records are supported")
	case 'L', 'K':
		return r.gnuLong(hoff)
	default:
		return r.fail(name, hoff, false, "entry type %q rejected: only regular files and directories are transferred", typ)
	}
	if typ != '5' && cstring(r.blk[157:257]) != "" {
		return r.fail(name, hoff, false, "regular file carries a link name")
	}
	return nil
}

// fields parses the entry's size (octal, at most MaxSize; base-256 is a
// Limit error) and mode, and checks its octal owner fields (base-256
// owners pass unread).
func (r *Reader) fields(name string, hoff int64) (size, mode int64, err error) {
	if r.blk[124]&0x80 != 0 {
		return 0, 0, r.fail(name, hoff, true, "base-256 size field is unsupported: entries are limited to 8 GiB - 1 bytes")
	}
	size, err = parseOctal(r.blk[124:136])
	if err != nil {
		return 0, 0, r.fail(name, hoff, false, "size field: %v", err)
	}
	if size > MaxSize {
		return 0, 0, r.fail(name, hoff, true, "size %d bytes exceeds the limit of 8 GiB - 1", size)
	}
	mode, err = parseOctal(r.blk[100:108])
	if err != nil {
		return 0, 0, r.fail(name, hoff, false, "mode field: %v", err)
	}
	for _, f := range [][2]int{{108, 116}, {116, 124}} {
		if r.blk[f[0]]&0x80 == 0 {
			if _, err := parseOctal(r.blk[f[0]:f[1]]); err != nil {
				return 0, 0, r.fail(name, hoff, false, "owner field: %v", err)
			}
		}
	}
	return size, mode, nil
}

// entryName returns name without the trailing '/' only a directory may
// have, once a directory declares no body and the name is canonical.
func (r *Reader) entryName(name string, hoff int64, dir bool, size int64) (string, error) {
	if strings.HasSuffix(name, "/") {
		if !dir {
			return "", r.fail(name, hoff, false, "a regular file name ends with '/'")
		}
		name = name[:len(name)-1]
	}
	if dir && size != 0 {
		return "", r.fail(name, hoff, false, "directory declares a %d-byte body", size)
	}
	if err := checkName(name); err != nil {
		return "", r.fail(name, hoff, false, "%v", err)
	}
	return name, nil
}

// blockName is a header block's name: the ustar prefix joined with the name
// field.
func blockName(blk *[BlockSize]byte) string {
	name := cstring(blk[0:100])
	if isUSTAR(blk) {
		if prefix := cstring(blk[345:500]); prefix != "" {
			name = prefix + "/" + name
		}
	}
	return name
}

// maxGNULongRecords bounds the GNU long-name ('L') and long-link ('K')
// records read before the entry they apply to.
const maxGNULongRecords = 2

// gnuLong rejects the GNU long-name or long-link record in r.blk (at hoff)
// naming the entry it applies to, not "././@LongLink": the long name an
// 'L' record carries or, failing that, the name of the entry header that
// follows. Only bounded record bodies are read to find it.
func (r *Reader) gnuLong(hoff int64) error {
	name := ""
	for i := 0; i < maxGNULongRecords; i++ {
		typ := r.blk[156]
		if typ != 'L' && typ != 'K' {
			break
		}
		size, err := parseOctal(r.blk[124:136])
		if err != nil || size > MaxPAXBytes || r.blk[124]&0x80 != 0 {
			break
		}
		body := make([]byte, (size+BlockSize-1)/BlockSize*BlockSize)
		n, err := io.ReadFull(r.r, body)
		r.off += int64(n)
		if err != nil {
			break
		}
		if typ == 'L' {
			name = cstring(body[:size])
		}
		if r.readBlock(name, "header") != nil || isZero(r.blk[:]) || checkBlock(&r.blk) != nil {
			break
		}
		if name == "" && r.blk[156] != 'L' && r.blk[156] != 'K' {
			name = blockName(&r.blk)
		}
	}
	if name == "" {
		name = "././@LongLink"
	}
	return r.fail(name, hoff, false, "GNU long-name record rejected: long names must use PAX")
}

// paxPathRecord finds a path record in a PAX body that failed strict
// parsing, only to name the entry in the error.
var paxPathRecord = regexp.MustCompile(`(?:^|\n)[1-9][0-9]* path=([^\n\x00]*)\n`)

// paxSubject names the entry a rejected PAX header applies to: its path
// record if one can be found in body, else (once the body was consumed,
// bodyRead) the name of the entry header that follows, else raw.
func (r *Reader) paxSubject(raw string, body []byte, bodyRead bool) string {
	if m := paxPathRecord.FindSubmatch(body); m != nil {
		return string(m[1])
	}
	if !bodyRead {
		return raw
	}
	var blk [BlockSize]byte
	n, err := io.ReadFull(r.r, blk[:])
	r.off += int64(n)
	if err != nil || isZero(blk[:]) || checkBlock(&blk) != nil {
		return raw
	}
	return blockName(&blk)
}

// readPAX reads and parses the body of a local PAX header in r.blk.
//
// Its errors name the entry the header applies to (paxSubject), never the
// PAX header's own "PaxHeaders.N/..." name where that entry can be found.
func (r *Reader) readPAX(raw string, hoff int64) (map[string]string, error) {
	if r.blk[124]&0x80 != 0 {
		return nil, r.fail(raw, hoff, false, "PAX header with a base-256 size")
	}
	size, err := parseOctal(r.blk[124:136])
	if err != nil {
		return nil, r.fail(raw, hoff, false, "PAX header size field: %v", err)
	}
	if size > MaxPAXBytes {
		return nil, r.fail(raw, hoff, false, "PAX header of %d bytes exceeds %d", size, MaxPAXBytes)
	}
	padded := (size + BlockSize - 1) / BlockSize * BlockSize
	body := make([]byte, padded)
	n, err := io.ReadFull(r.r, body)
	r.off += int64(n)
	if err != nil {
		return nil, r.fail(r.paxSubject(raw, body[:n], false), hoff, false, "stream ends inside a PAX header body")
	}
	if !isZero(body[size:]) {
		return nil, r.fail(r.paxSubject(raw, body[:size], true), hoff, false, "PAX header padding is not zero")
	}
	recs, err := parsePAX(body[:size])
	if err != nil {
		return nil, r.fail(r.paxSubject(raw, body[:size], true), hoff, false, "%v", err)
	}
	if s, ok := recs["size"]; ok {
		name, ok := recs["path"]
		if !ok {
			name = r.paxSubject(raw, nil, true)
		}
		return nil, r.fail(name, hoff, true, "PAX size override %q is unsupported: entries are limited to 8 GiB - 1 bytes", s)
	}
	return recs, nil
}

// parsePAX parses "%d %s=%s\n" records strictly: the length is decimal
// without leading zeros and counts the whole record; keys are unique.
func parsePAX(b []byte) (map[string]string, error) {
	recs := map[string]string{}
	for len(b) > 0 {
		sp := bytes.IndexByte(b, ' ')
		if sp <= 0 || sp > 7 {
			return nil, errors.New("malformed PAX record length")
		}
		lenText := string(b[:sp])
		n, err := strconv.Atoi(lenText)
		if err != nil || n <= sp+3 || n > len(b) || lenText[0] == '0' {
			return nil, fmt.Errorf("malformed PAX record length %q", lenText)
		}
		rec := b[sp+1 : n]
		if rec[len(rec)-1] != '\n' {
			return nil, errors.New("PAX record does not end with a newline")
		}
		rec = rec[:len(rec)-1]
		eq := bytes.IndexByte(rec, '=')
		if eq <= 0 {
			return nil, errors.New("PAX record without a key")
		}
		key, val := string(rec[:eq]), string(rec[eq+1:])
		if _, dup := recs[key]; dup {
			return nil, fmt.Errorf("PAX record %q repeated", key)
		}
		if err := checkPAXRecord(key, val); err != nil {
			return nil, err
		}
		recs[key] = val
		b = b[n:]
	}
	return recs, nil
}

// checkPAXRecord accepts a PAX record the reader supports: a path or
// text without NUL, a decimal size or owner, a time, an empty linkpath,
// extended attributes (not transferred); anything else is rejected.
func checkPAXRecord(key, val string) error {
	switch {
	case key == "path", key == "uname", key == "gname", key == "comment", key == "charset", key == "hdrcharset":
		if strings.IndexByte(val, 0) >= 0 {
			return fmt.Errorf("PAX record %q contains NUL", key)
		}
	case key == "size", key == "uid", key == "gid":
		if _, err := strconv.ParseUint(val, 10, 63); err != nil {
			return fmt.Errorf("PAX record %q=%q is not a decimal integer", key, val)
		}
	case key == "mtime", key == "atime", key == "ctime":
		if _, err := strconv.ParseFloat(val, 64); err != nil {
			return fmt.Errorf("PAX record %q=%q is not a time", key, val)
		}
	case key == "linkpath":
		if val != "" {
			return errors.New("PAX linkpath rejected: links are never transferred")
		}
	case strings.HasPrefix(key, "GNU.sparse."):
		return fmt.Errorf("PAX record %q rejected: GNU sparse entries are unsupported", key)
	case strings.HasPrefix(key, "SCHILY.xattr."), strings.HasPrefix(key, "LIBARCHIVE.xattr."):
		// Extended attributes are not transferred.
	default:
		return fmt.Errorf("PAX record %q is unsupported", key)
	}
	return nil
}

// checkBlock verifies the header checksum and the ustar magic.
func checkBlock(blk *[BlockSize]byte) error {
	want, err := parseOctal(blk[148:156])
	if err != nil {
		return fmt.Errorf("checksum field: %v", err)
	}
	var unsigned, signed int64
	for i, c := range blk {
		if i >= 148 && i < 156 {
			c = ' '
		}
		unsigned += int64(c)
		signed += int64(int8(c))
	}
	if want != unsigned && want != signed {
		return fmt.Errorf("header checksum mismatch: recorded %d, computed %d", want, unsigned)
	}
	if !isUSTAR(blk) && string(blk[257:265]) != "ustar  \x00" {
		return errors.New("not a ustar, PAX or GNU header (unknown magic)")
	}
	return nil
}

func isUSTAR(blk *[BlockSize]byte) bool { return string(blk[257:265]) == "ustar\x0000" }

// parseOctal parses a numeric field: optional leading spaces, octal digits,
// then NUL or space terminators only.
func parseOctal(f []byte) (int64, error) {
	s := strings.TrimLeft(string(f), " ")
	end := strings.IndexAny(s, " \x00")
	if end >= 0 {
		if strings.Trim(s[end:], " \x00") != "" {
			return 0, fmt.Errorf("%q has data after its terminator", f)
		}
		s = s[:end]
	}
	if s == "" {
		return 0, fmt.Errorf("%q is empty", f)
	}
	v, err := strconv.ParseInt(s, 8, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not octal", f)
	}
	return v, nil
}

func cstring(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// checkName rejects names that are not canonical relative paths: absolute,
// "..", ".", empty components, NUL, invalid UTF-8, too long.
func checkName(name string) error {
	switch {
	case strings.HasPrefix(name, "/"):
		return errors.New("absolute name rejected")
	case name == ".." || strings.HasPrefix(name, "../") || strings.HasSuffix(name, "/..") || strings.Contains(name, "/../"):
		return errors.New("\"..\" traversal rejected")
	}
	if _, err := sandboxapi.ParseRelativePath(name); err != nil {
		var ve *sandboxapi.ValidationError
		if errors.As(err, &ve) && len(ve.Issues) > 0 {
			return errors.New("name is not canonical: " + ve.Issues[0].Message)
		}
		return err
	}
	return nil
}

// Tree checks pre-order with bounded memory: every entry's parent is the
// root or a directory that preceded it and whose subtree is still open.
// Memory is proportional to the depth of the current path.
type Tree struct {
	open    []string
	prev    string
	prevDir bool
	any     bool
}

// Add checks one entry; its error names the conflict.
func (t *Tree) Add(name string, dir bool) error {
	defer func() { t.prev, t.prevDir, t.any = name, dir, true }()
	if t.any && name == t.prev {
		return errors.New("duplicate entry")
	}
	if t.any && !t.prevDir && strings.HasPrefix(name, t.prev+"/") {
		return fmt.Errorf("conflicting ancestor: %q is a regular file", t.prev)
	}
	for len(t.open) > 0 && !strings.HasPrefix(name, t.open[len(t.open)-1]+"/") {
		t.open = t.open[:len(t.open)-1]
	}
	if parent := path.Dir(name); parent != "." {
		if len(t.open) == 0 || t.open[len(t.open)-1] != parent {
			return fmt.Errorf("parent directory %q does not immediately enclose it in the archive order (missing, closed or not a directory)", parent)
		}
	}
	if dir {
		t.open = append(t.open, name)
	}
	return nil
}

// Err returns the Reader's sticky error, if any.
func (r *Reader) Err() error { return r.err }

// CheckHead checks the first bytes of an outgoing archive: at least one
// block, no compression magic (a compressed body makes some Engines run
// decompressors from the container), and a valid header or zero block.
func CheckHead(b []byte) error {
	for _, m := range []struct{ name, magic string }{
		{"gzip", "\x1f\x8b"}, {"bzip2", "BZh"}, {"xz", "\xfd7zXZ\x00"}, {"zstd", "\x28\xb5\x2f\xfd"}, {"lz4", "\x04\x22\x4d\x18"},
	} {
		if bytes.HasPrefix(b, []byte(m.magic)) {
			return fmt.Errorf("archive body starts with %s magic: only uncompressed tar is sent", m.name)
		}
	}
	if len(b) < BlockSize {
		return fmt.Errorf("archive body of %d bytes is shorter than one tar block", len(b))
	}
	var blk [BlockSize]byte
	copy(blk[:], b)
	if isZero(blk[:]) {
		return nil
	}
	if err := checkBlock(&blk); err != nil {
		return fmt.Errorf("archive body does not start with a tar header: %w", err)
	}
	return nil
}
