package guest

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// entry is one tar entry of an archive being rewritten.
type entry struct {
	hdr  *tar.Header
	body []byte
}

func readEntries(t *testing.T, data []byte) []entry {
	t.Helper()
	var out []entry
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		assert.NilError(t, err)
		body, err := io.ReadAll(tr)
		assert.NilError(t, err)
		out = append(out, entry{h, body})
	}
}

func writeEntries(t *testing.T, ents []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		h := *e.hdr
		h.Size = int64(len(e.body))
		assert.NilError(t, tw.WriteHeader(&h))
		_, err := tw.Write(e.body)
		assert.NilError(t, err)
	}
	assert.NilError(t, tw.Close())
	return buf.Bytes()
}

// fakeArchive is WriteArchive's output for stand-in binaries: enough for
// every check ReadArchive makes without an Engine.
func fakeArchive(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	_, err := WriteArchive(&buf, ArchiveOptions{Busybox: fakeELF(t, elf.EM_X86_64, "busybox"), Probe: fakeELF(t, elf.EM_X86_64, "probe"), Architecture: "amd64"})
	assert.NilError(t, err)
	return buf.Bytes()
}

func writeTemp(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	assert.NilError(t, os.WriteFile(p, data, 0o644))
	return p
}

// ReadArchive accepts what WriteArchive writes and declares its ID.
func TestReadArchive(t *testing.T) {
	var buf bytes.Buffer
	id, err := WriteArchive(&buf, ArchiveOptions{Busybox: fakeELF(t, elf.EM_AARCH64, "b"), Probe: fakeELF(t, elf.EM_AARCH64, "p"), Architecture: "arm64"})
	assert.NilError(t, err)
	p := writeTemp(t, "guest.tar", buf.Bytes())
	a, err := ReadArchive(p)
	assert.NilError(t, err)
	assert.Check(t, is.Equal(a.ID, id))
	assert.Check(t, is.Equal(a.OS+"/"+a.Architecture, "linux/arm64"))
	assert.Check(t, is.Equal(a.File, p))
	assert.Check(t, is.Equal(a.Size, int64(buf.Len())))
	assert.Check(t, is.Equal(a.SHA256, digest(buf.Bytes())))
	assert.Check(t, is.Len(a.DiffIDs, 1))
}

// Every wrong, truncated or hostile archive is refused before any Engine
// contact with an *ArchiveError naming the file and the problem.
func TestReadArchiveRefuses(t *testing.T) {
	good := fakeArchive(t)
	ents := readEntries(t, good)
	// ents: <layer dir>/, <layer dir>/layer.tar, <config>.json, manifest.json
	assert.Assert(t, is.Len(ents, 4))
	mutate := func(f func([]entry) []entry) []byte {
		cp := make([]entry, len(ents))
		for i, e := range ents {
			h := *e.hdr
			cp[i] = entry{&h, bytes.Clone(e.body)}
		}
		return writeEntries(t, f(cp))
	}
	flipLayer := mutate(func(es []entry) []entry { es[1].body[len(es[1].body)/2] ^= 1; return es })
	flipConfig := mutate(func(es []entry) []entry {
		es[2].body = bytes.Replace(es[2].body, []byte(`"/bin/sh"`), []byte(`"/bin/ls"`), 1)
		return es
	})
	tagged := mutate(func(es []entry) []entry {
		es[3].body = bytes.Replace(es[3].body, []byte(`"RepoTags":null`), []byte(`"RepoTags":["busybox:latest"]`), 1)
		return es
	})
	traversal := mutate(func(es []entry) []entry {
		h := *es[2].hdr
		h.Name = "../evil.json"
		return append(es, entry{&h, []byte("{}")})
	})
	symlink := mutate(func(es []entry) []entry {
		return append(es, entry{&tar.Header{Typeflag: tar.TypeSymlink, Name: "manifest2.json", Linkname: "/etc/passwd"}, nil})
	})
	duplicate := mutate(func(es []entry) []entry { return append(es, es[3]) })
	noManifest := mutate(func(es []entry) []entry { return es[:3] })
	for _, c := range []struct {
		name    string
		data    []byte
		problem ArchiveProblem
		detail  string
	}{
		{"not a tar", bytes.Repeat([]byte("not a tar archive\n"), 64), ArchiveNotTar, ""},
		{"truncated", good[:len(good)/2], ArchiveNotTar, ""},
		{"layer corrupted", flipLayer, ArchiveDigest, "layer"},
		{"config edited", flipConfig, ArchiveDigest, "config"},
		{"tagged", tagged, ArchiveLayout, "untagged"},
		{"path traversal", traversal, ArchiveLayout, `"../evil.json"`},
		{"symlink", symlink, ArchiveLayout, "manifest2.json"},
		{"duplicate entry", duplicate, ArchiveLayout, "twice"},
		{"no manifest", noManifest, ArchiveLayout, "no manifest.json"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := writeTemp(t, "bad.tar", c.data)
			_, err := ReadArchive(p)
			var ae *ArchiveError
			assert.Assert(t, errors.As(err, &ae), "%v", err)
			assert.Check(t, is.Equal(ae.Problem, c.problem), "%v", err)
			assert.Check(t, is.Equal(ae.File, p))
			assert.Check(t, is.ErrorContains(err, p))
			assert.Check(t, is.ErrorContains(err, c.detail))
		})
	}
	_, err := ReadArchive(filepath.Join(t.TempDir(), "missing.tar"))
	var ae *ArchiveError
	assert.Assert(t, errors.As(err, &ae))
	assert.Check(t, is.Equal(ae.Problem, ArchiveUnreadable))
	assert.Check(t, errors.Is(err, os.ErrNotExist))
	_, err = ReadArchive(t.TempDir())
	assert.Assert(t, errors.As(err, &ae))
	assert.Check(t, is.ErrorContains(err, "not a regular file"))
}

