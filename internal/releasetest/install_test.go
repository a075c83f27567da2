package releasetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

const (
	// modulePath is the one module of the repository.
	modulePath = "github.com/qualbox/qualbox"
	// testVersion is the tag the work tree is published under; a
	// pre-release of v0.0.0 sorts below any real tag.
	testVersion = "v0.0.0-test"
)

// A consumer's go install of cmd/qualify at a tag works from the packed
// work tree and the module cache alone, and the installed binary names the
// tag as its version.
func TestGoInstallAtTag(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: go install builds cmd/qualify and its dependencies from a module proxy (about a minute)")
	}
	goTool, modcache := goEnv(t)
	proxy := buildProxy(t, repoFiles(t, repoRoot(t)), testVersion, nil)
	gobin := t.TempDir()
	out, err := goInstall(t, goTool, proxy, modcache, gobin, modulePath+"/cmd/qualify@"+testVersion)
	assert.NilError(t, err, "go install:\n%s", out)

	bin := filepath.Join(gobin, "qualify")
	version, err := exec.Command(bin, "version").CombinedOutput()
	assert.NilError(t, err, "%s version:\n%s", bin, version)
	assert.Check(t, is.Contains(string(version), "qualify version "+testVersion+"\n"))
}

// A replace directive that comes back into go.mod breaks a consumer's
// install: the same proxy, built from the work tree with one replace line
// added, is refused by go install, naming the directive.
func TestGoInstallRefusesReplace(t *testing.T) {
	goTool, modcache := goEnv(t)
	proxy := buildProxy(t, repoFiles(t, repoRoot(t)), testVersion, func(dir string) {
		f, err := os.OpenFile(filepath.Join(dir, "go.mod"), os.O_APPEND|os.O_WRONLY, 0)
		assert.NilError(t, err)
		_, err = f.WriteString("\nreplace gotest.tools/v3 => ./internal/releasetest\n")
		assert.NilError(t, err)
		assert.NilError(t, f.Close())
	})
	out, err := goInstall(t, goTool, proxy, modcache, t.TempDir(), modulePath+"/cmd/qualify@"+testVersion)
	assert.Check(t, err != nil, "go install of a module with a replace directive succeeded:\n%s", out)
	assert.Check(t, is.Contains(out, "replace directives"))
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	assert.NilError(t, err)
	return root
}

// goEnv returns the go command and the module cache directory, skipping
// the test when that cache lacks a .mod file of the module graph or a
// .zip of a module cmd/qualify builds from: go install cannot fetch them
// without the network.
func goEnv(t *testing.T) (goTool, modcache string) {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command on PATH: %v", err)
	}
	root := repoRoot(t)
	goCmd := func(args ...string) string {
		cmd := exec.Command(goTool, args...)
		cmd.Dir = root
		// GOPROXY=off: the listing must come from the cache, as the
		// install will.
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly", "GOPROXY=off")
		out, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Skipf("go %s with GOPROXY=off failed, so the module cache lacks a dependency (run `go mod download` in %s): %v: %s",
				strings.Join(args, " "), root, err, bytes.TrimSpace(stderr))
		}
		return strings.TrimSpace(string(out))
	}
	modcache = goCmd("env", "GOMODCACHE")
	download := filepath.Join(modcache, "cache", "download")
	need := func(path, version, ext string) {
		ep, err := module.EscapePath(path)
		assert.NilError(t, err)
		ev, err := module.EscapeVersion(version)
		assert.NilError(t, err)
		f := filepath.Join(download, filepath.FromSlash(ep), "@v", ev+ext)
		if _, err := os.Stat(f); err != nil {
			t.Skipf("the module cache lacks %s@%s%s (%v): run `go mod download` in %s", path, version, ext, err, root)
		}
	}
	for _, line := range strings.Split(goCmd("list", "-m", "-e", "-f", "{{if not .Main}}{{.Path}} {{.Version}}{{end}}", "all"), "\n") {
		if path, version, ok := strings.Cut(line, " "); ok {
			need(path, version, ".mod")
		}
	}
	for _, line := range strings.Split(goCmd("list", "-deps", "-f", "{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}}{{end}}{{end}}", "./cmd/qualify"), "\n") {
		if path, version, ok := strings.Cut(line, " "); ok {
			need(path, version, ".zip")
		}
	}
	return goTool, modcache
}

