package dataset

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/moby/moby/api/types/jsonstream"
	"io"
	"path"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/moby/moby/client"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/qualbox/qualbox/qualify/guest/facts"

	"github.com/qualbox/qualbox/qualify/guest"
)

// Entry is one entry of a dataset image's single layer.
type Entry struct {
	// Path is '/'-separated and relative to the image root, for example
	// "corpus/a.txt". Parents must be listed before children.
	Path string
	// Dir marks a directory (mode 0755).
	Dir bool
	// Content is a regular file's bytes (mode 0644) when Dir is false and
	// Symlink is empty.
	Content []byte
	// Symlink, when set, makes the entry a symlink with this target,
	// stored verbatim (relative or absolute).
	Symlink string
}

// Spec is what Build assembles.
type Spec struct {
	// Architecture is the image platform's GOARCH, for example "arm64".
	Architecture string
	// Entries are the layer's entries in order.
	Entries []Entry
}

// Image is a built dataset image.
type Image struct {
	// ID is the exact image ID, "sha256:" and 64 lowercase hex digits.
	ID string
	// Architecture is the image's platform architecture as read back.
	Architecture string
	// Spec is what was built.
	Spec Spec
}

var imageIDPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// fixedTime keeps the layer's bytes independent of when it was built.
var fixedTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Reference returns the scenarios' reference dataset for architecture:
//
//	readme.txt
//	corpus/            a.txt, nested/b.txt (64 KiB), empty/
//	alias   -> corpus  an internal relative symlink alias
//	escape  -> ../../../../../../../../../..  resolves above any image root
//
// A mount with subpath "alias" must show corpus's content; one with subpath
// "escape" must be refused by the Engine (docs/contract.md#datasets).
func Reference(architecture string) Spec {
	big := make([]byte, 64<<10)
	for i := range big {
		big[i] = byte('a' + i%26)
	}
	return Spec{Architecture: architecture, Entries: []Entry{
		{Path: "readme.txt", Content: []byte("qualbox reference dataset\n")},
		{Path: "corpus", Dir: true},
		{Path: "corpus/a.txt", Content: []byte("alpha\n")},
		{Path: "corpus/nested", Dir: true},
		{Path: "corpus/nested/b.txt", Content: big},
		{Path: "corpus/empty", Dir: true},
		{Path: "alias", Symlink: "corpus"},
		{Path: "escape", Symlink: "../../../../../../../../../.."},
	}}
}

// Expected returns the tree the probe's tree action must report for a
// mount of the image at subpath ("" for the image root). Symlinks inside
// subpath are listed, not followed; subpath itself may be a symlink to a
// directory, which is resolved one level within the spec. ok is false when
// subpath names no directory of the spec.
func (s Spec) Expected(subpath string) (entries []facts.TreeEntry, ok bool) {
	root := subpath
	for _, e := range s.Entries {
		if e.Path == subpath && e.Symlink != "" {
			root = path.Clean(path.Join(path.Dir(subpath), e.Symlink))
		}
	}
	found := root == ""
	// The image root itself: imported layers give it mode 0755.
	entries = append(entries, facts.TreeEntry{Path: ".", Type: "dir", Mode: "0755"})
	for _, e := range s.Entries {
		rel := e.Path
		if root != "" {
			if e.Path == root {
				found = found || e.Dir
				continue
			}
			var cut bool
			if rel, cut = strings.CutPrefix(e.Path, root+"/"); !cut {
				continue
			}
		}
		entries = append(entries, e.treeEntry(rel))
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Path < entries[j].Path })
	return entries, found
}

// Paths returns every entry path of the spec, for checks that a listing
// (an export) contains none of them.
func (s Spec) Paths() []string {
	out := make([]string, 0, len(s.Entries))
	for _, e := range s.Entries {
		out = append(out, e.Path)
	}
	return out
}

func (e Entry) treeEntry(rel string) facts.TreeEntry {
	switch {
	case e.Dir:
		return facts.TreeEntry{Path: rel, Type: "dir", Mode: "0755"}
	case e.Symlink != "":
		return facts.TreeEntry{Path: rel, Type: "symlink", Mode: "0777", Target: e.Symlink}
	}
	sum := sha256.Sum256(e.Content)
	return facts.TreeEntry{Path: rel, Type: "file", Mode: "0644", Size: int64(len(e.Content)), SHA256: hex.EncodeToString(sum[:])}
}

