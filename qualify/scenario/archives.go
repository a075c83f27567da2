package scenario

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"time"
)

// hostileArchive is one crafted export body and how the driver must reject
// it: OperationError invalid_archive whose message contains reason and,
// when entry is set, the quoted archive entry name.
type hostileArchive struct {
	Name   string `json:"name"`
	Entry  string `json:"entry,omitempty"`
	Reason string `json:"reason"`
	body   []byte
}

// HostileArchiveNames lists the hostile-archive cases of the transfer
// scenario, in the order they run.
var HostileArchiveNames = []string{
	"dotdot", "absolute", "duplicate", "file-as-directory", "device-node", "fifo",
	"symlink", "hardlink", "truncated-body", "bad-checksum", "missing-end-blocks", "gnu-sparse",
}

type craftEnt struct {
	name, link string
	typ        byte
	body       string
}

// craftTar writes ents as a tar stream with Go's writer (valid headers and
// checksums); the hostility is in the names and types.
func craftTar(ents ...craftEnt) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: typ, Mode: 0o644, ModTime: time.Unix(1700000000, 0), Format: tar.FormatUSTAR}
		switch typ {
		case tar.TypeReg:
			h.Size = int64(len(e.body))
		case tar.TypeDir:
			h.Mode = 0o755
		case tar.TypeChar:
			h.Devmajor, h.Devminor = 1, 3
		}
		if err := tw.WriteHeader(h); err != nil {
			panic(fmt.Sprintf("craft %s: %v", e.name, err))
		}
		if typ == tar.TypeReg {
			if _, err := io.WriteString(tw, e.body); err != nil {
				panic(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// hostileArchives returns the crafted whole-workspace bodies (root entry
// "work/", the base name of driver.WorkPath) selected by names.
func hostileArchives(names []string) []hostileArchive {
	root := craftEnt{name: "work/", typ: tar.TypeDir}
	good := craftTar(root, craftEnt{name: "work/a", body: "hello"})
	badSum := bytes.Clone(good)
	badSum[512+5] = 'b' // work/a -> work/b without a new checksum
	sparse := craftTar(root)[:512]
	sparse = append(sparse, gnuSparseHeader("work/s")...)
	sparse = append(sparse, make([]byte, 1024)...)
	all := map[string]hostileArchive{
		"dotdot":             {Entry: "work/../evil", Reason: "traversal", body: craftTar(root, craftEnt{name: "work/../evil", body: "x"})},
		"absolute":           {Entry: "/etc/passwd", Reason: "absolute", body: craftTar(root, craftEnt{name: "/etc/passwd", body: "x"})},
		"duplicate":          {Entry: "work/a", Reason: "duplicate", body: craftTar(root, craftEnt{name: "work/a", body: "1"}, craftEnt{name: "work/b"}, craftEnt{name: "work/a", body: "2"})},
		"file-as-directory":  {Entry: "work/x/y", Reason: "conflicting ancestor", body: craftTar(root, craftEnt{name: "work/x", body: "1"}, craftEnt{name: "work/x/y", body: "2"})},
		"device-node":        {Entry: "work/null", Reason: "device node", body: craftTar(root, craftEnt{name: "work/null", typ: tar.TypeChar})},
		"fifo":               {Entry: "work/pipe", Reason: "FIFO", body: craftTar(root, craftEnt{name: "work/pipe", typ: tar.TypeFifo})},
		"symlink":            {Entry: "work/escape", Reason: "symbolic link", body: craftTar(root, craftEnt{name: "work/escape", typ: tar.TypeSymlink, link: "/"})},
		"hardlink":           {Entry: "work/shadow", Reason: "hard link", body: craftTar(root, craftEnt{name: "work/shadow", typ: tar.TypeLink, link: "/etc/shadow"})},
		"truncated-body":     {Entry: "work/a", Reason: "truncated", body: good[:1024+3]},
		"bad-checksum":       {Entry: "work/b", Reason: "checksum", body: badSum},
		"missing-end-blocks": {Reason: "end-of-archive", body: good[:len(good)-1024]},
		"gnu-sparse":         {Entry: "work/s", Reason: "sparse", body: sparse},
	}
	out := make([]hostileArchive, 0, len(names))
	for _, n := range names {
		a := all[n]
		a.Name = n
		out = append(out, a)
	}
	return out
}

// gnuSparseHeader is a GNU sparse ('S') header with a valid checksum, which
// Go's tar writer does not produce.
func gnuSparseHeader(name string) []byte {
	b := make([]byte, 512)
	copy(b, name)
	copy(b[100:], "0000644\x00")
	copy(b[108:], "0000000\x00")
	copy(b[116:], "0000000\x00")
	copy(b[124:], "00000000000\x00")
	copy(b[136:], "14000000000\x00")
	b[156] = 'S'
	copy(b[257:], "ustar  \x00")
	sum := 0
	for i, c := range b {
		if i >= 148 && i < 156 {
			c = ' '
		}
		sum += int(c)
	}
	copy(b[148:], fmt.Sprintf("%06o\x00 ", sum))
	return b
}
