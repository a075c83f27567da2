package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/moby/moby/client"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/skip"

	"github.com/qualbox/qualbox/internal/enginepin"
	"github.com/qualbox/qualbox/internal/exitcode"
	"github.com/qualbox/qualbox/internal/testengine"
	"github.com/qualbox/qualbox/qualify"
)

// A bad --endpoint is a usage error naming the flag and the value, found
// before the manifest's Engine is contacted and before any output exists.
func TestRunEndpointFlagIsChecked(t *testing.T) {
	path := writeManifest(t, func(s string) string { return s })
	for _, bad := range []string{"tcp://127.0.0.1:2375", "unix://relative.sock", "unix:///run/../docker.sock", "/var/run/docker.sock", "npipe:////./pipe/docker_engine"} {
		out := filepath.Join(t.TempDir(), "out")
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"run", "--manifest", path, "--endpoint", bad, "--output", out}, &stdout, &stderr)
		assert.Check(t, is.Equal(code, exitcode.Usage), bad)
		assert.Check(t, is.Contains(stderr.String(), `qualify run: --endpoint "`+bad+`": want unix:///<absolute socket path>`), bad)
		assert.Check(t, !strings.Contains(stderr.String(), "Engine"), "no Engine was contacted: %s", stderr.String())
		_, err := os.Stat(out)
		assert.Check(t, os.IsNotExist(err), "no output directory for a usage error")
	}
}

// --endpoint replaces the manifest's endpoint for the run: here the
// manifest names lane A's socket and the flag a socket nothing serves, so
// the run must fail to connect to the flag's socket and never reach the
// manifest's. The manifest file is not rewritten.
func TestRunEndpointOverridesManifest(t *testing.T) {
	path := writeManifest(t, func(s string) string { return s })
	before, err := os.ReadFile(path)
	assert.NilError(t, err)
	sock := "unix://" + filepath.Join(t.TempDir(), "nothing.sock")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"run", "--manifest", path, "--endpoint", sock, "--output", filepath.Join(t.TempDir(), "out")}, &stdout, &stderr)
	assert.Equal(t, code, exitcode.Unavailable, stderr.String())
	assert.Check(t, is.Contains(stderr.String(), "engine: "+sock+" (--endpoint, instead of the manifest's unix:///var/run/docker.sock)\n"))
	assert.Check(t, is.Contains(stderr.String(), "no Docker Engine answers at "+sock+" "))
	assert.Check(t, !strings.Contains(stderr.String(), "answers at unix:///var/run/docker.sock"))
	after, err := os.ReadFile(path)
	assert.NilError(t, err)
	assert.Check(t, bytes.Equal(before, after))
}

// version --json is one strict JSON object with the harness identity a
// run records, plus the Go version.
func TestVersionJSON(t *testing.T) {
	var stdout, stderr bytes.Buffer
	assert.Equal(t, run(context.Background(), []string{"version", "--json"}, &stdout, &stderr), exitcode.OK)
	assert.Check(t, is.Equal(stderr.String(), ""))
	assert.Check(t, strings.HasSuffix(stdout.String(), "}\n") && strings.Count(stdout.String(), "\n") == 1, stdout.String())
	var raw map[string]any
	assert.NilError(t, json.Unmarshal(stdout.Bytes(), &raw))
	keys := []string{"module", "version", "vcsRevision", "vcsTime", "vcsModified", "goVersion", "catalogueVersion", "catalogueSha256"}
	assert.Check(t, is.Len(raw, len(keys)), "%v", raw)
	for _, k := range keys {
		_, ok := raw[k]
		assert.Check(t, ok, "key %s missing in %s", k, stdout.String())
	}
	var v versionInfo
	dec := json.NewDecoder(&stdout)
	dec.DisallowUnknownFields()
	assert.NilError(t, dec.Decode(&v))
	h := qualify.HarnessIdentity()
	assert.Check(t, is.Equal(v.GoVersion, runtime.Version()))
	assert.Check(t, is.Equal(v.Module, h.Module))
	assert.Check(t, is.Equal(v.CatalogueVersion, h.CatalogueVersion))
	assert.Check(t, is.Equal(v.CatalogueSHA256, h.CatalogueSHA256))
	assert.Check(t, is.Len(v.CatalogueSHA256, 64))

	stdout.Reset()
	assert.Equal(t, run(context.Background(), []string{"version"}, &stdout, &stderr), exitcode.OK)
	assert.Check(t, is.Contains(stdout.String(), "\ncatalogue: v"))
	stdout.Reset()
	assert.Equal(t, run(context.Background(), []string{"version", "--json", "x"}, &stdout, &stderr), exitcode.Usage)
}

// The harness's client pins the API version it is given and never
// negotiates: on lane A (Debian's Engine 20.10, API 1.41) the 1.41 pin of
// its profile is what every request speaks, and a pin the Engine does
// not serve is refused at connect, naming the version and what the Engine
// reports, instead of failing some later request.
func TestConnectPinsTheAPIVersion(t *testing.T) {
	socket := testengine.Require(t)
	skip.If(t, "unix://"+socket != defaultEndpoint, "a lane A test; the test Engine is at unix://%s", socket)
	eng, err := connect(context.Background(), defaultEndpoint, "1.41")
	assert.NilError(t, err)
	ver, err := eng.ServerVersion(context.Background(), client.ServerVersionOptions{})
	assert.NilError(t, err)
	eng.Close()
	skip.If(t, ver.APIVersion != "1.41", "lane A serves API %s, not Debian's 20.10 1.41", ver.APIVersion)
	assert.Equal(t, eng.ClientVersion(), "1.41")

	// Without a profile the pin is the newest profile pin the Engine
	// serves: 1.41 here, never whatever the Engine offers (API 1.41 too,
	// but a profile-less client on an API 1.56 Engine gets 1.52).
	eng, err = connect(context.Background(), defaultEndpoint, "")
	assert.NilError(t, err)
	assert.Equal(t, eng.ClientVersion(), "1.41")
	eng.Close()

	_, err = connect(context.Background(), defaultEndpoint, "1.52")
	assert.ErrorContains(t, err, "qualify: the Engine at "+defaultEndpoint+" does not serve Engine API 1.52 (it reports API 1.41): ")
}

// Where nothing answers, connect's error keeps enginepin's typed error
// and advises starting an Engine; a caller that gave up first gets no
// such advice (the Engine may well be there).
func TestConnectWithoutAnEngineKeepsTheTypedError(t *testing.T) {
	endpoint := "unix://" + filepath.Join(t.TempDir(), "no-engine.sock")
	_, err := connect(context.Background(), endpoint, "1.41")
	var noEngine *enginepin.NoEngineError
	assert.Assert(t, errors.As(err, &noEngine), "connect: %v", err)
	assert.Check(t, is.Contains(err.Error(), "start one with `make engine`"))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = connect(ctx, endpoint, "1.41")
	assert.Assert(t, err != nil)
	assert.Check(t, !strings.Contains(err.Error(), "make engine"), "connect under an ended context: %v", err)
}
