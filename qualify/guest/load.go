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
	c := &archiveCheck{file: file, small: map[string][]byte{}, layers: map[string][]byte{}, dirs: map[string]bool{}, seen: map[string]bool{}}
	// The steps, in order: the file's bytes, its members, manifest.json,
	// the config, the platform the config declares, the layer's files.
	for _, step := range []func() error{c.readFile, c.readMembers, c.checkManifest, c.checkConfig, c.checkPlatform, c.checkRootFS} {
		if err := step(); err != nil {
			return ArchiveImage{}, err
		}
	}
	fileSum := sha256.Sum256(c.data)
	return ArchiveImage{
		File: file, SHA256: hex.EncodeToString(fileSum[:]), Size: int64(len(c.data)), data: c.data,
		ID: "sha256:" + c.configHex, OS: c.cfg.OS, Architecture: c.cfg.Architecture, DiffIDs: c.cfg.RootFS.DiffIDs,
	}, nil
}

// archiveCheck is the state of one ReadArchive as its steps fill it.
type archiveCheck struct {
	file string
	data []byte
	// The members kept: manifest.json and <hex>.json (small), <hex>/layer.tar
	// (layers), <hex>/ (dirs); seen holds every name read.
	small  map[string][]byte
	layers map[string][]byte
	dirs   map[string]bool
	seen   map[string]bool
	// image is manifest.json's one image; config and layer its config's and
	// layer's bytes, configHex the ID the config's name declares.
	image     archiveManifest
	configHex string
	config    []byte
	layer     []byte
	cfg       readConfig
}

