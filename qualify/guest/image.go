package guest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/moby/moby/api/types/jsonstream"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/moby/moby/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// removeTimeout bounds the removal of an image a build rejected; the
// caller's context may already be cancelled, so the removal runs detached
// from it and needs its own end.
const removeTimeout = 2 * time.Minute

// Fixed guest image layout.
const (
	// ProbePath is where the probe is installed in the image.
	ProbePath = "/usr/local/bin/qualbox-probe"
	// BusyboxPath is where busybox is installed in the image; its applets
	// are symlinks to it in /bin.
	BusyboxPath = "/bin/busybox"
	// Path is the image's only environment entry, the fixed PATH
	// (docs/contract.md#processes-and-streams).
	Path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	// SandboxUID and SandboxGID are the workload identity the image's
	// /etc/passwd and /etc/group name "sandbox". 65534 is the conventional
	// nobody/nogroup ID; the image names it "sandbox" with home
	// /home/sandbox (the contract's fixed HOME) so that
	// tools resolving the user see the sandbox's layout.
	SandboxUID = 65534
	SandboxGID = 65534

	// ProbePackage is the probe's Go import path.
	ProbePackage = "github.com/qualbox/qualbox/qualify/guest/probe"

	// DefaultBusybox is Debian's busybox-static binary on the host.
	DefaultBusybox = "/bin/busybox"
)

// Applets are the busybox applets linked into /bin, all present in Debian
// 12's busybox-static.
var Applets = []string{
	"cat", "cp", "dd", "echo", "env", "false", "grep", "head", "id", "kill",
	"ln", "ls", "mkdir", "mv", "printf", "ps", "pwd", "readlink", "rm",
	"sh", "sleep", "stat", "sync", "tail", "test", "touch", "tr", "true",
	"uname", "wc", "yes",
}

// BuildOptions configures Build. The zero value builds an amd64 image from
// the host's /bin/busybox and a probe compiled in the current directory.
type BuildOptions struct {
	// ProbeBinary is a prebuilt static Linux probe. Empty (the default)
	// compiles ProbePackage with `go build` (CGO_ENABLED=0, -trimpath).
	ProbeBinary string
	// GoTool is the go command used to compile the probe; default "go".
	GoTool string
	// SourceDir is the directory `go build` runs in, inside a checkout of
	// the github.com/qualbox/qualbox module; default the current directory.
	SourceDir string
	// Busybox is the static busybox to install; default DefaultBusybox.
	Busybox string
	// Architecture is the image's GOARCH, "amd64" (default) or "arm64".
	// Busybox and the probe must be ELF executables for it.
	Architecture string
}

// Image describes a built guest image.
type Image struct {
	// ID is the exact image ID, "sha256:" and 64 lowercase hex digits.
	ID string
	// ProbePath is the probe's path in the image (ProbePath).
	ProbePath string
	// Busybox is busybox's path in the image (BusyboxPath).
	Busybox string
	// Architecture is the image's architecture, for example "amd64".
	Architecture string
	// ProbeSHA256 and BusyboxSHA256 are the hex SHA-256 digests of the
	// installed binaries.
	ProbeSHA256   string
	BusyboxSHA256 string
	// Applets are the busybox applets linked in /bin.
	Applets []string
	// Elapsed is the wall time Build took, including probe compilation.
	Elapsed time.Duration
}

var imageIDPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// Build compiles the probe (unless opts.ProbeBinary is set), assembles the
// guest root filesystem as a tar stream and imports it through the Engine's
// POST /images/create?fromSrc=- with the changes `ENV PATH=<Path>` and
// `CMD ["/bin/sh"]`. It then inspects the image and checks its ID, Os
// "linux", Architecture, Env exactly [PATH=<Path>] and no Volumes. The image
// is not tagged: callers hold its exact ID and remove it with Remove.
//
// Errors: a missing or dynamically linked busybox (install Debian's
// busybox-static), a failed probe build, an Engine error, or a readback
// mismatch; in the last case the imported image is removed again.
func Build(ctx context.Context, cli *client.Client, opts BuildOptions) (Image, error) {
	start := time.Now()
	opts = opts.withDefaults()
	if opts.Architecture != "amd64" && opts.Architecture != "arm64" {
		return Image{}, fmt.Errorf("guest: architecture %q is not amd64 or arm64", opts.Architecture)
	}
	busybox, err := os.ReadFile(opts.Busybox)
	if errors.Is(err, os.ErrNotExist) {
		return Image{}, fmt.Errorf("guest: busybox %s is missing: install Debian's static busybox (apt-get install busybox-static)", opts.Busybox)
	}
	if err != nil {
		return Image{}, fmt.Errorf("guest: %w", err)
	}
	if err := checkStatic(busybox, opts.Architecture); err != nil {
		return Image{}, fmt.Errorf("guest: busybox %s: %w; install Debian's static busybox (apt-get install busybox-static)", opts.Busybox, err)
	}
	if err := checkApplets(ctx, opts); err != nil {
		return Image{}, err
	}

	probe, err := buildProbe(ctx, opts)
	if err != nil {
		return Image{}, err
	}
	if err := checkStatic(probe, opts.Architecture); err != nil {
		return Image{}, fmt.Errorf("guest: probe: %w", err)
	}

	id, err := importRootfs(ctx, cli, opts.Architecture, rootfs(busybox, probe))
	if err != nil {
		return Image{}, err
	}
	if err := verify(ctx, cli, id, opts.Architecture); err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
		rmErr := Remove(rctx, cli, id)
		cancel()
		if rmErr != nil {
			return Image{}, errors.Join(err, fmt.Errorf("removing the rejected image: %w", rmErr))
		}
		return Image{}, err
	}
	return Image{
		ID:            id,
		ProbePath:     ProbePath,
		Busybox:       BusyboxPath,
		Architecture:  opts.Architecture,
		ProbeSHA256:   digest(probe),
		BusyboxSHA256: digest(busybox),
		Applets:       slices.Clone(Applets),
		Elapsed:       time.Since(start),
	}, nil
}

func (o BuildOptions) withDefaults() BuildOptions {
	if o.GoTool == "" {
		o.GoTool = "go"
	}
	if o.Busybox == "" {
		o.Busybox = DefaultBusybox
	}
	if o.Architecture == "" {
		o.Architecture = "amd64"
	}
	return o
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// checkApplets runs `busybox --list` when the host can execute it and
// checks that every applet in Applets is there.
func checkApplets(ctx context.Context, opts BuildOptions) error {
	if runtime.GOOS != "linux" || runtime.GOARCH != opts.Architecture {
		return nil // Cannot run it here; the static check above still holds.
	}
	out, err := exec.CommandContext(ctx, opts.Busybox, "--list").Output()
	if err != nil {
		return fmt.Errorf("guest: %s --list: %w", opts.Busybox, err)
	}
	have := strings.Fields(string(out))
	var missing []string
	for _, a := range Applets {
		if !slices.Contains(have, a) {
			missing = append(missing, a)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("guest: busybox %s lacks applets %q", opts.Busybox, missing)
	}
	return nil
}

// buildProbe returns the probe executable, compiled into a temporary
// directory unless opts.ProbeBinary names one.
func buildProbe(ctx context.Context, opts BuildOptions) ([]byte, error) {
	if opts.ProbeBinary != "" {
		b, err := os.ReadFile(opts.ProbeBinary)
		if err != nil {
			return nil, fmt.Errorf("guest: probe: %w", err)
		}
		return b, nil
	}
	dir, err := os.MkdirTemp("", "qualbox-probe-")
	if err != nil {
		return nil, fmt.Errorf("guest: %w", err)
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "qualbox-probe")
	cmd := exec.CommandContext(ctx, opts.GoTool, "build", "-trimpath", "-ldflags=-s -w", "-o", out, ProbePackage)
	cmd.Dir = opts.SourceDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+opts.Architecture)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("guest: go build %s in %q: %w: %s (the probe is compiled from the qualbox source tree: run from inside the repository, or pass a prebuilt static probe with --probe)",
			ProbePackage, opts.SourceDir, err, strings.TrimSpace(stderr.String()))
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return nil, fmt.Errorf("guest: %w", err)
	}
	return b, nil
}