// realArchive writes the amd64 guest image archive the way `make release`
// does (the probe built static, the host's static busybox) and returns
// its path.
func realArchive(t *testing.T) string {
	t.Helper()
	busybox, err := os.ReadFile(DefaultBusybox)
	if err != nil {
		t.Skipf("no static busybox at %s: %v", DefaultBusybox, err)
	}
	probe := filepath.Join(t.TempDir(), "qualbox-probe")
	cmd := exec.Command("go", "build", "-trimpath", "-o", probe, ProbePackage)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	out, err := cmd.CombinedOutput()
	assert.NilError(t, err, "%s", out)
	pb, err := os.ReadFile(probe)
	assert.NilError(t, err)
	var buf bytes.Buffer
	_, err = WriteArchive(&buf, ArchiveOptions{Busybox: busybox, Probe: pb, Architecture: "amd64"})
	assert.NilError(t, err)
	return writeTemp(t, "qualbox-guest-linux-amd64.tar", buf.Bytes())
}

// absent fails the test unless the Engine has no image id.
func absent(t *testing.T, cli *client.Client, id string) {
	t.Helper()
	_, err := cli.ImageInspect(context.Background(), id)
	assert.Check(t, err != nil && strings.Contains(strings.ToLower(err.Error()), "no such image"), "image %s is still on the Engine (inspect: %v)", id, err)
}

// removeAtEnd removes id at the end of the test if it is still there.
func removeAtEnd(t *testing.T, cli *client.Client, id string) {
	t.Cleanup(func() {
		if _, err := cli.ImageInspect(context.Background(), id); err == nil {
			t.Errorf("image %s left on the Engine; removing it", id)
			_ = Remove(context.Background(), cli, id)
		}
	})
}

// The archive loads as the image it declares, untagged, is not
// loaded again (nor claimed as created) when already present, and is gone
// after Remove.
func TestLoadArchive(t *testing.T) {
	cli := engineClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	a, err := ReadArchive(realArchive(t))
	assert.NilError(t, err)
	absent(t, cli, a.ID)
	removeAtEnd(t, cli, a.ID)

	img, err := Load(ctx, cli, a, "amd64")
	assert.NilError(t, err)
	assert.Check(t, is.Equal(img.ID, a.ID))
	assert.Check(t, img.Created)
	inspect, err := cli.ImageInspect(ctx, img.ID)
	assert.NilError(t, err)
	assert.Check(t, is.Len(inspect.RepoTags, 0), "the image must stay untagged")

	again, err := Load(ctx, cli, a, "amd64")
	assert.NilError(t, err)
	assert.Check(t, is.Equal(again.ID, a.ID))
	assert.Check(t, !again.Created, "a second Load must not claim the image it found")

	assert.NilError(t, Remove(ctx, cli, img.ID))
	absent(t, cli, a.ID)
}