func (s Spec) validate() error {
	if s.Architecture == "" {
		return errors.New("dataset: architecture is required")
	}
	seen := map[string]bool{}
	for i, e := range s.Entries {
		switch {
		case e.Path == "" || strings.HasPrefix(e.Path, "/") || path.Clean(e.Path) != e.Path || e.Path == "." || strings.HasPrefix(e.Path, "../") || e.Path == "..":
			return fmt.Errorf("dataset: entries[%d].Path %q is not a canonical relative path", i, e.Path)
		case seen[e.Path]:
			return fmt.Errorf("dataset: entries[%d].Path %q is duplicated", i, e.Path)
		case e.Dir && (e.Symlink != "" || e.Content != nil):
			return fmt.Errorf("dataset: entries[%d] %q is a directory with content or a target", i, e.Path)
		case e.Symlink != "" && e.Content != nil:
			return fmt.Errorf("dataset: entries[%d] %q is a symlink with content", i, e.Path)
		}
		if dir := path.Dir(e.Path); dir != "." && !seen[dir] {
			return fmt.Errorf("dataset: entries[%d] %q comes before its parent %q", i, e.Path, dir)
		}
		seen[e.Path] = true
	}
	return nil
}

// writeTar writes the layer: root-owned entries with fixed times.
func (s Spec) writeTar(w io.Writer) error {
	tw := tar.NewWriter(w)
	for _, e := range s.Entries {
		h := &tar.Header{Name: e.Path, ModTime: fixedTime, Format: tar.FormatPAX}
		switch {
		case e.Dir:
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, e.Path+"/", 0o755
		case e.Symlink != "":
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, e.Symlink, 0o777
		default:
			h.Typeflag, h.Size, h.Mode = tar.TypeReg, int64(len(e.Content)), 0o644
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.Content); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

// Build loads spec as an untagged image with no environment, command or
// volumes and reads it back: Id, Os "linux", Architecture and RootFS.Type
// "layers" must match. A readback mismatch removes the image again.
//
// The image goes in through POST /images/load as an archive holding both
// the OCI image layout and the legacy manifest.json, because Engines before
// API 1.48 ignore the platform of POST /images/create?fromSrc=- and record
// the daemon's own architecture. Its config carries a random build nonce
// label, so two builds of one spec never share an ID and Remove of one
// never takes another caller's image.
//
// Errors: an invalid spec, an Engine error, or a readback mismatch.
func Build(ctx context.Context, cli *client.Client, spec Spec) (Image, error) {
	if err := spec.validate(); err != nil {
		return Image{}, err
	}
	archive, err := spec.archive()
	if err != nil {
		return Image{}, err
	}
	resp, err := cli.ImageLoad(ctx, bytes.NewReader(archive), client.ImageLoadWithQuiet(true))
	if err != nil {
		return Image{}, fmt.Errorf("dataset: image load: %w", err)
	}
	id, err := loadedID(resp)
	resp.Close()
	if err != nil {
		return Image{}, err
	}
	img := Image{ID: id, Architecture: spec.Architecture, Spec: spec}
	if err := verify(ctx, cli, img); err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
		rmErr := Remove(rctx, cli, id)
		cancel()
		if rmErr != nil {
			return Image{}, errors.Join(err, fmt.Errorf("removing the rejected image: %w", rmErr))
		}
		return Image{}, err
	}
	return img, nil
}

// archive returns the image archive: blobs under blobs/sha256/, index.json
// and oci-layout (the OCI image layout) plus manifest.json (the layout
// Engines without the containerd image store read).
func (s Spec) archive() ([]byte, error) {
	var layer bytes.Buffer
	if err := s.writeTar(&layer); err != nil {
		return nil, err
	}
	layerDigest := sha256Digest(layer.Bytes())
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, err
	}
	config, err := json.Marshal(ocispec.Image{
		Created:  &fixedTime,
		Platform: ocispec.Platform{OS: "linux", Architecture: s.Architecture},
		Config:   ocispec.ImageConfig{Labels: map[string]string{NonceLabel: hex.EncodeToString(nonce[:])}},
		RootFS:   ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{layerDigest}},
		History:  []ocispec.History{{Created: &fixedTime, Comment: "qualbox dataset"}},
	})
	if err != nil {
		return nil, err
	}
	configDigest := sha256Digest(config)
	manifest, err := json.Marshal(ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: configDigest, Size: int64(len(config))},
		Layers:    []ocispec.Descriptor{{MediaType: ocispec.MediaTypeImageLayer, Digest: layerDigest, Size: int64(layer.Len())}},
	})
	if err != nil {
		return nil, err
	}
	manifestDigest := sha256Digest(manifest)
	index, err := json.Marshal(ocispec.Index{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageIndex,
		Manifests: []ocispec.Descriptor{{
			MediaType: ocispec.MediaTypeImageManifest, Digest: manifestDigest, Size: int64(len(manifest)),
			Platform: &ocispec.Platform{OS: "linux", Architecture: s.Architecture},
		}},
	})
	if err != nil {
		return nil, err
	}
	blob := func(d digest.Digest) string { return "blobs/sha256/" + d.Encoded() }
	legacy, err := json.Marshal([]map[string]any{{
		"Config": blob(configDigest), "RepoTags": nil, "Layers": []string{blob(layerDigest)},
	}})
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: fixedTime}); err != nil {
			return nil, err
		}
	}
	for _, f := range []struct {
		name string
		data []byte
	}{
		{blob(layerDigest), layer.Bytes()},
		{blob(configDigest), config},
		{blob(manifestDigest), manifest},
		{"index.json", index},
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"manifest.json", legacy},
	} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: fixedTime}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// removeTimeout bounds the removal of an image a build rejected; the
