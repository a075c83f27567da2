package release

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/qualbox/qualbox/qualify/guest"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	modzip "golang.org/x/mod/zip"
)

// Module is the path of the repository's one module.
const Module = "github.com/qualbox/qualbox"

// Commands are the main packages a release ships, relative to Module.
var Commands = []string{"cmd/qualify", "cmd/observe"}

// Platforms are the GOOS/GOARCH pairs a release is built for: the Linux
// hosts of docs/lanes.md and the Apple Silicon controller of the Mac
// handoff (README.md).
var Platforms = []string{"linux/amd64", "linux/arm64", "darwin/arm64"}

// ProbeCommand is the guest probe's main package, relative to Module; it is
// installed for the Linux platforms and goes into the guest image archives.
const ProbeCommand = "qualify/guest/probe"

// ImagesFile is the name of the file listing the guest image archives:
// one "<image ID>  <archive name>" line per archive, the ID being the
// config digest guest.WriteArchive returns.
const ImagesFile = "GUEST-IMAGES"

// SumsFile is the name of the checksum file in the output directory: one
// "<sha256 hex>  <file name>" line per artifact, sorted by name, the
// format `sha256sum -c` reads.
const SumsFile = "SHA256SUMS"

// Version returns the module version a release described as describe is
// stamped with. A semantic version (git describe of a tag: "v1.2.0",
// "v1.2.0-3-g93d924b", "v1.2.0-dirty") is returned as it is; anything
// else git describe prints without a tag ("93d924b", "93d924b-dirty") is
// made a pre-release of v0.0.0: "v0.0.0-g93d924b". A module version
// cannot carry build metadata ("+..."), so that and any string that is
// still not a valid module version afterwards is an error naming it.
func Version(describe string) (string, error) {
	v := strings.TrimSpace(describe)
	if v == "" {
		return "", errors.New("release: VERSION is empty (tag the commit, or pass VERSION=vMAJOR.MINOR.PATCH[-PRERELEASE])")
	}
	if !strings.HasPrefix(v, "v") {
		v = "v0.0.0-g" + v
	}
	// Canonical drops build metadata and expands shorthands ("v1.2"), and
	// is "" for anything that is no semantic version.
	if semver.Canonical(v) != v {
		return "", fmt.Errorf("release: VERSION %q is not a canonical module version (vMAJOR.MINOR.PATCH[-PRERELEASE], no +build metadata)", describe)
	}
	if err := module.Check(Module, v); err != nil {
		return "", fmt.Errorf("release: VERSION %q: %w", describe, err)
	}
	return v, nil
}

// WorkTree returns a directory holding the files of the work tree at root
// as git sees them (tracked and untracked, not ignored: no dist/, no
// reports/runs/), copied into a new temporary directory, and a function
// that removes it. The module zip then holds what a tag of this tree
// would hold plus its uncommitted edits. Outside a git checkout (a module
// zip's own tree) it returns root itself and a no-op.
func WorkTree(root string) (dir string, cleanup func() error, err error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--deduplicate")
	cmd.Dir = root
	list, err := cmd.Output()
	if err != nil {
		return root, func() error { return nil }, nil
	}
	dst, err := os.MkdirTemp("", "qualbox-release-src-")
	if err != nil {
		return "", nil, fmt.Errorf("release: %w", err)
	}
	cleanup = func() error { return os.RemoveAll(dst) }
	for _, name := range strings.Split(strings.TrimRight(string(list), "\x00"), "\x00") {
		if name == "" {
			continue
		}
		src := filepath.Join(root, filepath.FromSlash(name))
		info, err := os.Lstat(src)
		if errors.Is(err, fs.ErrNotExist) || err == nil && !info.Mode().IsRegular() {
			continue // deleted in the work tree, or not a regular file
		}
		if err == nil {
			err = copyFile(src, filepath.Join(dst, filepath.FromSlash(name)), info.Mode().Perm())
		}
		if err != nil {
			cleanup()
			return "", nil, fmt.Errorf("release: copying the work tree: %w", err)
		}
	}
	return dst, cleanup, nil
}

