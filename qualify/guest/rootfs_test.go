package guest

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

func TestRootfsLayout(t *testing.T) {
	var buf bytes.Buffer
	assert.NilError(t, rootfs([]byte("BUSYBOX"), []byte("PROBE"))(&buf))

	type entry struct {
		Type     byte
		Mode     int64
		UID, GID int
		Link     string
		Body     string
	}
	got := map[string]entry{}
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		assert.NilError(t, err)
		body, err := io.ReadAll(tr)
		assert.NilError(t, err)
		_, dup := got[h.Name]
		assert.Check(t, !dup, "duplicate %s", h.Name)
		got[h.Name] = entry{h.Typeflag, h.Mode, h.Uid, h.Gid, h.Linkname, string(body)}
	}
	want := map[string]entry{
		"tmp/":                        {tar.TypeDir, 0o1777, 0, 0, "", ""},
		"home/sandbox/":               {tar.TypeDir, 0o700, 65534, 65534, "", ""},
		"workspace/":                  {tar.TypeDir, 0o755, 0, 0, "", ""},
		"bin/busybox":                 {tar.TypeReg, 0o755, 0, 0, "", "BUSYBOX"},
		"bin/sh":                      {tar.TypeSymlink, 0o777, 0, 0, "busybox", ""},
		"bin/sleep":                   {tar.TypeSymlink, 0o777, 0, 0, "busybox", ""},
		"usr/local/bin/qualbox-probe": {tar.TypeReg, 0o755, 0, 0, "", "PROBE"},
		"etc/passwd":                  {tar.TypeReg, 0o644, 0, 0, "", "root:x:0:0:root:/root:/bin/sh\nsandbox:x:65534:65534:sandbox:/home/sandbox:/bin/sh\n"},
		"etc/group":                   {tar.TypeReg, 0o644, 0, 0, "", "root:x:0:\nsandbox:x:65534:\n"},
	}
	for name, w := range want {
		if diff := cmp.Diff(w, got[name]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	for _, a := range []string{"cat", "echo", "printf", "ls", "ln", "touch", "mkdir", "id", "true", "false", "head", "dd", "yes", "wc"} {
		assert.Check(t, is.Equal(got["bin/"+a].Link, "busybox"), a)
	}
}

func TestCheckStatic(t *testing.T) {
	busybox, err := os.ReadFile(DefaultBusybox)
	if err == nil {
		assert.NilError(t, checkStatic(busybox, "amd64"))
		assert.ErrorContains(t, checkStatic(busybox, "arm64"), "ELF machine EM_X86_64, want EM_AARCH64")
	}
	self, err := os.ReadFile("/bin/ls") // Debian's coreutils: dynamically linked.
	if err == nil {
		assert.ErrorContains(t, checkStatic(self, "amd64"), "dynamically linked")
	}
	assert.ErrorContains(t, checkStatic([]byte("#!/bin/sh\n"), "amd64"), "not an ELF executable")
}

func TestBuildReportsMissingBusybox(t *testing.T) {
	_, err := Build(t.Context(), nil, BuildOptions{Busybox: "/nonexistent/busybox"})
	assert.ErrorContains(t, err, "apt-get install busybox-static")
}
