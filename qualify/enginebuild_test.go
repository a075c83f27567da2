package qualify_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/qualify"
	"github.com/qualbox/qualbox/qualify/evidence"
)

// An Engine build record is read as its non-empty lines; anything that
// is not small plain text is refused with the file and the reason.
func TestReadEngineBuild(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		assert.NilError(t, os.WriteFile(p, []byte(content), 0o644))
		return p
	}
	lines, err := qualify.ReadEngineBuild(write("ok", "dockerd 29.1.3 git moby/moby tag docker-v29.1.3 commit fbf3ed2  \n\nstore containerd\n"))
	assert.NilError(t, err)
	assert.DeepEqual(t, lines, []string{"dockerd 29.1.3 git moby/moby tag docker-v29.1.3 commit fbf3ed2", "store containerd"})

	for _, tc := range []struct{ name, content, want string }{
		{"big", strings.Repeat("x", qualify.MaxEngineBuildBytes+1), "more than 16384 bytes"},
		{"binary", "dockerd \xff\xfe\n", "not UTF-8 text"},
		{"escape", "dockerd 29.1.3\x1b[2J\n", `line 1 has control character '\x1b'`},
		{"empty", "\n \n", "empty"},
		{"long", strings.Repeat("l\n", qualify.MaxEngineBuildLines+1), "65 lines, more than 64"},
	} {
		p := write(tc.name, tc.content)
		_, err := qualify.ReadEngineBuild(p)
		var be *qualify.RecordError
		assert.Assert(t, errors.As(err, &be), "%s: %v", tc.name, err)
		assert.Check(t, is.Equal(be.Path, p))
		assert.Check(t, is.Contains(err.Error(), tc.want), tc.name)
	}
	_, err = qualify.ReadEngineBuild(filepath.Join(dir, "missing"))
	var be *qualify.RecordError
	assert.Check(t, errors.As(err, &be))
}

// An image inputs record is read within the same bounds and must parse
// as evidence.ParseImageInputs requires; what it holds goes into the run
// header as its lines.
func TestReadImageInputs(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		assert.NilError(t, os.WriteFile(p, []byte(content), 0o644))
		return p
	}
	good := write("ok", strings.Join(imageInputs, "\n")+"\n")
	lines, err := qualify.ReadImageInputs(good)
	assert.NilError(t, err)
	assert.DeepEqual(t, lines, imageInputs)
	for _, tc := range []struct{ name, content, want string }{
		{"binary", "suite \xff\n", "not UTF-8 text"},
		{"key of other lines", strings.Replace(strings.Join(imageInputs, "\n"), "suite bookworm", "suite trixie", 1), "imageInputs line 8: key 639057e81d211805, but the lines before it digest to "},
		{"engine build record", "dockerd 29.1.4 git moby/moby tag docker-v29.1.4\n", `imageInputs line 1: unknown name "dockerd"`},
	} {
		p := write(tc.name, tc.content)
		_, err := qualify.ReadImageInputs(p)
		var re *qualify.RecordError
		assert.Assert(t, errors.As(err, &re), "%s: %v", tc.name, err)
		assert.Check(t, is.Equal(re.Record, "image inputs record"))
		assert.Check(t, is.Equal(re.Path, p))
		assert.Check(t, is.Contains(err.Error(), tc.want), tc.name)
	}
}

// imageInputs is an image inputs record as lane D's scripts/lanec.sh
// writes it (docs/lanes.md#image-inputs); its key is what the script's
// `sha256sum | cut -c1-16` printed for the seven lines before it.
var imageInputs = []string{
	"suite bookworm",
	"arch arm64",
	"cgroup-driver cgroupfs",
	"packages systemd-sysv systemd",
	"recipe sha256:" + strings.Repeat("ab", 32),
	"kernel-package linux-image-6.1.0-57-arm64 6.1.192-3",
	"tuple ref-29.1.4 sha256:" + strings.Repeat("cd", 32),
	"key 639057e81d211805",
	"kernel linux-image-6.1.0-57-arm64 6.1.192-3",
	"dpkg sha256:" + strings.Repeat("ef", 32) + " 187 packages",
	"deb systemd 252.39-1~deb12u2",
	"deb systemd-sysv 252.39-1~deb12u2",
}

// The run header carries the Engine build and image inputs records it
// was given, and the host facts of a Linux controller.
func TestRunRecordsEngineBuild(t *testing.T) {
	cfg, out := fakeRun(t, fake{}, "pass")
	cfg.EngineBuild = []string{"dockerd 29.1.4 git moby/moby tag docker-v29.1.4 commit 08440b6ee8b2", "store containerd"}
	cfg.ImageInputs = imageInputs
	_, err := qualify.Run(context.Background(), cfg)
	assert.NilError(t, err)
	r := readJSON[evidence.Run](t, filepath.Join(out, "evidence.json"))
	assert.DeepEqual(t, r.EngineBuild, cfg.EngineBuild)
	assert.DeepEqual(t, r.ImageInputs, cfg.ImageInputs)
	if runtime.GOOS == "linux" {
		assert.Check(t, r.Host != nil && r.Host.Kernel != "", "host facts: %+v", r.Host)
	}
}
