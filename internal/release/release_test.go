package release

import (
	"archive/zip"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// What git describe prints becomes the module version a release is
// stamped with; what no module version can be is refused, naming it.
func TestVersion(t *testing.T) {
	for describe, want := range map[string]string{
		"v1.2.0":                "v1.2.0",
		"v1.2.0-rc.1":           "v1.2.0-rc.1",
		"v1.2.0-3-g93d924b":     "v1.2.0-3-g93d924b",
		"v1.2.0-dirty\n":        "v1.2.0-dirty",
		"93d924b":               "v0.0.0-g93d924b",
		"93d924b-dirty":         "v0.0.0-g93d924b-dirty",
		"0123456":               "v0.0.0-g0123456", // all digits with a leading zero: "g" keeps it a valid identifier
		"v2.0.0+incompatible":   "",
		"v1.2":                  "",
		"v1.2.0+build.5":        "",
		"release-candidate/one": "",
		"":                      "",
		"v2.0.0":                "", // a v2 needs the module path to end in /v2
	} {
		got, err := Version(describe)
		if want == "" {
			assert.Check(t, err != nil, "Version(%q) = %q, want an error", describe, got)
			if err != nil && describe != "" {
				assert.Check(t, is.Contains(err.Error(), describe), "error %q does not name %q", err, describe)
			}
			continue
		}
		assert.Check(t, err, "Version(%q)", describe)
		assert.Check(t, is.Equal(got, want), "Version(%q)", describe)
	}
}

// The proxy holds the GOPROXY file layout: list, .info, .mod and a zip
// whose files sit under module@version/.
func TestWriteProxy(t *testing.T) {
	src := t.TempDir()
	write(t, src, "go.mod", "module "+Module+"\n\ngo 1.26.0\n")
	write(t, src, "cmd/qualify/main.go", "package main\n\nfunc main() {}\n")
	write(t, src, "sub/go.mod", "module example.test/sub\n") // a sub-module is cut out of the zip
	write(t, src, "sub/x.go", "package sub\n")
	proxy := t.TempDir()
	assert.NilError(t, WriteProxy(proxy, src, "v0.1.0"))

	at := filepath.Join(proxy, "github.com", "qualbox", "qualbox", "@v")
	list, err := os.ReadFile(filepath.Join(at, "list"))
	assert.NilError(t, err)
	assert.Check(t, is.Equal(string(list), "v0.1.0\n"))
	mod, err := os.ReadFile(filepath.Join(at, "v0.1.0.mod"))
	assert.NilError(t, err)
	assert.Check(t, is.Equal(string(mod), "module "+Module+"\n\ngo 1.26.0\n"))
	info, err := os.ReadFile(filepath.Join(at, "v0.1.0.info"))
	assert.NilError(t, err)
	assert.Check(t, is.Regexp(`^\{"Version":"v0\.1\.0","Time":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"\}$`, string(info)))
	zr, err := zip.OpenReader(filepath.Join(at, "v0.1.0.zip"))
	assert.NilError(t, err)
	defer zr.Close()
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	sort.Strings(names)
	assert.DeepEqual(t, names, []string{Module + "@v0.1.0/cmd/qualify/main.go", Module + "@v0.1.0/go.mod"})
}

// A file no module zip may hold (a name reserved on Windows, which a
// proxy refuses to serve) fails packing, naming the file: such a tree
// cannot be released or go-installed at any tag.
func TestWriteProxyRefusesUnpublishableFile(t *testing.T) {
	src := t.TempDir()
	write(t, src, "go.mod", "module "+Module+"\n\ngo 1.26.0\n")
	write(t, src, "qualify/attest/testdata/fuzz/FuzzVerifyStatement/nul", "go test fuzz v1\n")
	err := WriteProxy(t.TempDir(), src, "v0.1.0")
	assert.ErrorContains(t, err, `qualify/attest/testdata/fuzz/FuzzVerifyStatement/nul": "nul" disallowed as path element component on Windows`)
}

// SHA256SUMS is what sha256sum -c reads: "<hex>  <name>" per file.
func TestWriteSums(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "qualify-linux-amd64", "abc")
	write(t, dir, "observe-linux-amd64", "")
	assert.NilError(t, WriteSums(dir, []string{"observe-linux-amd64", "qualify-linux-amd64"}))
	got, err := os.ReadFile(filepath.Join(dir, SumsFile))
	assert.NilError(t, err)
	assert.Check(t, is.Equal(string(got),
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  observe-linux-amd64\n"+
			"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad  qualify-linux-amd64\n"))
	assert.ErrorContains(t, WriteSums(dir, []string{"missing"}), "SHA256SUMS: open")
}

