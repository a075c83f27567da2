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
		var be *qualify.EngineBuildError
		assert.Assert(t, errors.As(err, &be), "%s: %v", tc.name, err)
		assert.Check(t, is.Equal(be.Path, p))
		assert.Check(t, is.Contains(err.Error(), tc.want), tc.name)
	}
	_, err = qualify.ReadEngineBuild(filepath.Join(dir, "missing"))
	var be *qualify.EngineBuildError
	assert.Check(t, errors.As(err, &be))
}

// The run header carries the Engine build record it was given, and the
// host facts of a Linux controller.
func TestRunRecordsEngineBuild(t *testing.T) {
	cfg, out := fakeRun(t, fake{}, "pass")
	cfg.EngineBuild = []string{"dockerd 29.1.4 git moby/moby tag docker-v29.1.4 commit 08440b6ee8b2", "store containerd"}
	_, err := qualify.Run(context.Background(), cfg)
	assert.NilError(t, err)
	r := readJSON[evidence.Run](t, filepath.Join(out, "evidence.json"))
	assert.DeepEqual(t, r.EngineBuild, cfg.EngineBuild)
	if runtime.GOOS == "linux" {
		assert.Check(t, r.Host != nil && r.Host.Kernel != "", "host facts: %+v", r.Host)
	}
}
