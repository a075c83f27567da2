package guest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/moby/moby/api/types/jsonstream"
	"io"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/moby/moby/client"
)

// Bounds of a guest image archive (the docker-archive WriteArchive writes,
// `make release`'s dist/qualbox-guest-linux-<arch>.tar): the whole file,
// and its manifest.json and image config, in bytes. The release archives
// are a few MiB (a static busybox and the probe).
const (
	MaxArchiveBytes  = 512 << 20
	maxArchiveMember = 1 << 20
)

// ArchiveProblem names what was wrong with a guest image archive.
type ArchiveProblem string

// The problems ReadArchive and Load report.
const (
	// ArchiveUnreadable: the file is missing, not a regular file, larger
	// than MaxArchiveBytes, or cannot be read.
	ArchiveUnreadable ArchiveProblem = "unreadable"
	// ArchiveNotTar: the bytes are not a tar archive, or it ends early
	// (truncated).
	ArchiveNotTar ArchiveProblem = "not a complete tar archive"
	// ArchiveLayout: an entry WriteArchive does not write (a path outside
	// the archive, a link or device, a duplicate, a tag, more than one
	// image or layer), or a manifest.json or config that does not parse.
	ArchiveLayout ArchiveProblem = "not a guest image archive"
	// ArchiveDigest: the config's SHA-256 is not the ID its name declares,
	// or the layer's SHA-256 is not the config's diff ID (corruption).
	ArchiveDigest ArchiveProblem = "digest mismatch"
	// ArchivePlatform: the image is not linux/<the architecture required>,
	// or its config is not the guest's (Env, Cmd, Volumes).
	ArchivePlatform ArchiveProblem = "wrong image"
	// ArchiveEngine: the Engine refused the load or reported no image.
	ArchiveEngine ArchiveProblem = "not loaded"
	// ArchiveIDMismatch: the Engine gave the loaded image another ID than
	// the one the archive declares (an Engine with the classic image store
	// must give the config digest).
	ArchiveIDMismatch ArchiveProblem = "image ID mismatch"
	// ArchiveReadback: the loaded image, inspected, differs from the
	// archive's config (Os, Architecture, Env, Cmd, Volumes, layers).
	ArchiveReadback ArchiveProblem = "loaded image differs"
)

// ArchiveError is the error of ReadArchive and Load: File is the archive
// path, Problem what kind of thing was wrong, Detail the specifics and Err
// the underlying error, if any.
type ArchiveError struct {
	File    string
	Problem ArchiveProblem
	Detail  string
	Err     error
}

func (e *ArchiveError) Error() string {
	s := fmt.Sprintf("guest: image archive %s: %s", e.File, e.Problem)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *ArchiveError) Unwrap() error { return e.Err }

