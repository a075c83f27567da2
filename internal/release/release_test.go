package release

import (
	"archive/zip"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// What git describe prints becomes the module version a release is
// stamped with; what no module version can be is refused, naming it.
func TestVersion(t *testing.T) {
	for describe, want := range map[string]string{
		"v1.2.0":                "v1.2.0",
		"v1.2.0-rc.1":           "v1.2.0-rc.1",
		"v1.2.0-3-g93d924b":     "v1.2.0-3-g93d924b",
		"v1.2.0-dirty\n":        "v1.2.0-dirty",
		"93d924b":               "v0.0.0-g93d924b",
		"93d924b-dirty":         "v0.0.0-g93d924b-dirty",
		"0123456":               "v0.0.0-g0123456", // all digits with a leading zero: "g" keeps it a valid identifier
		"v2.0.0+incompatible":   "",
		"v1.2":                  "",
		"v1.2.0+build.5":        "",
		"release-candidate/one": "",
		"":                      "",
		"v2.0.0":                "", // a v2 needs the module path to end in /v2
	} {
		got, err := Version(describe)
		if want == "" {
			assert.Check(t, err != nil, "Version(%q) = %q, want an error", describe, got)
			if err != nil && describe != "" {
				assert.Check(t, is.Contains(err.Error(), describe), "error %q does not name %q", err, describe)
			}
			continue
		}
		assert.Check(t, err, "Version(%q)", describe)
		assert.Check(t, is.Equal(got, want), "Version(%q)", describe)
	}
}

// The proxy holds the GOPROXY file layout: list, .info, .mod and a zip
// whose files sit under module@version/.
func TestWriteProxy(t *testing.T) {
	src := t.TempDir()
	write(t, src, "go.mod", "module "+Module+"\n\ngo 1.26.0\n")
	write(t, src, "cmd/qualify/main.go", "package main\n\nfunc main() {}\n")
	write(t, src, "sub/go.mod", "module example.test/sub\n") // a sub-module is cut out of the zip
	write(t, src, "sub/x.go", "package sub\n")
	proxy := t.TempDir()
	assert.NilError(t, WriteProxy(proxy, src, "v0.1.0"))

	at := filepath.Join(proxy, "github.com", "qualbox", "qualbox", "@v")
	list, err := os.ReadFile(filepath.Join(at, "list"))
	assert.NilError(t, err)
	assert.Check(t, is.Equal(string(list), "v0.1.0\n"))
	mod, err := os.ReadFile(filepath.Join(at, "v0.1.0.mod"))
	assert.NilError(t, err)
	assert.Check(t, is.Equal(string(mod), "module "+Module+"\n\ngo 1.26.0\n"))
	info, err := os.ReadFile(filepath.Join(at, "v0.1.0.info"))
	assert.NilError(t, err)
	assert.Check(t, is.Regexp(`^\{"Version":"v0\.1\.0","Time":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"\}$`, string(info)))
	zr, err := zip.OpenReader(filepath.Join(at, "v0.1.0.zip"))
	assert.NilError(t, err)
	defer zr.Close()
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	sort.Strings(names)
	assert.DeepEqual(t, names, []string{Module + "@v0.1.0/cmd/qualify/main.go", Module + "@v0.1.0/go.mod"})
}

// A file no module zip may hold (a name reserved on Windows, which a
// proxy refuses to serve) fails packing, naming the file: such a tree
// cannot be released or go-installed at any tag.
func TestWriteProxyRefusesUnpublishableFile(t *testing.T) {
	src := t.TempDir()
	write(t, src, "go.mod", "module "+Module+"\n\ngo 1.26.0\n")
	write(t, src, "qualify/attest/testdata/fuzz/FuzzVerifyStatement/nul", "go test fuzz v1\n")
	err := WriteProxy(t.TempDir(), src, "v0.1.0")
	assert.ErrorContains(t, err, `qualify/attest/testdata/fuzz/FuzzVerifyStatement/nul": "nul" disallowed as path element component on Windows`)
}

// SHA256SUMS is what sha256sum -c reads: "<hex>  <name>" per file.
func TestWriteSums(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "qualify-linux-amd64", "abc")
	write(t, dir, "observe-linux-amd64", "")
	assert.NilError(t, WriteSums(dir, []string{"observe-linux-amd64", "qualify-linux-amd64"}))
	got, err := os.ReadFile(filepath.Join(dir, SumsFile))
	assert.NilError(t, err)
	assert.Check(t, is.Equal(string(got),
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  observe-linux-amd64\n"+
			"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad  qualify-linux-amd64\n"))
	assert.ErrorContains(t, WriteSums(dir, []string{"missing"}), "SHA256SUMS: open")
}

// The install's environment drops every go setting of the machine and
// sets its own, GOFLAGS included.
func TestInstallEnv(t *testing.T) {
	env := InstallEnv([]string{"PATH=/bin", "GOFLAGS=-buildvcs=false", "GOPROXY=https://proxy.example", "GOPRIVATE=github.com/qualbox", "CGO_ENABLED=1"},
		"/p", "/mc", "/gp", "/imc", "/gc")
	assert.DeepEqual(t, env, []string{
		"PATH=/bin",
		"GOENV=off", "GOWORK=off", "GOFLAGS=-mod=mod -modcacherw -trimpath",
		"GOPROXY=file:///p,file:///mc/cache/download", "GOSUMDB=off", "GONOSUMDB=" + Module,
		"GOPRIVATE=", "GONOPROXY=", "GOTOOLCHAIN=local", "CGO_ENABLED=0",
		"GOPATH=/gp", "GOMODCACHE=/imc", "GOCACHE=/gc",
	})
}

func write(t *testing.T, dir, name, body string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	assert.NilError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	assert.NilError(t, os.WriteFile(p, []byte(body), 0o644))
}

// A guest image that cannot be written leaves nothing under its name and
// no temporary file beside it; the error names what was wrong.
func TestWriteImageLeavesNothingOnFailure(t *testing.T) {
	dir := t.TempDir()
	bb, probe := filepath.Join(dir, "busybox"), filepath.Join(dir, "probe")
	assert.NilError(t, os.WriteFile(bb, []byte("#!/bin/sh\n"), 0o755))
	assert.NilError(t, os.WriteFile(probe, []byte("not an ELF"), 0o755))
	out := filepath.Join(dir, "out")
	assert.NilError(t, os.Mkdir(out, 0o755))
	dst := filepath.Join(out, "guest.tar")

	_, err := WriteImage(dst, bb, probe, "amd64")
	assert.ErrorContains(t, err, "busybox")
	_, err = WriteImage(dst, bb, filepath.Join(dir, "missing"), "amd64")
	assert.ErrorContains(t, err, "probe for amd64")
	entries, err := os.ReadDir(out)
	assert.NilError(t, err)
	assert.Check(t, is.Len(entries, 0), "left behind: %v", entries)
}
