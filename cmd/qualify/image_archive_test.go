package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/skip"

	"github.com/qualbox/qualbox/internal/exitcode"
	"github.com/qualbox/qualbox/internal/release"
	"github.com/qualbox/qualbox/internal/testengine"
	"github.com/qualbox/qualbox/qualify/evidence"
	"github.com/qualbox/qualbox/qualify/guest"
)

const laneASocket = "unix:///var/run/docker.sock"

// archiveManifest is lane A's manifest with a short catalogue: admission
// (the run header admits the profile with the loaded image), isolation
// and lifecycle (the probe runs in the loaded image).
func archiveManifest(t *testing.T) string {
	return writeManifest(t, func(s string) string {
		i := strings.Index(s, "\nscenarios:\n")
		assert.Assert(t, i > 0)
		return s[:i] + `
scenarios:
  - name: admission
    params:
      reject: [linux-x64]
      mustFail: ["/info CgroupVersion", "/info CgroupDriver"]
  - name: isolation
  - name: lifecycle
    params:
      exitCode: 7
`
	})
}

// releaseArchive builds the linux/amd64 part of `make release` from this
// work tree (internal/release, the host's static busybox) and returns the
// guest image archive and the ID dist/GUEST-IMAGES lists for it.
func releaseArchive(t *testing.T) (file, id string) {
	t.Helper()
	if _, err := os.Stat(guest.DefaultBusybox); err != nil {
		t.Skipf("no static busybox at %s: %v", guest.DefaultBusybox, err)
	}
	root, err := filepath.Abs("../..")
	assert.NilError(t, err)
	out := t.TempDir()
	_, err = release.Build(release.Options{Root: root, Version: "v0.0.0-test", Out: out, Platforms: []string{"linux/amd64"},
		Busybox: map[string]string{"amd64": guest.DefaultBusybox}})
	assert.NilError(t, err)
	images, err := os.ReadFile(filepath.Join(out, release.ImagesFile))
	assert.NilError(t, err)
	id, name, ok := strings.Cut(strings.TrimSpace(string(images)), "  ")
	assert.Assert(t, ok && name == "qualbox-guest-linux-amd64.tar", "%s", images)
	return filepath.Join(out, name), id
}

func laneAClient(t *testing.T) *client.Client {
	t.Helper()
	socket := testengine.Require(t)
	skip.If(t, "unix://"+socket != laneASocket, "a lane A run; the test Engine is at %s", socket)
	cli, err := client.New(client.WithHost(laneASocket))
	assert.NilError(t, err)
	t.Cleanup(func() { cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, pingErr := cli.Ping(ctx, client.PingOptions{})
	assert.NilError(t, pingErr)
	skip.If(t, os.Geteuid() != 0, "a lane A run needs root (the cgroup observer)")
	return cli
}

func imageGone(t *testing.T, cli *client.Client, id string) {
	t.Helper()
	_, err := cli.ImageInspect(context.Background(), id)
	assert.Check(t, err != nil && strings.Contains(strings.ToLower(err.Error()), "no such image"), "image %s is still on the Engine (inspect: %v)", id, err)
}

func readRun(t *testing.T, dir string) evidence.Run {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "evidence.json"))
	assert.NilError(t, err)
	var r evidence.Run
	assert.NilError(t, json.Unmarshal(data, &r))
	return r
}

// `qualify run --image-archive` on lane A with the archive `make release`
// writes: no build (no busybox, no probe compile), the archive's image ID
// recorded with source "archive", the image removed by that ID at the
// end; and an image that was on the Engine before the run stays there.
func TestRunImageArchive(t *testing.T) {
	cli := laneAClient(t)
	file, id := releaseArchive(t)
	imageGone(t, cli, id)
	t.Cleanup(func() {
		if _, err := cli.ImageInspect(context.Background(), id); err == nil {
			t.Errorf("image %s left on the Engine; removing it", id)
			_ = guest.Remove(context.Background(), cli, id)
		}
	})
	path := archiveManifest(t)

	out := filepath.Join(t.TempDir(), "out")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"run", "--manifest", path, "--image-archive", file, "--output", out}, &stdout, &stderr)
	assert.Equal(t, code, exitcode.OK, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	assert.Check(t, is.Contains(stderr.String(), "loading guest image "+id+" from "+file+" ...\nguest image "+id+" loaded\n"))
	assert.Check(t, !strings.Contains(stderr.String(), "building guest image"))
	r := readRun(t, out)
	assert.Check(t, is.Equal(r.Image.ID, id))
	assert.Check(t, is.Equal(r.Image.Source, "archive"))
	// The signed header ties the image to the archive file it came from.
	data, err := os.ReadFile(file)
	assert.NilError(t, err)
	assert.Check(t, is.Equal(r.Image.ArchiveSHA256, fmt.Sprintf("%x", sha256.Sum256(data))))
	assert.Check(t, is.Equal(r.Image.ArchiveID, id))
	assert.Check(t, r.Image.Removed != nil && *r.Image.Removed, "removed: %v %q", r.Image.Removed, r.Image.RemoveError)
	assert.Check(t, r.Admission.OK, "admission: %+v", r.Admission)
	imageGone(t, cli, id)

	// Already on the Engine: the run uses it and leaves it.
	a, err := guest.ReadArchive(file)
	assert.NilError(t, err)
	pre, err := guest.Load(context.Background(), cli, a, "amd64")
	assert.NilError(t, err)
	assert.Assert(t, pre.Created)
	out2 := filepath.Join(t.TempDir(), "out")
	stdout.Reset()
	stderr.Reset()
	code = run(context.Background(), []string{"run", "--manifest", path, "--image-archive", file, "--output", out2}, &stdout, &stderr)
	assert.Equal(t, code, exitcode.OK, "stderr:\n%s", stderr.String())
	assert.Check(t, is.Contains(stderr.String(), "guest image "+id+" already on the Engine: it stays there\n"))
	r = readRun(t, out2)
	assert.Check(t, is.Equal(r.Image.ID, id))
	assert.Check(t, r.Image.Removed == nil, "the run removed an image it did not load")
	_, err = cli.ImageInspect(context.Background(), id)
	assert.Check(t, err, "the image that was there before the run is gone")
	assert.NilError(t, guest.Remove(context.Background(), cli, id))
	imageGone(t, cli, id)
}

