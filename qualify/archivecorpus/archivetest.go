package archivecorpus

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"time"
)

// blockSize is the tar block size in bytes (archive.BlockSize).
const blockSize = 512

// Root is the root entry of a whole-workspace export archive: the base
// name of the driver's workspace path (driver.WorkPath, "/workspace/work").
const Root = "work"

// Ent is one tar entry for Tar. Type 0 means a regular file; Body is the
// content of a regular file and Link the target of a link.
type Ent struct {
	Name, Link string
	Type       byte
	Body       string
}

// Tar writes ents as a ustar stream with archive/tar (valid headers and
// checksums, the two end blocks), so any hostility is in the names and
// types: regular files mode 0644, directories 0755, character devices 1:3,
// every entry modified at Unix time 1700000000. It panics if archive/tar
// refuses an entry, which only a broken fixture does.
func Tar(ents ...Ent) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		typ := e.Type
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{Name: e.Name, Linkname: e.Link, Typeflag: typ, Mode: 0o644, ModTime: time.Unix(1700000000, 0), Format: tar.FormatUSTAR}
		switch typ {
		case tar.TypeReg:
			h.Size = int64(len(e.Body))
		case tar.TypeDir:
			h.Mode = 0o755
		case tar.TypeChar:
			h.Devmajor, h.Devminor = 1, 3
		}
		if err := tw.WriteHeader(h); err != nil {
			panic(fmt.Sprintf("archivecorpus: entry %q: %v", e.Name, err))
		}
		if typ == tar.TypeReg {
			if _, err := io.WriteString(tw, e.Body); err != nil {
				panic(fmt.Sprintf("archivecorpus: entry %q: %v", e.Name, err))
			}
		}
	}
	if err := tw.Close(); err != nil {
		panic(fmt.Sprintf("archivecorpus: %v", err))
	}
	return buf.Bytes()
}

// RawHeader returns one hand-made POSIX ustar header block (512 bytes):
// name, mode 0644, uid and gid 65534, the 12-byte size field as given
// (e.g. "00000000005\x00"), mtime 1700000000, type typ. patch, when not
// nil, adjusts any field before the checksum is computed, so the block
// always carries a correct checksum.
func RawHeader(name string, typ byte, size string, patch func(b []byte)) []byte {
	b := make([]byte, blockSize)
	copy(b[0:], name)
	copy(b[100:], "0000644\x00")
	copy(b[108:], "0177776\x00")
	copy(b[116:], "0177776\x00")
	copy(b[124:], size)
	copy(b[136:], "14000000000\x00")
	b[156] = typ
	copy(b[257:], "ustar\x0000")
	if patch != nil {
		patch(b)
	}
	sum := 0
	for i, c := range b {
		if i >= 148 && i < 156 {
			c = ' ' // the checksum field counts as spaces
		}
		sum += int(c)
	}
	copy(b[148:], fmt.Sprintf("%06o\x00 ", sum))
	return b
}

// GNUSparseHeader is a GNU-format sparse ('S') header block for name with
// size 0, uid and gid 0 and a correct checksum, which archive/tar's writer
// does not produce.
func GNUSparseHeader(name string) []byte {
	return RawHeader(name, 'S', "00000000000\x00", func(b []byte) {
		copy(b[108:], "0000000\x00")
		copy(b[116:], "0000000\x00")
		copy(b[257:], "ustar  \x00") // GNU magic and version
	})
}

// Hostile is one crafted whole-workspace export body and how it must be
// rejected: an invalid_archive error whose message contains Reason and,
// when Entry is set, the quoted archive entry name. Body is left out of
// JSON so that the case list can be recorded as evidence.
type Hostile struct {
	Name   string `json:"name"`
	Entry  string `json:"entry,omitempty"`
	Reason string `json:"reason"`
	Body   []byte `json:"-"`
}

// HostileNames lists the hostile-archive cases in the order Hostiles
// returns them by default.
var HostileNames = []string{
	"dotdot", "absolute", "duplicate", "file-as-directory", "device-node", "fifo",
	"symlink", "hardlink", "truncated-body", "bad-checksum", "missing-end-blocks", "gnu-sparse",
}

// Hostiles returns the crafted bodies selected by names, in that order, or
// every case of HostileNames when names is empty. Each body starts with the
// root directory entry Root + "/". An unknown name is an error.
func Hostiles(names ...string) ([]Hostile, error) {
	if len(names) == 0 {
		names = HostileNames
	}
	root := Ent{Name: Root + "/", Type: tar.TypeDir}
	in := func(name string) string { return Root + "/" + name }
	good := Tar(root, Ent{Name: in("a"), Body: "hello"})
	badSum := bytes.Clone(good)
	badSum[blockSize+len(Root)+1] = 'b' // work/a -> work/b without a new checksum
	sparse := Tar(root)[:blockSize]     // the root header, no end blocks
	sparse = append(sparse, GNUSparseHeader(in("s"))...)
	sparse = append(sparse, make([]byte, 2*blockSize)...)
	all := map[string]Hostile{
		"dotdot":             {Entry: in("../evil"), Reason: "traversal", Body: Tar(root, Ent{Name: in("../evil"), Body: "x"})},
		"absolute":           {Entry: "/etc/passwd", Reason: "absolute", Body: Tar(root, Ent{Name: "/etc/passwd", Body: "x"})},
		"duplicate":          {Entry: in("a"), Reason: "duplicate", Body: Tar(root, Ent{Name: in("a"), Body: "1"}, Ent{Name: in("b")}, Ent{Name: in("a"), Body: "2"})},
		"file-as-directory":  {Entry: in("x/y"), Reason: "conflicting ancestor", Body: Tar(root, Ent{Name: in("x"), Body: "1"}, Ent{Name: in("x/y"), Body: "2"})},
		"device-node":        {Entry: in("null"), Reason: "device node", Body: Tar(root, Ent{Name: in("null"), Type: tar.TypeChar})},
		"fifo":               {Entry: in("pipe"), Reason: "FIFO", Body: Tar(root, Ent{Name: in("pipe"), Type: tar.TypeFifo})},
		"symlink":            {Entry: in("escape"), Reason: "symbolic link", Body: Tar(root, Ent{Name: in("escape"), Type: tar.TypeSymlink, Link: "/"})},
		"hardlink":           {Entry: in("shadow"), Reason: "hard link", Body: Tar(root, Ent{Name: in("shadow"), Type: tar.TypeLink, Link: "/etc/shadow"})},
		"truncated-body":     {Entry: in("a"), Reason: "truncated", Body: good[:2*blockSize+3]},
		"bad-checksum":       {Entry: in("b"), Reason: "checksum", Body: badSum},
		"missing-end-blocks": {Reason: "end-of-archive", Body: good[:len(good)-2*blockSize]},
		"gnu-sparse":         {Entry: in("s"), Reason: "sparse", Body: sparse},
	}
	out := make([]Hostile, 0, len(names))
	for _, n := range names {
		h, ok := all[n]
		if !ok {
			return nil, fmt.Errorf("archivecorpus: unknown hostile archive %q; known: %q", n, HostileNames)
		}
		h.Name = n
		out = append(out, h)
	}
	return out, nil
}