// importRootfs streams the tar into POST /images/create and returns the
// image ID from the Engine's final status message.
func importRootfs(ctx context.Context, cli *client.Client, arch string, writeTar func(io.Writer) error) (string, error) {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeTar(pw)) }()
	defer pr.Close()

	resp, err := cli.ImageImport(ctx, client.ImageImportSource{Source: pr, SourceName: "-"}, "", client.ImageImportOptions{
		Message:  "qualbox guest image",
		Changes:  []string{"ENV PATH=" + Path, `CMD ["/bin/sh"]`},
		Platform: ocispec.Platform{OS: "linux", Architecture: arch},
	})
	if err != nil {
		return "", fmt.Errorf("guest: image import: %w", err)
	}
	defer resp.Close()

	// The body is a stream of JSON messages; the last status is the ID.
	var id string
	err = EngineMessages(resp, func(msg jsonstream.Message) error {
		if imageIDPattern.MatchString(msg.Status) {
			id = msg.Status
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("guest: image import: %w", err)
	}
	if id == "" {
		return "", errors.New("guest: image import response has no sha256 image ID")
	}
	return id, nil
}

// verify reads the image back and compares it to what Build requested.
func verify(ctx context.Context, cli *client.Client, id, arch string) error {
	img, err := cli.ImageInspect(ctx, id)
	if err != nil {
		return fmt.Errorf("guest: image inspect %s: %w", id, err)
	}
	var problems []string
	if img.ID != id || !imageIDPattern.MatchString(img.ID) {
		problems = append(problems, fmt.Sprintf("Id %q, want %q", img.ID, id))
	}
	if img.Os != "linux" {
		problems = append(problems, fmt.Sprintf("Os %q, want linux", img.Os))
	}
	if img.Architecture != arch {
		problems = append(problems, fmt.Sprintf("Architecture %q, want %q", img.Architecture, arch))
	}
	if img.Config == nil {
		problems = append(problems, "no Config")
	} else {
		if want := []string{"PATH=" + Path}; !slices.Equal(img.Config.Env, want) {
			problems = append(problems, fmt.Sprintf("Config.Env %q, want %q", img.Config.Env, want))
		}
		if len(img.Config.Volumes) != 0 {
			problems = append(problems, fmt.Sprintf("Config.Volumes %v, want none", img.Config.Volumes))
		}
		if want := []string{"/bin/sh"}; !slices.Equal(img.Config.Cmd, want) {
			problems = append(problems, fmt.Sprintf("Config.Cmd %q, want %q", img.Config.Cmd, want))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("guest: image %s readback: %s", id, strings.Join(problems, "; "))
	}
	return nil
}

// Remove removes exactly the image id ("sha256:<64 hex>") with
// DELETE /images/{id}?noprune=1, never by name or pattern. It returns the
// Engine's error (errdefs not-found when it is absent, conflict when a
// container uses it) or an error when the Engine does not report id as
// deleted.
func Remove(ctx context.Context, cli *client.Client, id string) error {
	if !imageIDPattern.MatchString(id) {
		return fmt.Errorf("guest: %q is not an exact sha256 image ID", id)
	}
	res, err := cli.ImageRemove(ctx, id, client.ImageRemoveOptions{})
	if err != nil {
		return fmt.Errorf("guest: image remove %s: %w", id, err)
	}
	for _, item := range res.Items {
		if item.Deleted == id {
			return nil
		}
	}
	return fmt.Errorf("guest: image remove %s: the Engine did not report it deleted: %+v", id, res.Items)
}