// armELF is a minimal static arm64 ELF executable: a stand-in binary for
// an archive whose architecture the profile refuses.
func armELF(t *testing.T, tag string) []byte {
	var b bytes.Buffer
	h := elf.Header64{Type: uint16(elf.ET_EXEC), Machine: uint16(elf.EM_AARCH64), Version: uint32(elf.EV_CURRENT), Phoff: 64, Ehsize: 64, Phentsize: 56, Phnum: 1, Shentsize: 64}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS], h.Ident[elf.EI_DATA], h.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	assert.NilError(t, binary.Write(&b, binary.LittleEndian, h))
	assert.NilError(t, binary.Write(&b, binary.LittleEndian, elf.Prog64{Type: uint32(elf.PT_LOAD), Flags: uint32(elf.PF_R | elf.PF_X), Align: 4096}))
	b.WriteString(tag)
	return b.Bytes()
}

// A bad --image-archive is a usage error naming the file and what is
// wrong, found before any Engine is contacted (the endpoint here serves
// nothing) and before any output exists: a missing file, a truncated or
// corrupted archive, an archive of another architecture than the
// profile's, and the flag with a manifest that names its image or with
// --probe.
func TestRunImageArchiveIsCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	var arm bytes.Buffer
	_, err := guest.WriteArchive(&arm, guest.ArchiveOptions{Busybox: armELF(t, "b"), Probe: armELF(t, "p"), Architecture: "arm64"})
	assert.NilError(t, err)
	good := arm.Bytes()
	armFile := filepath.Join(dir, "arm64.tar")
	assert.NilError(t, os.WriteFile(armFile, good, 0o644))
	truncated := filepath.Join(dir, "truncated.tar")
	assert.NilError(t, os.WriteFile(truncated, good[:len(good)-1500], 0o644))
	corrupt := bytes.Clone(good)
	i := bytes.Index(corrupt, []byte("ELF"))
	assert.Assert(t, i > 0)
	corrupt[i+10] ^= 0xff // a byte of the layer
	corruptFile := filepath.Join(dir, "corrupt.tar")
	assert.NilError(t, os.WriteFile(corruptFile, corrupt, 0o644))
	missing := filepath.Join(dir, "missing.tar")

	build := archiveManifest(t)
	named := writeManifest(t, func(s string) string {
		return strings.Replace(s, "\nimage: build\n", "\nimage: sha256:"+strings.Repeat("b", 64)+"\n", 1)
	})
	sock := "unix://" + filepath.Join(t.TempDir(), "nothing.sock")
	for _, c := range []struct {
		name, manifest string
		args           []string
		want           string
	}{
		{"missing", build, []string{"--image-archive", missing}, "guest: image archive " + missing + ": unreadable"},
		{"truncated", build, []string{"--image-archive", truncated}, "guest: image archive " + truncated + ": not a complete tar archive"},
		{"corrupted", build, []string{"--image-archive", corruptFile}, "guest: image archive " + corruptFile + ": digest mismatch: layer"},
		{"wrong architecture", build, []string{"--image-archive", armFile}, "guest: image archive " + armFile + ": wrong image: image is linux/arm64, profile linux-x64-cgroupv1 requires linux/amd64"},
		{"manifest names its image", named, []string{"--image-archive", armFile}, `--image-archive replaces "image: build", but manifest ` + named + " names image sha256:"},
		{"with --probe", build, []string{"--image-archive", armFile, "--probe", "/bin/true"}, "--image-archive and --probe exclude each other"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			var stdout, stderr bytes.Buffer
			args := append([]string{"run", "--manifest", c.manifest, "--endpoint", sock, "--output", out}, c.args...)
			code := run(context.Background(), args, &stdout, &stderr)
			assert.Check(t, is.Equal(code, exitcode.Usage), stderr.String())
			assert.Check(t, is.Contains(stderr.String(), c.want))
			assert.Check(t, !strings.Contains(stderr.String(), "Engine answers"), "an Engine was contacted: %s", stderr.String())
			_, err := os.Stat(out)
			assert.Check(t, os.IsNotExist(err), "no output directory for a usage error")
		})
	}
}