// archiveManifest is one image of a docker-archive's manifest.json.
type archiveManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// readConfig is what ReadArchive reads of an image config: the fields
// it checks (archiveConfig is what WriteArchive writes).
type readConfig struct {
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

// fail is the *ArchiveError of problem p.
func (c *archiveCheck) fail(p ArchiveProblem, err error, format string, args ...any) error {
	return archiveError(c.file, p, err, format, args...)
}

// readFile reads the whole file, a regular file of at most
// MaxArchiveBytes, once: it is checked in memory and Load sends these
// very bytes, so a file swapped after the check never reaches the Engine.
func (c *archiveCheck) readFile() error {
	f, err := os.Open(c.file)
	if err != nil {
		return c.fail(ArchiveUnreadable, err, "")
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return c.fail(ArchiveUnreadable, err, "")
	}
	if !info.Mode().IsRegular() {
		return c.fail(ArchiveUnreadable, nil, "not a regular file (%s)", info.Mode().Type())
	}
	if info.Size() > MaxArchiveBytes {
		return c.fail(ArchiveUnreadable, nil, "%d bytes, more than the %d a guest image archive may have", info.Size(), MaxArchiveBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxArchiveBytes+1))
	if err != nil {
		return c.fail(ArchiveUnreadable, err, "")
	}
	if len(data) > MaxArchiveBytes {
		return c.fail(ArchiveUnreadable, nil, "more than the %d bytes a guest image archive may have", MaxArchiveBytes)
	}
	c.data = data
	return nil
}

// readMembers reads every tar member (member).
func (c *archiveCheck) readMembers() error {
	tr := tar.NewReader(bytes.NewReader(c.data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return c.fail(ArchiveNotTar, err, "")
		}
		if err := c.member(tr, h); err != nil {
			return err
		}
	}
}

// member checks member h is bounded, met once and plainly named, then
// keeps it (keep).
func (c *archiveCheck) member(tr *tar.Reader, h *tar.Header) error {
	name := h.Name
	// A sparse entry's logical size is not bounded by the bytes it
	// occupies, so a tiny archive could claim gigabytes: refused, as is
	// any entry larger than the archive itself.
	if sparseEntry(h) {
		return c.fail(ArchiveLayout, nil, "entry %q is a sparse file", name)
	}
	if h.Size > int64(len(c.data)) {
		return c.fail(ArchiveNotTar, nil, "entry %q claims %d bytes, more than the archive's %d", name, h.Size, len(c.data))
	}
	if c.seen[name] {
		return c.fail(ArchiveLayout, nil, "entry %q appears twice", name)
	}
	c.seen[name] = true
	if name == "" || path.IsAbs(name) || strings.Contains(name, "\\") || slices.Contains(strings.Split(strings.TrimSuffix(name, "/"), "/"), "..") {
		return c.fail(ArchiveLayout, nil, "entry name %q is not a plain relative path", name)
	}
	return c.keep(tr, h)
}

// keep files member h as a layer directory, a small JSON member (at most
// maxArchiveMember bytes) or a layer; any other member is refused.
func (c *archiveCheck) keep(tr *tar.Reader, h *tar.Header) error {
	name := h.Name
	switch {
	case h.Typeflag == tar.TypeDir && hex64.MatchString(strings.TrimSuffix(name, "/")):
		c.dirs[strings.TrimSuffix(name, "/")] = true
	case h.Typeflag == tar.TypeReg && (name == "manifest.json" || strings.HasSuffix(name, ".json") && hex64.MatchString(strings.TrimSuffix(name, ".json"))):
		if h.Size > maxArchiveMember {
			return c.fail(ArchiveLayout, nil, "%s is %d bytes, more than %d", name, h.Size, maxArchiveMember)
		}
		body, err := io.ReadAll(io.LimitReader(tr, h.Size))
		if err != nil {
			return c.fail(ArchiveNotTar, err, "reading %s", name)
		}
		c.small[name] = body
	case h.Typeflag == tar.TypeReg && path.Base(name) == "layer.tar" && hex64.MatchString(path.Dir(name)):
		body, err := io.ReadAll(io.LimitReader(tr, h.Size))
		if err != nil {
			return c.fail(ArchiveNotTar, err, "reading %s", name)
		}
		c.layers[name] = body
	default:
		return c.fail(ArchiveLayout, nil, "unexpected entry %q (tar type %q)", name, h.Typeflag)
	}
	return nil
}

// checkManifest parses manifest.json: one untagged image of one layer,
// whose config and layer are members, and no member beyond them.
func (c *archiveCheck) checkManifest() error {
	mj, ok := c.small["manifest.json"]
	if !ok {
		return c.fail(ArchiveLayout, nil, "no manifest.json")
	}
	var manifest []archiveManifest
	dec := json.NewDecoder(bytes.NewReader(mj))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&manifest); err != nil {
		return c.fail(ArchiveLayout, err, "manifest.json")
	}
	if len(manifest) != 1 {
		return c.fail(ArchiveLayout, nil, "manifest.json has %d images, want 1", len(manifest))
	}
	m := manifest[0]
	c.image = m
	if len(m.RepoTags) != 0 {
		// A tag would move a name on the Engine; the guest image is untagged.
		return c.fail(ArchiveLayout, nil, "manifest.json tags the image %q; a guest image is untagged", m.RepoTags)
	}
	if len(m.Layers) != 1 {
		return c.fail(ArchiveLayout, nil, "manifest.json has %d layers, want 1", len(m.Layers))
	}
	c.configHex = strings.TrimSuffix(m.Config, ".json")
	c.config, ok = c.small[m.Config]
	if !ok || !hex64.MatchString(c.configHex) {
		return c.fail(ArchiveLayout, nil, "manifest.json config %q is not an entry <64 hex>.json", m.Config)
	}
	c.layer, ok = c.layers[m.Layers[0]]
	if !ok {
		return c.fail(ArchiveLayout, nil, "manifest.json layer %q is not an entry", m.Layers[0])
	}
	if len(c.small) != 2 || len(c.layers) != 1 || len(c.dirs) > 1 || len(c.dirs) == 1 && !c.dirs[path.Dir(m.Layers[0])] {
		return c.fail(ArchiveLayout, nil, "entries beyond manifest.json, %s and %s", m.Config, m.Layers[0])
	}
	return nil
}

// checkConfig checks the config's SHA-256 is the ID its name declares,
// parses it, and checks its one diff ID is the layer's SHA-256.
func (c *archiveCheck) checkConfig() error {
	m := c.image
	if got := digest(c.config); got != c.configHex {
		return c.fail(ArchiveDigest, nil, "config %s has SHA-256 %s", m.Config, got)
	}
	if err := json.Unmarshal(c.config, &c.cfg); err != nil {
		return c.fail(ArchiveLayout, err, "config %s", m.Config)
	}
	if c.cfg.RootFS.Type != "layers" || len(c.cfg.RootFS.DiffIDs) != 1 {
		return c.fail(ArchiveLayout, nil, "config rootfs is %q with %d diff IDs, want layers with 1", c.cfg.RootFS.Type, len(c.cfg.RootFS.DiffIDs))
	}
	if want := "sha256:" + digest(c.layer); c.cfg.RootFS.DiffIDs[0] != want {
		return c.fail(ArchiveDigest, nil, "layer %s has SHA-256 %s, config diff ID %s", m.Layers[0], want, c.cfg.RootFS.DiffIDs[0])
	}
	return nil
}

