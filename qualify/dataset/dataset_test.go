package dataset

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/internal/testengine"
)

func engineClient(t *testing.T) *client.Client {
	t.Helper()
	cli, err := client.New(client.WithHost("unix://" + testengine.Require(t)))
	assert.NilError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func TestBuildForeignArchitectureAndRemoveByID(t *testing.T) {
	cli := engineClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, arch := range []string{"arm64", "amd64"} {
		t.Run(arch, func(t *testing.T) {
			img, err := Build(ctx, cli, Reference(arch))
			t.Cleanup(func() {
				if img.ID != "" {
					if err := Remove(context.Background(), cli, img.ID); err != nil && !cerrdefs.IsNotFound(err) {
						t.Errorf("cleanup: %v", err)
					}
				}
			})
			assert.NilError(t, err)
			in, err := cli.ImageInspect(ctx, img.ID)
			assert.NilError(t, err)
			assert.Equal(t, in.Architecture, arch)
			assert.Equal(t, in.Os, "linux")
			assert.Equal(t, in.RootFS.Type, "layers")
			assert.Check(t, is.Len(in.RepoTags, 0), "dataset images stay untagged")

			assert.NilError(t, Remove(ctx, cli, img.ID))
			_, err = cli.ImageInspect(ctx, img.ID)
			assert.Check(t, cerrdefs.IsNotFound(err), "image %s still present after Remove: %v", img.ID, err)
			err = Remove(ctx, cli, img.ID)
			assert.Check(t, cerrdefs.IsNotFound(err), "second Remove: %v", err)
		})
	}
}

func TestRemoveRefusesAnythingButAnExactID(t *testing.T) {
	for _, ref := range []string{"", "latest", "sha256:abc", "qualbox-dataset", "SHA256:" + strings.Repeat("a", 64)} {
		err := Remove(context.Background(), nil, ref)
		assert.ErrorContains(t, err, "is not an exact sha256 image ID")
	}
}

func TestSpecValidation(t *testing.T) {
	for name, entries := range map[string][]Entry{
		"absolute":      {{Path: "/etc", Dir: true}},
		"dotdot":        {{Path: "../x", Content: []byte("x")}},
		"not canonical": {{Path: "a//b", Content: []byte("x")}},
		"duplicate":     {{Path: "a", Dir: true}, {Path: "a", Dir: true}},
		"orphan":        {{Path: "a/b", Content: []byte("x")}},
		"dir content":   {{Path: "a", Dir: true, Content: []byte("x")}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Build(context.Background(), nil, Spec{Architecture: "amd64", Entries: entries})
			assert.ErrorContains(t, err, "dataset: entries[")
		})
	}
	_, err := Build(context.Background(), nil, Spec{})
	assert.ErrorContains(t, err, "architecture is required")
}

func TestExpected(t *testing.T) {
	spec := Reference("arm64")
	corpus, ok := spec.Expected("corpus")
	assert.Assert(t, ok)
	alias, ok := spec.Expected("alias")
	assert.Assert(t, ok, "a symlink alias to a directory resolves within the spec")
	assert.DeepEqual(t, alias, corpus)
	var paths []string
	for _, e := range corpus {
		paths = append(paths, e.String())
	}
	alpha := sha256.Sum256([]byte("alpha\n"))
	assert.DeepEqual(t, paths, []string{
		"dir 0755 .",
		"file 0644 a.txt 6 " + hex.EncodeToString(alpha[:]),
		"dir 0755 empty",
		"dir 0755 nested",
		"file 0644 nested/b.txt 65536 " + corpus[4].SHA256,
	})
	assert.Equal(t, len(corpus[4].SHA256), 64)
	root, ok := spec.Expected("")
	assert.Assert(t, ok)
	assert.Equal(t, len(root), len(spec.Entries)+1)
	_, ok = spec.Expected("readme.txt")
	assert.Assert(t, !ok, "a file is not a mountable subpath directory")
	_, ok = spec.Expected("missing")
	assert.Assert(t, !ok)
}