func copyFile(src, dst string, perm fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// WriteProxy writes into the directory proxy (created if needed) the
// GOPROXY file layout of module Module at version, packed from src with
// golang.org/x/mod/zip: <escaped module>/@v/list, <version>.info (Version
// and Time, RFC 3339), <version>.mod (src/go.mod) and <version>.zip.
// Packing fails, naming the file, on anything a module proxy would refuse
// (a file name reserved on Windows, a case collision, a zip over 500 MB).
func WriteProxy(proxy, src, version string) error {
	ep, err := module.EscapePath(Module)
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	ev, err := module.EscapeVersion(version)
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	at := filepath.Join(proxy, filepath.FromSlash(ep), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	zf, err := os.Create(filepath.Join(at, ev+".zip"))
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	if err := modzip.CreateFromDir(zf, module.Version{Path: Module, Version: version}, src); err != nil {
		zf.Close()
		return fmt.Errorf("release: packing %s as %s@%s: %w", src, Module, version, err)
	}
	if err := zf.Close(); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	gomod, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	for name, body := range map[string][]byte{ev + ".mod": gomod, ev + ".info": info, "list": []byte(version + "\n")} {
		if err := os.WriteFile(filepath.Join(at, name), body, 0o644); err != nil {
			return fmt.Errorf("release: %w", err)
		}
	}
	return nil
}

// InstallEnv returns environ without the go command's settings and with
// those of an install that reads Module from the file proxy and every
// dependency from the module cache modcache (its cache/download directory
// is itself a file proxy) and nothing from the network: go env file off,
// workspace mode off, GOFLAGS="-mod=mod -modcacherw -trimpath" (set, so a
// machine's GOFLAGS does not matter), no checksum database (dependencies
// are checked against the module's own go.sum), the local toolchain,
// CGO_ENABLED=0, and the given GOPATH, GOMODCACHE (an empty cache of the
// install's own, so nothing is taken from a stale copy of Module) and
// GOCACHE.
func InstallEnv(environ []string, proxy, modcache, gopath, installModcache, gocache string) []string {
	var env []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "GOFLAGS", "GOPROXY", "GONOPROXY", "GONOSUMDB", "GONOSUMCHECK", "GOPRIVATE", "GOSUMDB", "GOINSECURE", "GOVCS",
			"GOWORK", "GOMODCACHE", "GOBIN", "GOENV", "GOTOOLCHAIN", "GOOS", "GOARCH", "GOPATH", "GOCACHE", "CGO_ENABLED":
			continue
		}
		env = append(env, kv)
	}
	env = append(env,
		"GOENV=off",
		"GOWORK=off",
		"GOFLAGS=-mod=mod -modcacherw -trimpath",
		"GOPROXY=file://"+filepath.ToSlash(proxy)+",file://"+filepath.ToSlash(filepath.Join(modcache, "cache", "download")),
		"GOSUMDB=off",
		"GONOSUMDB="+Module,
		"GOPRIVATE=",
		"GONOPROXY=",
		"GOTOOLCHAIN=local",
		"CGO_ENABLED=0",
		"GOPATH="+gopath,
		"GOMODCACHE="+installModcache,
	)
	if gocache != "" {
		env = append(env, "GOCACHE="+gocache)
	}
	return env
}

// Options configure Build.
type Options struct {
	Root      string   // repository root: the work tree packed
	Version   string   // module version, already checked by Version
	Out       string   // output directory; the artifacts of an earlier release in it are removed first
	Platforms []string // GOOS/GOARCH pairs; nil means Platforms
	GoTool    string   // go command; "" means "go" on PATH
	// Busybox maps a Linux GOARCH ("amd64", "arm64") to the static
	// busybox its guest image archive is built with; an architecture
	// without one gets no archive (logged).
	Busybox map[string]string
	Log     io.Writer
}

// Build packs opts.Root at opts.Version, installs every Command from that
// proxy for every platform, copies each binary to
// opts.Out/<command>-<goos>-<goarch>, and for every Linux platform with a
// busybox in opts.Busybox writes the guest image (that busybox and
// ProbeCommand installed the same way) as the docker-archive
// opts.Out/qualbox-guest-linux-<goarch>.tar, listed with its image ID in
// opts.Out/ImagesFile. Last it writes opts.Out/SumsFile over the binaries
// and archives. It returns their names, sorted. Errors name the step and
// carry the go command's output.
//
// The steps, in order: the go environment (goEnv), the module cache
// (download), the packed proxy (pack), the output directory cleared of
// an earlier release (clearOut), each platform's install, binaries and
// guest image (platform), and last the images list and sums (finish).
func Build(opts Options) ([]string, error) {
	b := &build{opts: opts.withDefaults()}
	if err := b.goEnv(); err != nil {
		return nil, err
	}
	if err := b.download(); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "qualbox-release-")
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	defer func() {
		// The install's module cache is writable (-modcacherw), so it can go.
		os.RemoveAll(tmp)
	}()
	b.tmp = tmp
	src, cleanup, err := WorkTree(b.opts.Root)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	if err := b.pack(src); err != nil {
		return nil, err
	}
	if err := b.clearOut(); err != nil {
		return nil, err
	}
	for _, p := range b.opts.Platforms {
		if err := b.platform(p); err != nil {
			return nil, err
		}
	}
	return b.finish()
}