// ArchiveImage is what a guest image archive declares, as ReadArchive
// checked it.
type ArchiveImage struct {
	// File is the archive's path as given.
	File string
	// SHA256 is the hex SHA-256 of the archive file; Size its length in
	// bytes.
	SHA256 string
	Size   int64
	// data are the bytes ReadArchive checked: Load sends exactly these,
	// whatever the file holds by then.
	data []byte
	// ID is the image ID the archive declares: "sha256:" and the hex
	// SHA-256 of its image config (the ID WriteArchive returns and
	// dist/GUEST-IMAGES lists).
	ID string
	// OS and Architecture are the config's (GOOS/GOARCH terms).
	OS, Architecture string
	// DiffIDs are the config's rootfs.diff_ids: one "sha256:<hex>" per
	// layer, each the SHA-256 of the uncompressed layer tar.
	DiffIDs []string
}

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ReadArchive reads the guest image archive at file without an Engine and
// checks it is what WriteArchive writes: a tar of one untagged image
// (manifest.json with exactly one entry, no RepoTags, one layer), whose
// config's SHA-256 is the ID its name declares and whose layer's SHA-256
// is the config's one diff ID, with Os "linux", Env exactly
// [PATH=<Path>], Cmd ["/bin/sh"] and no Volumes, and whose layer is byte
// for byte the guest root filesystem (docs/architecture.md) of the static
// busybox and probe it holds, ELF executables of the config's
// architecture (no other file, mode, owner or link); only regular files and
// directories with relative names, none twice, none beyond manifest.json,
// the config and the layer. It does not check the architecture against a
// requirement: Load does, and callers that check before any Engine
// contact compare ArchiveImage.Architecture.
//
// Errors are *ArchiveError naming file and the problem.
func ReadArchive(file string) (ArchiveImage, error) {
	fail := func(p ArchiveProblem, err error, format string, args ...any) (ArchiveImage, error) {
		return ArchiveImage{}, &ArchiveError{File: file, Problem: p, Detail: fmt.Sprintf(format, args...), Err: err}
	}
	f, err := os.Open(file)
	if err != nil {
		return fail(ArchiveUnreadable, err, "")
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fail(ArchiveUnreadable, err, "")
	}
	if !info.Mode().IsRegular() {
		return fail(ArchiveUnreadable, nil, "not a regular file (%s)", info.Mode().Type())
	}
	if info.Size() > MaxArchiveBytes {
		return fail(ArchiveUnreadable, nil, "%d bytes, more than the %d a guest image archive may have", info.Size(), MaxArchiveBytes)
	}
	// The whole file is read once and checked in memory; Load sends these
	// very bytes, so a file swapped after the check never reaches the
	// Engine.
	data, err := io.ReadAll(io.LimitReader(f, MaxArchiveBytes+1))
	if err != nil {
		return fail(ArchiveUnreadable, err, "")
	}
	if len(data) > MaxArchiveBytes {
		return fail(ArchiveUnreadable, nil, "more than the %d bytes a guest image archive may have", MaxArchiveBytes)
	}
	fileSum := sha256.Sum256(data)
	tr := tar.NewReader(bytes.NewReader(data))
	small := map[string][]byte{}  // manifest.json and <hex>.json
	layers := map[string][]byte{} // <hex>/layer.tar
	dirs := map[string]bool{}     // <hex>/
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fail(ArchiveNotTar, err, "")
		}
		name := h.Name
		// A sparse entry's logical size is not bounded by the bytes it
		// occupies, so a tiny archive could claim gigabytes: refused, as
		// is any entry larger than the archive itself.
		if sparseEntry(h) {
			return fail(ArchiveLayout, nil, "entry %q is a sparse file", name)
		}
		if h.Size > int64(len(data)) {
			return fail(ArchiveNotTar, nil, "entry %q claims %d bytes, more than the archive's %d", name, h.Size, len(data))
		}
		if seen[name] {
			return fail(ArchiveLayout, nil, "entry %q appears twice", name)
		}
		seen[name] = true
		if name == "" || path.IsAbs(name) || strings.Contains(name, "\\") || slices.Contains(strings.Split(strings.TrimSuffix(name, "/"), "/"), "..") {
			return fail(ArchiveLayout, nil, "entry name %q is not a plain relative path", name)
		}
		switch {
		case h.Typeflag == tar.TypeDir && hex64.MatchString(strings.TrimSuffix(name, "/")):
			dirs[strings.TrimSuffix(name, "/")] = true
		case h.Typeflag == tar.TypeReg && (name == "manifest.json" || strings.HasSuffix(name, ".json") && hex64.MatchString(strings.TrimSuffix(name, ".json"))):
			if h.Size > maxArchiveMember {
				return fail(ArchiveLayout, nil, "%s is %d bytes, more than %d", name, h.Size, maxArchiveMember)
			}
			body, err := io.ReadAll(io.LimitReader(tr, h.Size))
			if err != nil {
				return fail(ArchiveNotTar, err, "reading %s", name)
			}
			small[name] = body
		case h.Typeflag == tar.TypeReg && path.Base(name) == "layer.tar" && hex64.MatchString(path.Dir(name)):
			body, err := io.ReadAll(io.LimitReader(tr, h.Size))
			if err != nil {
				return fail(ArchiveNotTar, err, "reading %s", name)
			}
			layers[name] = body
		default:
			return fail(ArchiveLayout, nil, "unexpected entry %q (tar type %q)", name, h.Typeflag)
		}
	}

	mj, ok := small["manifest.json"]
	if !ok {
		return fail(ArchiveLayout, nil, "no manifest.json")
	}
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	dec := json.NewDecoder(bytes.NewReader(mj))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&manifest); err != nil {
		return fail(ArchiveLayout, err, "manifest.json")
	}
	if len(manifest) != 1 {
		return fail(ArchiveLayout, nil, "manifest.json has %d images, want 1", len(manifest))
	}
	m := manifest[0]
	if len(m.RepoTags) != 0 {
		// A tag would move a name on the Engine; the guest image is untagged.
		return fail(ArchiveLayout, nil, "manifest.json tags the image %q; a guest image is untagged", m.RepoTags)
	}
	if len(m.Layers) != 1 {
		return fail(ArchiveLayout, nil, "manifest.json has %d layers, want 1", len(m.Layers))
	}
	configHex := strings.TrimSuffix(m.Config, ".json")
	config, ok := small[m.Config]
	if !ok || !hex64.MatchString(configHex) {
		return fail(ArchiveLayout, nil, "manifest.json config %q is not an entry <64 hex>.json", m.Config)
	}
	layer, ok := layers[m.Layers[0]]
	if !ok {
		return fail(ArchiveLayout, nil, "manifest.json layer %q is not an entry", m.Layers[0])
	}
	if len(small) != 2 || len(layers) != 1 || len(dirs) > 1 || len(dirs) == 1 && !dirs[path.Dir(m.Layers[0])] {
		return fail(ArchiveLayout, nil, "entries beyond manifest.json, %s and %s", m.Config, m.Layers[0])
	}
	if got := digest(config); got != configHex {
		return fail(ArchiveDigest, nil, "config %s has SHA-256 %s", m.Config, got)
	}
	var cfg struct {
		Architecture string `json:"architecture"`
		OS           string `json:"os"`
		Config       struct {
			Env     []string            `json:"Env"`
			Cmd     []string            `json:"Cmd"`
			Volumes map[string]struct{} `json:"Volumes"`
		} `json:"config"`
		RootFS struct {
			Type    string   `json:"type"`
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	if err := json.Unmarshal(config, &cfg); err != nil {
		return fail(ArchiveLayout, err, "config %s", m.Config)
	}
	if cfg.RootFS.Type != "layers" || len(cfg.RootFS.DiffIDs) != 1 {
		return fail(ArchiveLayout, nil, "config rootfs is %q with %d diff IDs, want layers with 1", cfg.RootFS.Type, len(cfg.RootFS.DiffIDs))
	}
	if want := "sha256:" + digest(layer); cfg.RootFS.DiffIDs[0] != want {
		return fail(ArchiveDigest, nil, "layer %s has SHA-256 %s, config diff ID %s", m.Layers[0], want, cfg.RootFS.DiffIDs[0])
	}
	if cfg.OS != "linux" || cfg.Architecture != "amd64" && cfg.Architecture != "arm64" {
		return fail(ArchivePlatform, nil, "image is %s/%s, want linux/amd64 or linux/arm64", cfg.OS, cfg.Architecture)
	}
	if want := []string{"PATH=" + Path}; !slices.Equal(cfg.Config.Env, want) {
		return fail(ArchivePlatform, nil, "config Env %q, want %q", cfg.Config.Env, want)
	}
	if want := []string{"/bin/sh"}; !slices.Equal(cfg.Config.Cmd, want) {
		return fail(ArchivePlatform, nil, "config Cmd %q, want %q", cfg.Config.Cmd, want)
	}
	if len(cfg.Config.Volumes) != 0 {
		return fail(ArchivePlatform, nil, "config declares volumes %v", cfg.Config.Volumes)
	}
	if err := checkLayer(layer, cfg.Architecture); err != nil {
		return fail(ArchiveLayout, nil, "layer %s is not the guest root filesystem: %v", m.Layers[0], err)
	}
	return ArchiveImage{
		File: file, SHA256: hex.EncodeToString(fileSum[:]), Size: int64(len(data)), data: data,
		ID: "sha256:" + configHex, OS: cfg.OS, Architecture: cfg.Architecture, DiffIDs: cfg.RootFS.DiffIDs,
	}, nil
}

// checkLayer reports whether layer is byte for byte the root filesystem
// rootfs writes for the busybox and probe it contains, each a static ELF
// executable for arch: no other entry, mode, owner or link.
func checkLayer(layer []byte, arch string) error {
	bins := map[string][]byte{BusyboxPath[1:]: nil, ProbePath[1:]: nil}
	tr := tar.NewReader(bytes.NewReader(layer))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if sparseEntry(h) || h.Size > int64(len(layer)) {
			return fmt.Errorf("entry %q is sparse or claims %d bytes, more than the layer's %d", h.Name, h.Size, len(layer))
		}
		if _, ok := bins[h.Name]; ok && h.Typeflag == tar.TypeReg {
			if bins[h.Name], err = io.ReadAll(io.LimitReader(tr, h.Size)); err != nil {
				return err
			}
		}
	}
	for name, b := range bins {
		if err := checkStatic(b, arch); err != nil {
			return fmt.Errorf("/%s: %w", name, err)
		}
	}
	var want bytes.Buffer
	if err := rootfs(bins[BusyboxPath[1:]], bins[ProbePath[1:]])(&want); err != nil {
		return err
	}
	if !bytes.Equal(layer, want.Bytes()) {
		return errors.New("its entries differ from the guest layout (busybox, applet links, probe, /etc/passwd, /etc/group, fixed directories)")
	}
	return nil
}