// Each Engine-side check fails for its reason, and the image that Load
// put there is removed again by its ID: an ID the Engine does not give the
// loaded image, layers that are not the declared ones, and a file that
// changed after ReadArchive checked it. The wrong architecture is refused
// before any load.
func TestLoadArchiveRefuses(t *testing.T) {
	cli := engineClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	file := realArchive(t)
	a, err := ReadArchive(file)
	assert.NilError(t, err)
	absent(t, cli, a.ID)
	removeAtEnd(t, cli, a.ID)

	wrongID := a
	wrongID.ID = "sha256:" + strings.Repeat("0", 64)
	wrongLayers := a
	wrongLayers.DiffIDs = []string{"sha256:" + strings.Repeat("1", 64)}
	for _, c := range []struct {
		name    string
		a       ArchiveImage
		arch    string
		problem ArchiveProblem
		detail  string
	}{
		{"wrong architecture", a, "arm64", ArchivePlatform, "the profile requires linux/arm64"},
		{"ID mismatch", wrongID, "amd64", ArchiveIDMismatch, "the Engine loaded it as " + a.ID + ", the archive declares " + wrongID.ID},
		{"layers differ", wrongLayers, "amd64", ArchiveReadback, "RootFS.Layers"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(ctx, cli, c.a, c.arch)
			var ae *ArchiveError
			assert.Assert(t, errors.As(err, &ae), "%v", err)
			assert.Check(t, is.Equal(ae.Problem, c.problem), "%v", err)
			assert.Check(t, is.ErrorContains(err, file))
			assert.Check(t, is.ErrorContains(err, c.detail))
			absent(t, cli, a.ID)
		})
	}

	t.Run("changed after the check", func(t *testing.T) {
		// The file is swapped after ReadArchive: Load sends the bytes that
		// were checked, never the file's new ones.
		assert.NilError(t, os.WriteFile(file, []byte("not an archive at all"), 0o644))
		l, err := Load(ctx, cli, a, "amd64")
		assert.NilError(t, err)
		assert.Check(t, is.Equal(l.ID, a.ID))
		assert.Check(t, l.Created)
		assert.NilError(t, Remove(ctx, cli, l.ID))
		absent(t, cli, a.ID)
	})
	t.Run("not from ReadArchive", func(t *testing.T) {
		bare := a
		bare.data = nil
		_, err := Load(ctx, cli, bare, "amd64")
		var ae *ArchiveError
		assert.Assert(t, errors.As(err, &ae), "%v", err)
		assert.Check(t, is.ErrorContains(err, "no checked bytes"))
		absent(t, cli, a.ID)
	})
}

// laneBSocket is lane B's Engine (docs/lanes.md#lane-b), which keeps
// images in the containerd image store as Docker Desktop does.
const laneBSocket = "unix:///run/qualbox-moby/docker.sock"

// On an Engine with the containerd image store the loaded image is named
// by the manifest digest that store creates, not the archive's config
// digest: Load accepts it only when the loaded image's layers, platform
// and config are the archive's, reports a second Load of the same archive
// as not created, and removes a rejected image by the ID it got.
func TestLoadArchiveContainerdStore(t *testing.T) {
	cli, err := client.New(client.WithHost(laneBSocket))
	assert.NilError(t, err)
	t.Cleanup(func() { cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		t.Skipf("lane B does not answer at %s (make engine-b): %v", laneBSocket, err)
	}
	store, err := containerdStore(ctx, cli)
	assert.NilError(t, err)
	if !store {
		t.Skipf("the Engine at %s does not use the containerd image store", laneBSocket)
	}
	a, err := ReadArchive(realArchive(t))
	assert.NilError(t, err)

	img, err := Load(ctx, cli, a, "amd64")
	assert.NilError(t, err)
	removeAtEnd(t, cli, img.ID)
	assert.Check(t, img.ID != a.ID, "the containerd image store named the image by its config digest %s", img.ID)
	assert.Check(t, img.Created)
	again, err := Load(ctx, cli, a, "amd64")
	assert.NilError(t, err)
	assert.Check(t, is.Equal(again.ID, img.ID))
	assert.Check(t, !again.Created, "a second Load must not claim the image it found")
	assert.NilError(t, Remove(ctx, cli, img.ID))
	absent(t, cli, img.ID)

	wrongLayers := a
	wrongLayers.DiffIDs = []string{"sha256:" + strings.Repeat("1", 64)}
	_, err = Load(ctx, cli, wrongLayers, "amd64")
	var ae *ArchiveError
	assert.Assert(t, errors.As(err, &ae), "%v", err)
	assert.Check(t, is.Equal(ae.Problem, ArchiveReadback), "%v", err)
	assert.Check(t, is.ErrorContains(err, "RootFS.Layers"))
	absent(t, cli, img.ID)
}

// repack writes a docker-archive around layer whose digests are all
// consistent (config diff ID, config name, manifest.json), the config
// declaring arch: what a hostile author who controls the whole file can
// make.
func repack(t *testing.T, layer []byte, arch string) []byte {
	t.Helper()
	config, err := json.Marshal(archiveConfig{
		Architecture: arch, OS: "linux", Created: "1970-01-01T00:00:00Z",
		Config: archiveRunConfig{Env: []string{"PATH=" + Path}, Cmd: []string{"/bin/sh"}},
		RootFS: archiveRootFS{Type: "layers", DiffIDs: []string{"sha256:" + digest(layer)}},
	})
	assert.NilError(t, err)
	layerName := digest(layer) + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{"Config": digest(config) + ".json", "RepoTags": nil, "Layers": []string{layerName}}})
	assert.NilError(t, err)
	return writeEntries(t, []entry{
		{&tar.Header{Typeflag: tar.TypeReg, Name: layerName, Mode: 0o644}, layer},
		{&tar.Header{Typeflag: tar.TypeReg, Name: digest(config) + ".json", Mode: 0o644}, config},
		{&tar.Header{Typeflag: tar.TypeReg, Name: "manifest.json", Mode: 0o644}, manifest},
	})
}