// checkPlatform checks the config is the guest's: linux/amd64 or
// linux/arm64, Env, Cmd and no Volumes.
func (c *archiveCheck) checkPlatform() error {
	cfg := &c.cfg
	if cfg.OS != "linux" || cfg.Architecture != "amd64" && cfg.Architecture != "arm64" {
		return c.fail(ArchivePlatform, nil, "image is %s/%s, want linux/amd64 or linux/arm64", cfg.OS, cfg.Architecture)
	}
	if want := []string{"PATH=" + Path}; !slices.Equal(cfg.Config.Env, want) {
		return c.fail(ArchivePlatform, nil, "config Env %q, want %q", cfg.Config.Env, want)
	}
	if want := []string{"/bin/sh"}; !slices.Equal(cfg.Config.Cmd, want) {
		return c.fail(ArchivePlatform, nil, "config Cmd %q, want %q", cfg.Config.Cmd, want)
	}
	if len(cfg.Config.Volumes) != 0 {
		return c.fail(ArchivePlatform, nil, "config declares volumes %v", cfg.Config.Volumes)
	}
	return nil
}

// checkRootFS checks the layer is the guest root filesystem (checkLayer).
func (c *archiveCheck) checkRootFS() error {
	if err := checkLayer(c.layer, c.cfg.Architecture); err != nil {
		return c.fail(ArchiveLayout, nil, "layer %s is not the guest root filesystem: %v", c.image.Layers[0], err)
	}
	return nil
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
	if a.Architecture != arch {
		return Loaded{}, archiveError(a.File, ArchivePlatform, nil, "image is linux/%s, the profile requires linux/%s", a.Architecture, arch)
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
		return Loaded{}, archiveError(a.File, ArchiveUnreadable, nil, "not read by ReadArchive: no checked bytes to load")
	}
	return loadNew(ctx, cli, a, arch, before)
}

// loadNew loads a's bytes on an Engine that held the images before, and
// checks what it loaded (checkLoad). A failed check removes every image
// the Engine reported loaded that it did not hold before.
func loadNew(ctx context.Context, cli *client.Client, a ArchiveImage, arch string, before map[string]bool) (Loaded, error) {
	resp, err := cli.ImageLoad(ctx, bytes.NewReader(a.data), client.ImageLoadWithQuiet(true))
	if err != nil {
		return Loaded{}, archiveError(a.File, ArchiveEngine, err, "")
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
	if err := checkLoad(ctx, cli, a, arch, ids, msgErr); err != nil {
		return Loaded{}, removeRejected(ctx, cli, createdIDs, err)
	}
	return Loaded{ID: id, Archive: a, Created: created}, nil
}

// checkLoad checks what POST /images/load reported (image IDs ids, error
// message msgErr): no error, exactly one image, with a.ID unless the
// Engine uses the containerd image store, and that image read back
// (checkLoaded).
func checkLoad(ctx context.Context, cli *client.Client, a ArchiveImage, arch string, ids []string, msgErr error) error {
	if msgErr != nil {
		return archiveError(a.File, ArchiveEngine, msgErr, "")
	}
	if len(ids) != 1 {
		return archiveError(a.File, ArchiveEngine, nil, "the Engine reported %d loaded image IDs %q, want 1", len(ids), ids)
	}
	id := ids[0]
	if id != a.ID {
		store, err := containerdStore(ctx, cli)
		if err != nil {
			return fmt.Errorf("guest: engine info: %w", err)
		}
		if !store {
			return archiveError(a.File, ArchiveIDMismatch, nil, "the Engine loaded it as %s, the archive declares %s", id, a.ID)
		}
	}
	return checkLoaded(ctx, cli, id, a, arch)
}

// removeRejected removes the images created, by ID, after a failed check
// err, and returns err with any removal's failure.
func removeRejected(ctx context.Context, cli *client.Client, created []string, err error) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
	defer cancel()
	for _, c := range created {
		if rmErr := Remove(rctx, cli, c); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("removing the rejected image %s: %w", c, rmErr))
		}
	}
	return err
}

// archiveError is the *ArchiveError of problem p with the archive file.
func archiveError(file string, p ArchiveProblem, err error, format string, args ...any) error {
	return &ArchiveError{File: file, Problem: p, Detail: fmt.Sprintf(format, args...), Err: err}
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
