package guest

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
)

// ArchiveOptions configure WriteArchive.
type ArchiveOptions struct {
	// Busybox and Probe are the static busybox and the static probe, ELF
	// executables for Architecture.
	Busybox, Probe []byte
	// Architecture is the image's GOARCH, "amd64" or "arm64".
	Architecture string
}

// WriteArchive writes the guest image without an Engine, as a
// docker-archive tar that `docker load` reads: the root filesystem Build
// imports (one uncompressed layer, <diff ID hex>/layer.tar), an image
// config with Os "linux", the Architecture, Env exactly [PATH=<Path>],
// Cmd ["/bin/sh"] and no Volumes (<image ID hex>.json), and manifest.json
// naming both, untagged. Every entry and the config's creation time are
// at the Unix epoch, so the archive's bytes depend only on the two
// binaries. It returns the image ID, "sha256:" and the hex SHA-256 of the
// config: the ID an Engine with the classic image store gives the loaded
// image (one with the containerd image store names it by the manifest
// digest it creates on load instead). It differs from the ID of Build's
// import, whose config the Engine writes.
//
// Errors: an Architecture other than amd64 or arm64, a busybox or probe
// that is not a static ELF executable for it, or w's write error.
func WriteArchive(w io.Writer, opts ArchiveOptions) (string, error) {
	if opts.Architecture != "amd64" && opts.Architecture != "arm64" {
		return "", fmt.Errorf("guest: architecture %q is not amd64 or arm64", opts.Architecture)
	}
	if err := checkStatic(opts.Busybox, opts.Architecture); err != nil {
		return "", fmt.Errorf("guest: busybox: %w", err)
	}
	if err := checkStatic(opts.Probe, opts.Architecture); err != nil {
		return "", fmt.Errorf("guest: probe: %w", err)
	}
	var layer bytes.Buffer
	if err := rootfs(opts.Busybox, opts.Probe)(&layer); err != nil {
		return "", fmt.Errorf("guest: root filesystem: %w", err)
	}
	diffID := sha256.Sum256(layer.Bytes())
	diffHex := hex.EncodeToString(diffID[:])

	created := epoch.Format("2006-01-02T15:04:05Z")
	config, err := json.Marshal(archiveConfig{
		Architecture: opts.Architecture,
		OS:           "linux",
		Created:      created,
		Config:       archiveRunConfig{Env: []string{"PATH=" + Path}, Cmd: []string{"/bin/sh"}},
		RootFS:       archiveRootFS{Type: "layers", DiffIDs: []string{"sha256:" + diffHex}},
		History:      []archiveHistory{{Created: created, CreatedBy: "qualbox guest.WriteArchive", Comment: "qualbox guest image"}},
	})
	if err != nil {
		return "", fmt.Errorf("guest: image config: %w", err)
	}
	id := sha256.Sum256(config)
	idHex := hex.EncodeToString(id[:])
	manifest, err := json.Marshal([]struct {
		Config   string
		RepoTags []string
		Layers   []string
	}{{Config: idHex + ".json", RepoTags: nil, Layers: []string{diffHex + "/layer.tar"}}})
	if err != nil {
		return "", fmt.Errorf("guest: archive manifest: %w", err)
	}

	tw := tar.NewWriter(w)
	entry := func(name string, body []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(body)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: diffHex + "/", Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
		return "", fmt.Errorf("guest: archive: %w", err)
	}
	for _, e := range []struct {
		name string
		body []byte
	}{
		{diffHex + "/layer.tar", layer.Bytes()},
		{idHex + ".json", config},
		{"manifest.json", manifest},
	} {
		if err := entry(e.name, e.body); err != nil {
			return "", fmt.Errorf("guest: archive: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return "", fmt.Errorf("guest: archive: %w", err)
	}
	return "sha256:" + idHex, nil
}

// archiveConfig is the image config of a docker-archive (the Docker image
// specification's config JSON), with only the fields the guest sets.
type archiveConfig struct {
	Architecture string           `json:"architecture"`
	OS           string           `json:"os"`
	Created      string           `json:"created"`
	Config       archiveRunConfig `json:"config"`
	RootFS       archiveRootFS    `json:"rootfs"`
	History      []archiveHistory `json:"history"`
}

type archiveRunConfig struct {
	Env []string `json:"Env"`
	Cmd []string `json:"Cmd"`
}

type archiveRootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

type archiveHistory struct {
	Created   string `json:"created"`
	CreatedBy string `json:"created_by"`
	Comment   string `json:"comment"`
}