// withDefaults fills the options Build defaults: GoTool, Platforms, Log.
func (opts Options) withDefaults() Options {
	if opts.GoTool == "" {
		opts.GoTool = "go"
	}
	if opts.Platforms == nil {
		opts.Platforms = Platforms
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	return opts
}

// build is the state of one Build as its steps fill it.
type build struct {
	opts Options
	// modcache, gocache, hostGOOS and hostGOARCH are the go command's
	// GOMODCACHE, GOCACHE, GOHOSTOS and GOHOSTARCH.
	modcache, gocache    string
	hostGOOS, hostGOARCH string
	// tmp holds the proxy and each platform's GOPATH; proxy is the
	// packed module proxy in it.
	tmp, proxy string
	// targets are the Commands at opts.Version, as go install takes them.
	targets []string
	// names are the files written to opts.Out (binaries and archives);
	// images are the ImagesFile lines.
	names, images []string
}

// goEnv reads the go command's environment Build depends on.
func (b *build) goEnv() error {
	for _, v := range []struct {
		name string
		dst  *string
	}{
		{"GOMODCACHE", &b.modcache},
		{"GOCACHE", &b.gocache},
		{"GOHOSTOS", &b.hostGOOS},
		{"GOHOSTARCH", &b.hostGOARCH},
	} {
		out, err := exec.Command(b.opts.GoTool, "env", v.name).Output()
		if err != nil {
			return fmt.Errorf("release: go env %s: %w", v.name, err)
		}
		*v.dst = strings.TrimSpace(string(out))
	}
	return nil
}

// download fills the module cache for the module's build list: the
// install reads dependencies from it only (from the network only if
// something is missing).
func (b *build) download() error {
	download := exec.Command(b.opts.GoTool, "mod", "download")
	download.Dir = b.opts.Root
	if out, err := download.CombinedOutput(); err != nil {
		return fmt.Errorf("release: go mod download in %s: %w: %s", b.opts.Root, err, bytes.TrimSpace(out))
	}
	return nil
}

// pack writes the work tree src as the module proxy in b.tmp.
func (b *build) pack(src string) error {
	b.proxy = filepath.Join(b.tmp, "proxy")
	if err := WriteProxy(b.proxy, src, b.opts.Version); err != nil {
		return err
	}
	fmt.Fprintf(b.opts.Log, "release: packed %s as %s@%s\n", b.opts.Root, Module, b.opts.Version)
	b.targets = make([]string, len(Commands))
	for i, c := range Commands {
		b.targets[i] = Module + "/" + c + "@" + b.opts.Version
	}
	return nil
}

// clearOut creates opts.Out and removes what an earlier release wrote,
// so that nothing stale sits beside SumsFile unlisted; other files in
// opts.Out stay.
func (b *build) clearOut() error {
	if err := os.MkdirAll(b.opts.Out, 0o755); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	for _, p := range Platforms {
		goos, goarch, _ := strings.Cut(p, "/")
		stale := []string{"qualbox-guest-" + goos + "-" + goarch + ".tar"}
		for _, c := range Commands {
			stale = append(stale, filepath.Base(c)+"-"+goos+"-"+goarch)
		}
		for _, n := range append(stale, SumsFile, ImagesFile) {
			if err := removeIfPresent(filepath.Join(b.opts.Out, n)); err != nil {
				return err
			}
		}
	}
	return nil
}

// removeIfPresent removes path; its absence is no error.
func removeIfPresent(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("release: %w", err)
	}
	return nil
}

// platform installs the commands for p (GOOS/GOARCH), copies them to
// opts.Out and, for Linux, writes the guest image archive.
func (b *build) platform(p string) error {
	goos, goarch, ok := strings.Cut(p, "/")
	if !ok || goos == "" || goarch == "" {
		return fmt.Errorf("release: platform %q is not GOOS/GOARCH", p)
	}
	bin, err := b.install(p, goos, goarch)
	if err != nil {
		return err
	}
	for _, c := range Commands {
		name := filepath.Base(c) + "-" + goos + "-" + goarch
		if err := copyOut(filepath.Join(bin, filepath.Base(c)), filepath.Join(b.opts.Out, name)); err != nil {
			return err
		}
		b.names = append(b.names, name)
	}
	if goos != "linux" {
		return nil
	}
	return b.guestImage(bin, goarch)
}