// caller's context may already be cancelled, so the removal runs detached
// from it and needs its own end.
const removeTimeout = 2 * time.Minute

// NonceLabel is the image config label holding a build's random nonce.
const NonceLabel = "org.qualbox.dataset.nonce"

func sha256Digest(b []byte) digest.Digest {
	sum := sha256.Sum256(b)
	return digest.NewDigestFromEncoded(digest.SHA256, hex.EncodeToString(sum[:]))
}

// loadedID reads the load reply, a stream of JSON messages, one of which
// says "Loaded image ID: sha256:<id>" for an untagged image.
func loadedID(r io.Reader) (string, error) {
	var id string
	err := guest.EngineMessages(r, func(msg jsonstream.Message) error {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(msg.Stream), "Loaded image ID: "); ok {
			if id != "" {
				return fmt.Errorf("reported two images, %s and %s", id, rest)
			}
			id = rest
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("dataset: image load: %w", err)
	}
	if !imageIDPattern.MatchString(id) {
		return "", fmt.Errorf("dataset: image load response has no sha256 image ID (got %q)", id)
	}
	return id, nil
}

func verify(ctx context.Context, cli *client.Client, img Image) error {
	in, err := cli.ImageInspect(ctx, img.ID)
	if err != nil {
		return fmt.Errorf("dataset: image inspect %s: %w", img.ID, err)
	}
	var problems []string
	if in.ID != img.ID {
		problems = append(problems, fmt.Sprintf("Id %q, want %q", in.ID, img.ID))
	}
	if in.Os != "linux" {
		problems = append(problems, fmt.Sprintf("Os %q, want linux", in.Os))
	}
	if in.Architecture != img.Architecture {
		problems = append(problems, fmt.Sprintf("Architecture %q, want %q", in.Architecture, img.Architecture))
	}
	if in.RootFS.Type != "layers" {
		problems = append(problems, fmt.Sprintf("RootFS.Type %q, want layers", in.RootFS.Type))
	}
	if in.Config != nil && len(in.Config.Volumes) > 0 {
		problems = append(problems, fmt.Sprintf("Config.Volumes %v, want none", in.Config.Volumes))
	}
	if len(problems) > 0 {
		return fmt.Errorf("dataset: image %s readback: %s", img.ID, strings.Join(problems, "; "))
	}
	return nil
}

// Remove removes exactly the image id with DELETE /images/{id}, never by
// name or pattern and never forced: guest.Remove, the one exact-ID image
// removal of the test bed. It returns the Engine's error (errdefs
// not-found when absent, conflict when a container uses it as its image)
// or an error when the Engine does not report id as deleted.
func Remove(ctx context.Context, cli *client.Client, id string) error {
	if err := guest.Remove(ctx, cli, id); err != nil {
		return fmt.Errorf("dataset: %w", err)
	}
	return nil
}