// repoFiles copies the work tree's files, as git sees them (tracked and
// untracked, not ignored: no dist/, no reports/runs/), into a temporary
// directory and returns it, so the module zip holds what a tag of this
// tree would hold plus its uncommitted edits. Outside a git checkout (a
// module zip's own tree) it returns root itself.
func repoFiles(t *testing.T, root string) string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	list, err := cmd.Output()
	if err != nil {
		t.Logf("not a git work tree (%v): packing %s as it is", err, root)
		return root
	}
	dst := t.TempDir()
	for _, name := range strings.Split(strings.TrimRight(string(list), "\x00"), "\x00") {
		src := filepath.Join(root, filepath.FromSlash(name))
		info, err := os.Lstat(src)
		if errors.Is(err, fs.ErrNotExist) || err == nil && !info.Mode().IsRegular() {
			continue // deleted in the work tree, or not a regular file
		}
		assert.NilError(t, err)
		to := filepath.Join(dst, filepath.FromSlash(name))
		assert.NilError(t, os.MkdirAll(filepath.Dir(to), 0o755))
		copyFile(t, src, to, info.Mode().Perm())
	}
	return dst
}

func copyFile(t *testing.T, src, dst string, perm fs.FileMode) {
	t.Helper()
	in, err := os.Open(src)
	assert.NilError(t, err)
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	assert.NilError(t, err)
	_, err = io.Copy(out, in)
	assert.NilError(t, err)
	assert.NilError(t, out.Close())
}

// buildProxy writes a file-based module proxy holding module modulePath at
// version, packed from dir (after edit, when set, changes a copy of it),
// and returns the proxy's directory.
func buildProxy(t *testing.T, dir, version string, edit func(dir string)) string {
	t.Helper()
	if edit != nil {
		src := dir
		dir = t.TempDir()
		assert.NilError(t, os.CopyFS(dir, os.DirFS(src)))
		edit(dir)
	}
	proxy := t.TempDir()
	ep, err := module.EscapePath(modulePath)
	assert.NilError(t, err)
	ev, err := module.EscapeVersion(version)
	assert.NilError(t, err)
	at := filepath.Join(proxy, filepath.FromSlash(ep), "@v")
	assert.NilError(t, os.MkdirAll(at, 0o755))

	zf, err := os.Create(filepath.Join(at, ev+".zip"))
	assert.NilError(t, err)
	err = modzip.CreateFromDir(zf, module.Version{Path: modulePath, Version: version}, dir)
	assert.NilError(t, err, "packing %s as %s@%s", dir, modulePath, version)
	assert.NilError(t, zf.Close())

	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	assert.NilError(t, err)
	assert.NilError(t, os.WriteFile(filepath.Join(at, ev+".mod"), gomod, 0o644))
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC().Truncate(time.Second)})
	assert.NilError(t, err)
	assert.NilError(t, os.WriteFile(filepath.Join(at, ev+".info"), info, 0o644))
	assert.NilError(t, os.WriteFile(filepath.Join(at, "list"), []byte(version+"\n"), 0o644))
	return proxy
}

// goInstall runs go install target in an empty directory with GOBIN=gobin,
// workspace mode off, this module from proxy and every dependency from the
// module cache under modcache (read-only: the install gets an empty cache
// of its own), and returns go's combined output. No setting of the
// machine's go env file or GO* variables reaches it: GOFLAGS is set
// explicitly, so the machine's -buildvcs=false does not matter either.
func goInstall(t *testing.T, goTool, proxy, modcache, gobin, target string) (string, error) {
	t.Helper()
	gocache := ""
	if out, err := exec.Command(goTool, "env", "GOCACHE").Output(); err == nil {
		gocache = strings.TrimSpace(string(out))
	}
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "GOFLAGS", "GOPROXY", "GONOPROXY", "GONOSUMDB", "GOPRIVATE", "GOSUMDB", "GOINSECURE", "GOVCS",
			"GOWORK", "GOMODCACHE", "GOBIN", "GOENV", "GOTOOLCHAIN", "GOOS", "GOARCH", "GOPATH", "GOCACHE":
			continue
		}
		env = append(env, kv)
	}
	env = append(env,
		"GOENV=off", // ignore `go env -w` settings of this machine
		"GOWORK=off",
		"GOFLAGS=-mod=mod -modcacherw", // -modcacherw: t.TempDir can remove the install's module cache
		"GOPROXY=file://"+filepath.ToSlash(proxy)+",file://"+filepath.ToSlash(filepath.Join(modcache, "cache", "download")),
		"GOSUMDB=off",
		"GONOSUMDB="+modulePath,
		"GOPRIVATE=",
		"GONOPROXY=",
		"GOTOOLCHAIN=local",
		"GOPATH="+t.TempDir(),
		"GOMODCACHE="+t.TempDir(),
		"GOBIN="+gobin,
	)
	if gocache != "" {
		env = append(env, "GOCACHE="+gocache)
	}
	cmd := exec.Command(goTool, "install", target)
	cmd.Dir = t.TempDir()
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}