// install runs go install of the targets (and, for Linux, ProbeCommand)
// for p from the packed proxy, and returns the directory the binaries
// are in.
func (b *build) install(p, goos, goarch string) (string, error) {
	gopath := filepath.Join(b.tmp, "gopath-"+goos+"-"+goarch)
	install := b.targets
	if goos == "linux" {
		install = append(slices.Clone(b.targets), Module+"/"+ProbeCommand+"@"+b.opts.Version)
	}
	cmd := exec.Command(b.opts.GoTool, append([]string{"install"}, install...)...)
	cmd.Dir = b.tmp
	cmd.Env = append(InstallEnv(os.Environ(), b.proxy, b.modcache, gopath, filepath.Join(b.tmp, "modcache"), b.gocache), "GOOS="+goos, "GOARCH="+goarch)
	fmt.Fprintf(b.opts.Log, "release: go install %s for %s\n", strings.Join(install, " "), p)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("release: go install for %s: %w: %s", p, err, bytes.TrimSpace(out))
	}
	// go install puts a cross-compiled binary in $GOPATH/bin/GOOS_GOARCH.
	bin := filepath.Join(gopath, "bin")
	if goos != b.hostGOOS || goarch != b.hostGOARCH {
		bin = filepath.Join(bin, goos+"_"+goarch)
	}
	return bin, nil
}

// guestImage writes linux/goarch's guest image archive from the probe in
// bin, or logs that no busybox was given for it.
func (b *build) guestImage(bin, goarch string) error {
	busybox := b.opts.Busybox[goarch]
	if busybox == "" {
		fmt.Fprintf(b.opts.Log, "release: no static busybox for linux/%s given (BUSYBOX_%s=...): no guest image archive for it\n", goarch, strings.ToUpper(goarch))
		return nil
	}
	name := "qualbox-guest-linux-" + goarch + ".tar"
	id, err := WriteImage(filepath.Join(b.opts.Out, name), busybox, filepath.Join(bin, filepath.Base(ProbeCommand)), goarch)
	if err != nil {
		return err
	}
	fmt.Fprintf(b.opts.Log, "release: %s: guest image %s (docker load -i %s)\n", name, id, name)
	b.images = append(b.images, id+"  "+name+"\n")
	b.names = append(b.names, name)
	return nil
}

// finish writes ImagesFile (or removes it when no image was written) and
// SumsFile, and returns the written names, sorted.
func (b *build) finish() ([]string, error) {
	sort.Strings(b.names)
	sort.Strings(b.images)
	imagesPath := filepath.Join(b.opts.Out, ImagesFile)
	if len(b.images) == 0 {
		if err := removeIfPresent(imagesPath); err != nil {
			return nil, err
		}
	} else if err := os.WriteFile(imagesPath, []byte(strings.Join(b.images, "")), 0o644); err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	if err := WriteSums(b.opts.Out, b.names); err != nil {
		return nil, err
	}
	return b.names, nil
}

// WriteImage writes the guest image archive (a docker-archive tar, the
// one `qualify run --image-archive` loads) for arch (a GOARCH: amd64 or
// arm64) at dst from the static busybox and probe files, and returns its
// image ID ("sha256:" and 64 hex digits). The archive is complete under
// dst or absent: it is written beside dst and renamed into place. Errors
// name the file or the architecture that failed.
func WriteImage(dst, busybox, probe, arch string) (string, error) {
	bb, err := os.ReadFile(busybox)
	if err != nil {
		return "", fmt.Errorf("release: busybox for %s: %w", arch, err)
	}
	pb, err := os.ReadFile(probe)
	if err != nil {
		return "", fmt.Errorf("release: probe for %s: %w", arch, err)
	}
	var buf bytes.Buffer
	id, err := guest.WriteArchive(&buf, guest.ArchiveOptions{Busybox: bb, Probe: pb, Architecture: arch})
	if err != nil {
		return "", fmt.Errorf("release: guest image for %s (busybox %s): %w", arch, busybox, err)
	}
	// Written beside dst and renamed into place, so that a failed or
	// interrupted write never leaves a partial archive under dst's name.
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".guest-image-*")
	if err != nil {
		return "", fmt.Errorf("release: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		tmp.Close()
		return "", fmt.Errorf("release: %w", err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return "", fmt.Errorf("release: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("release: %w", err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return "", fmt.Errorf("release: %w", err)
	}
	return id, nil
}

// copyOut replaces dst with a copy of src, mode 0755.
func copyOut(src, dst string) error {
	if err := os.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("release: %w", err)
	}
	if err := copyFile(src, dst, 0o755); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	return nil
}

// WriteSums writes dir/SumsFile: the SHA-256 of each of names (files in
// dir), one "<64 hex>  <name>" line each, in the order given.
func WriteSums(dir string, names []string) error {
	var b strings.Builder
	for _, n := range names {
		f, err := os.Open(filepath.Join(dir, n))
		if err != nil {
			return fmt.Errorf("release: %s: %w", SumsFile, err)
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return fmt.Errorf("release: %s: %s: %w", SumsFile, n, err)
		}
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(h.Sum(nil)), n)
	}
	if err := os.WriteFile(filepath.Join(dir, SumsFile), []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	return nil
}