// The install's environment drops every go setting of the machine and
// sets its own, GOFLAGS included.
func TestInstallEnv(t *testing.T) {
	env := InstallEnv([]string{"PATH=/bin", "GOFLAGS=-buildvcs=false", "GOPROXY=https://proxy.example", "GOPRIVATE=github.com/qualbox", "CGO_ENABLED=1"},
		"/p", "/mc", "/gp", "/imc", "/gc")
	assert.DeepEqual(t, env, []string{
		"PATH=/bin",
		"GOENV=off", "GOWORK=off", "GOFLAGS=-mod=mod -modcacherw -trimpath",
		"GOPROXY=file:///p,file:///mc/cache/download", "GOSUMDB=off", "GONOSUMDB=" + Module,
		"GOPRIVATE=", "GONOPROXY=", "GOTOOLCHAIN=local", "CGO_ENABLED=0",
		"GOPATH=/gp", "GOMODCACHE=/imc", "GOCACHE=/gc",
	})
}

func write(t *testing.T, dir, name, body string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	assert.NilError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	assert.NilError(t, os.WriteFile(p, []byte(body), 0o644))
}

// staticELF returns a minimal static ELF executable for machine, as the
// guest image accepts it: a header and one PT_LOAD program header, no
// interpreter, no dynamic section, then tag.
func staticELF(t *testing.T, machine elf.Machine, tag string) []byte {
	t.Helper()
	var b bytes.Buffer
	h := elf.Header64{
		Type: uint16(elf.ET_EXEC), Machine: uint16(machine), Version: uint32(elf.EV_CURRENT),
		Phoff: 64, Ehsize: 64, Phentsize: 56, Phnum: 1, Shentsize: 64,
	}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS], h.Ident[elf.EI_DATA], h.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	assert.NilError(t, binary.Write(&b, binary.LittleEndian, h))
	assert.NilError(t, binary.Write(&b, binary.LittleEndian, elf.Prog64{Type: uint32(elf.PT_LOAD), Flags: uint32(elf.PF_R | elf.PF_X), Align: 4096}))
	b.WriteString(tag)
	return b.Bytes()
}

// A guest image whose inputs are refused fails before anything is
// written, naming what was wrong; one whose archive cannot be renamed
// into place (dst is a non-empty directory, which rename(2) never
// replaces with a file) fails after its temporary file was written and
// leaves that file behind no more than a partial archive under dst's
// name: dst is the directory it was, and nothing else is beside it.
func TestWriteImageLeavesNothingOnFailure(t *testing.T) {
	dir := t.TempDir()
	bb, probe := filepath.Join(dir, "busybox"), filepath.Join(dir, "probe")
	assert.NilError(t, os.WriteFile(bb, []byte("#!/bin/sh\n"), 0o755))
	assert.NilError(t, os.WriteFile(probe, []byte("not an ELF"), 0o755))
	out := filepath.Join(dir, "out")
	assert.NilError(t, os.Mkdir(out, 0o755))
	dst := filepath.Join(out, "guest.tar")

	_, err := WriteImage(dst, bb, probe, "amd64")
	assert.ErrorContains(t, err, "busybox")
	_, err = WriteImage(dst, bb, filepath.Join(dir, "missing"), "amd64")
	assert.ErrorContains(t, err, "probe for amd64")
	entries, err := os.ReadDir(out)
	assert.NilError(t, err)
	assert.Check(t, is.Len(entries, 0), "left behind: %v", entries)

	// Inputs WriteImage accepts: the archive is built and written.
	assert.NilError(t, os.WriteFile(bb, staticELF(t, elf.EM_X86_64, "busybox"), 0o755))
	assert.NilError(t, os.WriteFile(probe, staticELF(t, elf.EM_X86_64, "probe"), 0o755))
	assert.NilError(t, os.Mkdir(dst, 0o755))
	assert.NilError(t, os.WriteFile(filepath.Join(dst, "kept"), []byte("kept"), 0o644))
	_, err = WriteImage(dst, bb, probe, "amd64")
	var link *os.LinkError
	assert.Assert(t, errors.As(err, &link) && link.Op == "rename" && link.New == dst, "want the rename onto %s to fail, got %v", dst, err)
	assert.Check(t, strings.HasPrefix(filepath.Base(link.Old), ".guest-image-") && filepath.Dir(link.Old) == out,
		"the temporary file is written beside dst: %s", link.Old)
	entries, err = os.ReadDir(out)
	assert.NilError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Check(t, is.DeepEqual(names, []string{"guest.tar"}), "only dst is in %s", out)
	kept, err := os.ReadDir(dst)
	assert.NilError(t, err)
	assert.Check(t, is.Len(kept, 1), "dst's own contents, untouched: %v", kept)

	// The same inputs with a free dst: the archive lands there, so the
	// failure above was the rename's.
	assert.NilError(t, os.RemoveAll(dst))
	id, err := WriteImage(dst, bb, probe, "amd64")
	assert.NilError(t, err)
	assert.Check(t, is.Regexp(`^sha256:[0-9a-f]{64}$`, id))
	fi, err := os.Stat(dst)
	assert.NilError(t, err)
	assert.Check(t, fi.Mode().IsRegular() && fi.Mode().Perm() == 0o644, "%v", fi.Mode())
	entries, err = os.ReadDir(out)
	assert.NilError(t, err)
	assert.Check(t, is.Len(entries, 1), "nothing beside dst: %v", entries)
}
