package releasetest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qualbox/qualbox/internal/release"
	"golang.org/x/mod/module"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

const (
	modulePath = release.Module
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
	proxy := buildProxy(t, testVersion, nil)
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
	proxy := buildProxy(t, testVersion, func(dir string) {
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

// buildProxy writes a file-based module proxy holding the work tree at
// version (after edit, when set, changes a copy of it) and returns the
// proxy's directory.
func buildProxy(t *testing.T, version string, edit func(dir string)) string {
	t.Helper()
	dir, cleanup, err := release.WorkTree(repoRoot(t))
	assert.NilError(t, err)
	t.Cleanup(func() { assert.Check(t, cleanup()) })
	if edit != nil {
		src := dir
		dir = t.TempDir()
		assert.NilError(t, os.CopyFS(dir, os.DirFS(src)))
		edit(dir)
	}
	proxy := t.TempDir()
	assert.NilError(t, release.WriteProxy(proxy, dir, version))
	return proxy
}

// goInstall runs go install target in an empty directory with GOBIN=gobin
// and release.InstallEnv: workspace mode off, GOFLAGS set explicitly (the
// machine's -buildvcs=false does not matter), this module from proxy and
// every dependency from the module cache under modcache, no network, an
// empty module cache of its own. It returns go's combined output.
func goInstall(t *testing.T, goTool, proxy, modcache, gobin, target string) (string, error) {
	t.Helper()
	gocache := ""
	if out, err := exec.Command(goTool, "env", "GOCACHE").Output(); err == nil {
		gocache = strings.TrimSpace(string(out))
	}
	cmd := exec.Command(goTool, "install", target)
	cmd.Dir = t.TempDir()
	cmd.Env = append(release.InstallEnv(os.Environ(), proxy, modcache, t.TempDir(), t.TempDir(), gocache), "GOBIN="+gobin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