// An archive whose digests are all consistent is still refused when its
// layer is not the guest root filesystem: an extra setuid file, or
// binaries of another architecture than the config declares.
func TestReadArchiveRefusesForeignLayer(t *testing.T) {
	amd := func(tag string) []byte { return fakeELF(t, elf.EM_X86_64, tag) }
	var guestLayer bytes.Buffer
	assert.NilError(t, rootfs(amd("b"), amd("p"))(&guestLayer))
	p := writeTemp(t, "repacked.tar", repack(t, guestLayer.Bytes(), "amd64"))
	_, err := ReadArchive(p)
	assert.NilError(t, err, "the repacking itself is sound")

	ents := readEntries(t, guestLayer.Bytes())
	suid := append(ents, entry{&tar.Header{Typeflag: tar.TypeReg, Name: "usr/bin/su", Mode: 0o4755}, amd("su")})
	for _, c := range []struct {
		name   string
		layer  []byte
		arch   string
		detail string
	}{
		{"setuid file added", writeEntries(t, suid), "amd64", "its entries differ from the guest layout"},
		{"binaries of another architecture", guestLayer.Bytes(), "arm64", "ELF machine EM_X86_64, want EM_AARCH64 for arm64"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := writeTemp(t, "hostile.tar", repack(t, c.layer, c.arch))
			_, err := ReadArchive(p)
			var ae *ArchiveError
			assert.Assert(t, errors.As(err, &ae), "%v", err)
			assert.Check(t, is.Equal(ae.Problem, ArchiveLayout), "%v", err)
			assert.Check(t, is.ErrorContains(err, "is not the guest root filesystem"))
			assert.Check(t, is.ErrorContains(err, c.detail))
		})
	}
}

// paxRecord is one PAX extended header record, "<len> <key>=<value>\n".
func paxRecord(k, v string) string {
	r := " " + k + "=" + v + "\n"
	n := len(r) + 1
	for len(strconv.Itoa(n))+len(r) != n {
		n++
	}
	return strconv.Itoa(n) + r
}

// A sparse entry's logical size is not bounded by the bytes it occupies:
// a 3 KiB archive whose PAX header declares a GNU sparse map makes the tar
// reader yield a 4 GiB layer.tar. ReadArchive refuses it before reading
// it, and any entry claiming more bytes than the archive has.
func TestReadArchiveRefusesSparseBomb(t *testing.T) {
	var b bytes.Buffer
	w := tar.NewWriter(&b)
	pax := paxRecord("GNU.sparse.map", "0,512") + paxRecord("GNU.sparse.size", "4294967296") + paxRecord("GNU.sparse.numblocks", "1")
	assert.NilError(t, w.WriteHeader(&tar.Header{Name: "pax", Typeflag: tar.TypeReg, Size: int64(len(pax)), Mode: 0o644, Format: tar.FormatUSTAR}))
	_, err := w.Write([]byte(pax))
	assert.NilError(t, err)
	assert.NilError(t, w.Flush())
	// Turn the first entry into a PAX extended header for the next one
	// (type 'x'), fixing its checksum: archive/tar writes no sparse files.
	raw := b.Bytes()
	raw[156] = tar.TypeXHeader
	copy(raw[148:156], "        ")
	sum := 0
	for _, c := range raw[:512] {
		sum += int(c)
	}
	copy(raw[148:], fmt.Sprintf("%06o\x00 ", sum))
	layer := strings.Repeat("a", 64) + "/layer.tar"
	assert.NilError(t, w.WriteHeader(&tar.Header{Name: layer, Typeflag: tar.TypeReg, Size: 512, Mode: 0o644, Format: tar.FormatUSTAR}))
	_, err = w.Write(make([]byte, 512))
	assert.NilError(t, err)
	assert.NilError(t, w.Close())
	file := filepath.Join(t.TempDir(), "bomb.tar")
	assert.NilError(t, os.WriteFile(file, b.Bytes(), 0o644))
	assert.Assert(t, b.Len() < 4096, "the archive is %d bytes", b.Len())

	_, err = ReadArchive(file)
	var ae *ArchiveError
	assert.Assert(t, errors.As(err, &ae), "%v", err)
	assert.Check(t, is.Equal(ae.Problem, ArchiveLayout), "%v", err)
	assert.Check(t, is.ErrorContains(err, "is a sparse file"))
}
