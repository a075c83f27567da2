package archive

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Sort records encode a name so that byte order groups a path with its
// descendants: '/' becomes 0x01 and 0x01/0x02 are escaped, so the encoding
// is injective and free of 0x00, which terminates the name before a kind
// byte. Every descendant of "x" therefore sorts right after x's own
// records, before any sibling such as "x-1" or "x.txt".
const (
	sep     = 0x01
	esc     = 0x02
	end     = 0x00
	kindDir = 'd'
	kindReg = 'f'
)

// AppendRecord appends name's sort record for an entry of the given kind
// whose header is at stream offset off (bytes; 0 where no stream offset
// exists). The offset follows the kind as 8 big-endian bytes, so records
// of one name sort in stream order and errors carry the right offset.
func AppendRecord(dst []byte, name string, dir bool, off int64) []byte {
	for i := 0; i < len(name); i++ {
		switch c := name[i]; c {
		case '/':
			dst = append(dst, sep)
		case sep, esc:
			dst = append(dst, esc, c+0x10)
		default:
			dst = append(dst, c)
		}
	}
	kind := byte(kindReg)
	if dir {
		kind = kindDir
	}
	return binary.BigEndian.AppendUint64(append(dst, end, kind), uint64(off))
}

// recordTail is the bytes after a record's name: terminator, kind, offset.
const recordTail = 2 + 8

// MaxRecordBytes bounds a record for a name of at most n bytes.
func MaxRecordBytes(n int) int { return 2*n + recordTail }

func decode(key []byte) string {
	var b []byte
	for i := 0; i < len(key); i++ {
		switch c := key[i]; c {
		case sep:
			b = append(b, '/')
		case esc:
			if i+1 < len(key) {
				i++
				b = append(b, key[i]-0x10)
			}
		default:
			b = append(b, c)
		}
	}
	return string(b)
}

// Sorted checks records (from AppendRecord) presented in ascending byte
// order: no name twice, and no regular file with descendants. Its memory is
// one record.
type Sorted struct {
	prevKey []byte
	prevDir bool
	prevOff int64
	any     bool
}

// Add checks the next record in ascending order. A duplicate's error
// carries the offset of the name's later occurrence in the stream; a
// conflicting ancestor's, the offset of the descendant it names.
func (s *Sorted) Add(rec []byte) error {
	if len(rec) < recordTail || rec[len(rec)-recordTail] != end {
		return errors.New("archive: malformed sort record")
	}
	tail := rec[len(rec)-recordTail:]
	key, dir, off := rec[:len(rec)-recordTail], tail[1] == kindDir, int64(binary.BigEndian.Uint64(tail[2:]))
	defer func() {
		s.prevKey = append(s.prevKey[:0], key...)
		s.prevDir, s.prevOff, s.any = dir, off, true
	}()
	if !s.any {
		return nil
	}
	if bytes.Equal(key, s.prevKey) {
		return &Error{Entry: decode(key), Offset: max(off, s.prevOff), Reason: "duplicate entry: the name occurs more than once in the archive"}
	}
	if !s.prevDir && len(key) > len(s.prevKey) && bytes.HasPrefix(key, s.prevKey) && key[len(s.prevKey)] == sep {
		return &Error{Entry: decode(key), Offset: off, Reason: fmt.Sprintf("conflicting ancestor: %q is a regular file", decode(s.prevKey))}
	}
	return nil
}

// Validate reads a whole archive from r, checking everything the Reader
// checks plus the sorted whole-archive checks, in memory. It is meant for
// tests, fuzzing and small archives; exports sort externally.
func Validate(r io.Reader) ([]Header, error) {
	tr := NewReader(r, 4096)
	var hdrs []Header
	var recs [][]byte
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return hdrs, err
		}
		if _, err := io.Copy(io.Discard, tr); err != nil {
			return hdrs, err
		}
		hdrs = append(hdrs, *h)
		recs = append(recs, AppendRecord(nil, h.Name, h.Dir, h.Offset))
	}
	slices.SortFunc(recs, bytes.Compare)
	var s Sorted
	for _, rec := range recs {
		if err := s.Add(rec); err != nil {
			return hdrs, err
		}
	}
	return hdrs, nil
}
