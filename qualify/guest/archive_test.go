package guest

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// fakeELF returns a minimal static ELF executable for machine: a header
// and one PT_LOAD program header, no interpreter, no dynamic section.
func fakeELF(t *testing.T, machine elf.Machine, tag string) []byte {
	return fakeELFWith(t, machine, tag, elf.Prog64{Type: uint32(elf.PT_LOAD), Flags: uint32(elf.PF_R | elf.PF_X), Align: 4096})
}

func fakeELFWith(t *testing.T, machine elf.Machine, tag string, progs ...elf.Prog64) []byte {
	t.Helper()
	var b bytes.Buffer
	h := elf.Header64{
		Type: uint16(elf.ET_EXEC), Machine: uint16(machine), Version: uint32(elf.EV_CURRENT),
		Phoff: 64, Ehsize: 64, Phentsize: 56, Phnum: uint16(len(progs)), Shentsize: 64,
	}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS], h.Ident[elf.EI_DATA], h.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	assert.NilError(t, binary.Write(&b, binary.LittleEndian, h))
	for _, p := range progs {
		assert.NilError(t, binary.Write(&b, binary.LittleEndian, p))
	}
	b.WriteString(tag)
	return b.Bytes()
}

// The archive is what docker load reads: manifest.json naming the config
// (whose SHA-256 is the image ID) and the one layer (whose SHA-256 is the
// config's diff ID), the layer being the guest root filesystem; its bytes
// depend only on the binaries.
func TestWriteArchive(t *testing.T) {
	busybox, probe := fakeELF(t, elf.EM_AARCH64, "busybox"), fakeELF(t, elf.EM_AARCH64, "probe")
	var buf bytes.Buffer
	id, err := WriteArchive(&buf, ArchiveOptions{Busybox: busybox, Probe: probe, Architecture: "arm64"})
	assert.NilError(t, err)
	assert.Check(t, imageIDPattern.MatchString(id), id)

	files := map[string][]byte{}
	var names []string
	tr := tar.NewReader(bytes.NewReader(buf.Bytes()))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		assert.NilError(t, err)
		body, err := io.ReadAll(tr)
		assert.NilError(t, err)
		names = append(names, h.Name)
		files[h.Name] = body
	}
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	assert.NilError(t, json.Unmarshal(files["manifest.json"], &manifest))
	assert.Assert(t, is.Len(manifest, 1))
	m := manifest[0]
	assert.Check(t, is.Len(m.RepoTags, 0))
	assert.Assert(t, is.Len(m.Layers, 1))
	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	assert.Check(t, is.Equal("sha256:"+sum(files[m.Config]), id))
	assert.Check(t, is.Equal(m.Config, id[len("sha256:"):]+".json"))
	layerDir := m.Layers[0][:64]
	assert.DeepEqual(t, names, []string{layerDir + "/", m.Layers[0], m.Config, "manifest.json"})

	var config archiveConfig
	assert.NilError(t, json.Unmarshal(files[m.Config], &config))
	assert.DeepEqual(t, config, archiveConfig{
		Architecture: "arm64", OS: "linux", Created: "1970-01-01T00:00:00Z",
		Config:  archiveRunConfig{Env: []string{"PATH=" + Path}, Cmd: []string{"/bin/sh"}},
		RootFS:  archiveRootFS{Type: "layers", DiffIDs: []string{"sha256:" + sum(files[m.Layers[0]])}},
		History: []archiveHistory{{Created: "1970-01-01T00:00:00Z", CreatedBy: "qualbox guest.WriteArchive", Comment: "qualbox guest image"}},
	})
	var layer bytes.Buffer
	assert.NilError(t, rootfs(busybox, probe)(&layer))
	assert.Check(t, bytes.Equal(files[m.Layers[0]], layer.Bytes()), "the layer is not the guest root filesystem")

	var again bytes.Buffer
	id2, err := WriteArchive(&again, ArchiveOptions{Busybox: busybox, Probe: probe, Architecture: "arm64"})
	assert.NilError(t, err)
	assert.Check(t, is.Equal(id2, id))
	assert.Check(t, bytes.Equal(again.Bytes(), buf.Bytes()), "two archives of the same binaries differ")
}

// A busybox or probe for the wrong architecture, or a dynamically linked
// one, is refused before anything is written, naming which binary.
func TestWriteArchiveRefusesWrongBinaries(t *testing.T) {
	amd, arm := fakeELF(t, elf.EM_X86_64, "x"), fakeELF(t, elf.EM_AARCH64, "y")
	for _, c := range []struct {
		opts ArchiveOptions
		want string
	}{
		{ArchiveOptions{Busybox: amd, Probe: arm, Architecture: "arm64"}, "guest: busybox: ELF machine EM_X86_64, want EM_AARCH64 for arm64"},
		{ArchiveOptions{Busybox: amd, Probe: arm, Architecture: "amd64"}, "guest: probe: ELF machine EM_AARCH64, want EM_X86_64 for amd64"},
		{ArchiveOptions{Busybox: []byte("#!/bin/sh\n"), Probe: amd, Architecture: "amd64"}, "guest: busybox: not an ELF executable"},
		{ArchiveOptions{Busybox: amd, Probe: fakeELFWith(t, elf.EM_X86_64, "dyn", elf.Prog64{Type: uint32(elf.PT_INTERP)}), Architecture: "amd64"}, "guest: probe: dynamically linked (has PT_INTERP)"},
		{ArchiveOptions{Busybox: amd, Probe: amd, Architecture: "386"}, `guest: architecture "386" is not amd64 or arm64`},
	} {
		var buf bytes.Buffer
		_, err := WriteArchive(&buf, c.opts)
		assert.Check(t, is.ErrorContains(err, c.want))
		assert.Check(t, is.Equal(buf.Len(), 0))
	}
}