// Loaded is a guest image Load made available on the Engine.
type Loaded struct {
	// ID is the exact image ID on the Engine: the archive's ID on an
	// Engine with the classic image store; on one with the containerd
	// image store (Docker Desktop) the digest that store gives the image
	// it created on load.
	ID string
	// Archive is what the archive declared.
	Archive ArchiveImage
	// Created is true when this Load put the image on the Engine, and so
	// its caller removes it (Remove with ID); false when the Engine
	// already had it, which is then left as it was.
	Created bool
}

// containerdStore reports whether the Engine keeps images in the
// containerd image store (its /info DriverStatus says
// driver-type io.containerd.snapshotter.v1), which names a loaded
// docker-archive by the manifest it creates, not by the config digest.
func containerdStore(ctx context.Context, cli *client.Client) (bool, error) {
	info, err := cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return false, err
	}
	for _, kv := range info.Info.DriverStatus {
		if kv[0] == "driver-type" && kv[1] == "io.containerd.snapshotter.v1" {
			return true, nil
		}
	}
	return false, nil
}

// sparseEntry reports whether h is a sparse file (old GNU or PAX sparse
// formats), whose logical size the tar reader yields from a few bytes.
func sparseEntry(h *tar.Header) bool {
	if h.Typeflag == tar.TypeGNUSparse {
		return true
	}
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

// Load puts the guest image of the archive a (from ReadArchive) on the
// Engine and checks it is that image, for architecture arch ("amd64" or
// "arm64"). When the Engine already has an image with a.ID it is not
// loaded again. Otherwise exactly the bytes ReadArchive checked (kept in
// a, not read from the file again) are streamed to POST /images/load; the
// Engine must report exactly one loaded image, with a.ID unless the
// Engine uses the containerd image store. Either way the image is read
// back: Os linux, Architecture arch, Env exactly [PATH=<Path>], Cmd
// ["/bin/sh"], no Volumes, and RootFS layers exactly a.DiffIDs, which
// pins its file system to the archive's layer.
//
// When a check fails after this call loaded images, every image the Engine
// reported loaded that it did not hold before is removed again by its ID. Errors are *ArchiveError naming a.File, or the
// Engine's error.
func Load(ctx context.Context, cli *client.Client, a ArchiveImage, arch string) (Loaded, error) {
	fail := func(p ArchiveProblem, err error, format string, args ...any) error {
		return &ArchiveError{File: a.File, Problem: p, Detail: fmt.Sprintf(format, args...), Err: err}
	}
	if a.Architecture != arch {
		return Loaded{}, fail(ArchivePlatform, nil, "image is linux/%s, the profile requires linux/%s", a.Architecture, arch)
	}
	if _, err := cli.ImageInspect(ctx, a.ID); err == nil {
		if err := checkLoaded(ctx, cli, a.ID, a, arch); err != nil {
			return Loaded{}, err
		}
		return Loaded{ID: a.ID, Archive: a, Created: false}, nil
	}
	// What the Engine holds before the load tells an image this call
	// created from one it only re-announced (containerd image store).
	before := map[string]bool{}
	list, err := cli.ImageList(ctx, client.ImageListOptions{All: true})
	if err != nil {
		return Loaded{}, fmt.Errorf("guest: image list: %w", err)
	}
	for _, s := range list.Items {
		before[s.ID] = true
	}
	if a.data == nil {
		return Loaded{}, fail(ArchiveUnreadable, nil, "not read by ReadArchive: no checked bytes to load")
	}
	resp, err := cli.ImageLoad(ctx, bytes.NewReader(a.data), client.ImageLoadWithQuiet(true))
	if err != nil {
		return Loaded{}, fail(ArchiveEngine, err, "")
	}
	ids, msgErr := loadedIDs(resp)
	resp.Close()
	var id string
	if len(ids) == 1 {
		id = ids[0]
	}
	var createdIDs []string
	for _, l := range ids {
		if !before[l] && !slices.Contains(createdIDs, l) {
			createdIDs = append(createdIDs, l)
		}
	}
	created := id != "" && slices.Contains(createdIDs, id)
	// From here on a failed check removes every image this call created.
	reject := func(err error) (Loaded, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
		defer cancel()
		for _, c := range createdIDs {
			if rmErr := Remove(rctx, cli, c); rmErr != nil {
				err = errors.Join(err, fmt.Errorf("removing the rejected image %s: %w", c, rmErr))
			}
		}
		return Loaded{}, err
	}
	if msgErr != nil {
		return reject(fail(ArchiveEngine, msgErr, ""))
	}
	if len(ids) != 1 {
		return reject(fail(ArchiveEngine, nil, "the Engine reported %d loaded image IDs %q, want 1", len(ids), ids))
	}
	if id != a.ID {
		store, err := containerdStore(ctx, cli)
		if err != nil {
			return reject(fmt.Errorf("guest: engine info: %w", err))
		}
		if !store {
			return reject(fail(ArchiveIDMismatch, nil, "the Engine loaded it as %s, the archive declares %s", id, a.ID))
		}
	}
	if err := checkLoaded(ctx, cli, id, a, arch); err != nil {
		return reject(err)
	}
	return Loaded{ID: id, Archive: a, Created: created}, nil
}

// loadedIDs reads the JSON message stream of POST /images/load and returns
// the IDs of its "Loaded image ID: sha256:..." lines, or the first error
// message.
func loadedIDs(body io.Reader) ([]string, error) {
	var ids []string
	err := EngineMessages(body, func(msg jsonstream.Message) error {
		for _, line := range strings.Split(msg.Stream, "\n") {
			if id, ok := strings.CutPrefix(strings.TrimSpace(line), "Loaded image ID: "); ok && imageIDPattern.MatchString(id) && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		return nil
	})
	return ids, err
}

// checkLoaded reads image id back and compares it to the archive.
func checkLoaded(ctx context.Context, cli *client.Client, id string, a ArchiveImage, arch string) error {
	img, err := cli.ImageInspect(ctx, id)
	if err != nil {
		return fmt.Errorf("guest: image inspect %s: %w", id, err)
	}
	var problems []string
	if img.ID != id {
		problems = append(problems, fmt.Sprintf("Id %q, want %q", img.ID, id))
	}
	if img.Os != "linux" || img.Architecture != arch {
		problems = append(problems, fmt.Sprintf("platform %s/%s, want linux/%s", img.Os, img.Architecture, arch))
	}
	if img.Config == nil {
		problems = append(problems, "no Config")
	} else {
		if want := []string{"PATH=" + Path}; !slices.Equal(img.Config.Env, want) {
			problems = append(problems, fmt.Sprintf("Config.Env %q, want %q", img.Config.Env, want))
		}
		if want := []string{"/bin/sh"}; !slices.Equal(img.Config.Cmd, want) {
			problems = append(problems, fmt.Sprintf("Config.Cmd %q, want %q", img.Config.Cmd, want))
		}
		if len(img.Config.Volumes) != 0 {
			problems = append(problems, fmt.Sprintf("Config.Volumes %v, want none", img.Config.Volumes))
		}
	}
	if !slices.Equal(img.RootFS.Layers, a.DiffIDs) {
		problems = append(problems, fmt.Sprintf("RootFS.Layers %q, the archive's diff IDs %q", img.RootFS.Layers, a.DiffIDs))
	}
	if len(problems) > 0 {
		return &ArchiveError{File: a.File, Problem: ArchiveReadback, Detail: fmt.Sprintf("image %s: %s", id, strings.Join(problems, "; "))}
	}
	return nil
}
