package lanectest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/qualify"
	"github.com/qualbox/qualbox/qualify/evidence"
)

// scriptsCopy copies scripts/lanec.sh and the guest files it reads
// (scripts/lanec/) under a new root, so a test can edit them.
func scriptsCopy(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	assert.NilError(t, os.CopyFS(filepath.Join(root, "scripts", "lanec"), os.DirFS("../../scripts/lanec")))
	data, err := os.ReadFile(lanec(t))
	assert.NilError(t, err)
	assert.NilError(t, os.WriteFile(filepath.Join(root, "scripts", "lanec.sh"), data, 0o755))
	return root
}

// keys runs `lanec.sh key --versions FILE` of the copy under root and
// returns its image and base keys.
func keys(t *testing.T, root, versions string, env ...string) (image, base string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "scripts", "lanec.sh"), "key", "--versions", versions)
	cmd.Env = append(os.Environ(), append([]string{"LANEC_ARCH=amd64", "LANEC_TUPLE=lane-b", "LANEC_SUITE=bookworm", "LANEC_CGROUP_DRIVER=systemd", "LANEC_EMULATE="}, env...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	assert.NilError(t, cmd.Run(), "lanec.sh key: %s", stderr.String())
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		k, v, _ := strings.Cut(line, " ")
		switch k {
		case "image":
			image = v
		case "base":
			base = v
		}
	}
	assert.Assert(t, len(image) == 16 && len(base) == 16, "keys: %q", stdout.String())
	return image, base
}

// The guest image's cache key covers the checked-in guest files: a change
// to a unit file's content, a new file or a renamed one gives a new image
// key (the next run assembles the image again), while the debootstrap
// base's key stays (that assembly starts from the cached base, not from a
// new debootstrap). The same files give the same key.
func TestCacheKeyCoversGuestFiles(t *testing.T) {
	root := scriptsCopy(t)
	versions := filepath.Join(t.TempDir(), "VERSIONS")
	assert.NilError(t, os.WriteFile(versions, []byte("dockerd v2.0.0-beta.24 (module build)\nrunc v1.3.4\n"), 0o644))
	image0, base0 := keys(t, root, versions)
	image, base := keys(t, root, versions)
	assert.Check(t, is.Equal(image, image0), "the same inputs gave another key")
	assert.Check(t, is.Equal(base, base0))

	seen := map[string]string{image0: "the checked-in files"}
	change := func(what string, edit func(guest string)) {
		t.Helper()
		edit(filepath.Join(root, "scripts", "lanec", "guest"))
		image, base := keys(t, root, versions)
		if prev, dup := seen[image]; dup {
			t.Errorf("%s: image key %s is that of %s", what, image, prev)
		}
		seen[image] = what
		assert.Check(t, is.Equal(base, base0), "%s changed the debootstrap base's key", what)
	}
	job := func(guest string) string {
		return filepath.Join(guest, "etc", "systemd", "system", "qualbox-job.service")
	}
	change("a changed qualbox-job.service", func(guest string) {
		data, err := os.ReadFile(job(guest))
		assert.NilError(t, err)
		assert.NilError(t, os.WriteFile(job(guest), bytes.Replace(data, []byte("TimeoutStopSec=150"), []byte("TimeoutStopSec=151"), 1), 0o644))
	})
	change("a new guest file", func(guest string) {
		assert.NilError(t, os.WriteFile(filepath.Join(guest, "etc", "sysctl.d", "91-more.conf"), []byte("vm.swappiness=0\n"), 0o644))
	})
	change("a renamed guest file", func(guest string) {
		d := filepath.Join(guest, "etc", "sysctl.d")
		assert.NilError(t, os.Rename(filepath.Join(d, "91-more.conf"), filepath.Join(d, "92-more.conf")))
	})
	// And the tuple's VERSIONS, as before.
	assert.NilError(t, os.WriteFile(versions, []byte("dockerd v2.0.0-beta.25 (module build)\nrunc v1.3.4\n"), 0o644))
	image, _ = keys(t, root, versions)
	_, dup := seen[image]
	assert.Check(t, !dup, "another VERSIONS gave a key seen before")
}

// `lanec.sh inputs` prints the image inputs record's lines that the
// image key digests (docs/lanes.md#image-inputs), and its key line is
// what `key` calls the image key and what verification recomputes: the
// first 16 hex digits of the SHA-256 of those lines. Its tuple line
// digests VERSIONS as `qualify run --engine-build` records it (trailing
// space and empty lines dropped), and an edited guest file changes its
// recipe line.
func TestInputsAreWhatTheImageKeyDigests(t *testing.T) {
	root := scriptsCopy(t)
	versions := filepath.Join(t.TempDir(), "VERSIONS")
	assert.NilError(t, os.WriteFile(versions, []byte("dockerd v2.0.0-beta.24 (module build)  \n\nrunc v1.3.4\n"), 0o644))
	inputs := func() []string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "scripts", "lanec.sh"), "inputs", "--versions", versions)
		cmd.Env = append(os.Environ(), "LANEC_ARCH=amd64", "LANEC_TUPLE=lane-b", "LANEC_SUITE=bookworm", "LANEC_CGROUP_DRIVER=systemd", "LANEC_EMULATE=")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		assert.NilError(t, cmd.Run(), "lanec.sh inputs: %s", stderr.String())
		return strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	}
	lines := inputs()
	n := len(lines)
	assert.Assert(t, n > 1 && strings.HasPrefix(lines[n-1], "key "), "inputs: %q", lines)
	sum := sha256.Sum256([]byte(strings.Join(lines[:n-1], "\n") + "\n"))
	assert.Check(t, is.Equal(lines[n-1], "key "+hex.EncodeToString(sum[:8])))
	image, _ := keys(t, root, versions)
	assert.Check(t, is.Equal(lines[n-1], "key "+image))
	build, err := qualify.ReadEngineBuild(versions)
	assert.NilError(t, err)
	assert.Check(t, slices.Contains(lines, "tuple lane-b sha256:"+evidence.RecordSHA256(build)), "%q", lines)

	recipe := func(ls []string) string {
		i := slices.IndexFunc(ls, func(l string) bool { return strings.HasPrefix(l, "recipe ") })
		assert.Assert(t, i >= 0, "no recipe line: %q", ls)
		return ls[i]
	}
	conf := filepath.Join(root, "scripts", "lanec", "guest", "etc", "sysctl.d", "90-qualbox.conf")
	data, err := os.ReadFile(conf)
	assert.NilError(t, err)
	assert.NilError(t, os.WriteFile(conf, append(data, "# edited\n"...), 0o644))
	assert.Check(t, recipe(inputs()) != recipe(lines), "an edited guest file left the recipe line %s", recipe(lines))
}
