package driver

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/moby/moby/client"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/profiles"
)

// fakeEngine serves handler on a Unix socket. It is a fake Engine: it shows
// malformed and oversize replies that no real Engine here produces.
func fakeEngine(t *testing.T, handler http.HandlerFunc) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "fake-engine.sock")
	l, err := net.Listen("unix", sock)
	assert.NilError(t, err)
	srv := &http.Server{Handler: handler}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return sock
}

func TestControlRepliesAreBounded(t *testing.T) {
	sock := fakeEngine(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/_ping"):
			w.Header().Set("Api-Version", "1.41")
			w.Write([]byte("OK"))
		case strings.HasSuffix(r.URL.Path, "/info"):
			// Chunked, no Content-Length: the bound must hold while reading.
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"ID":"`))
			chunk := []byte(strings.Repeat("a", 64<<10))
			for i := 0; i < 32; i++ {
				w.Write(chunk)
			}
			w.Write([]byte(`"}`))
		case strings.HasSuffix(r.URL.Path, "/version"):
			w.Header().Set("Content-Length", "999999999")
			w.WriteHeader(200)
		default:
			http.NotFound(w, r)
		}
	})
	eng, err := newEngine(sock, "1.41")
	assert.NilError(t, err)
	defer eng.close()
	// The moby client flattens decode errors into text, so the bound shows
	// in the message rather than as a wrapped *ResponseLimitError.
	_, err = eng.cli.Info(context.Background(), client.InfoOptions{})
	assert.Check(t, err != nil && strings.Contains(err.Error(), "exceeds 1048576 bytes"), "chunked oversize /info: %v", err)
	var limit *ResponseLimitError
	_, err = eng.cli.ServerVersion(context.Background(), client.ServerVersionOptions{})
	assert.Check(t, errors.As(err, &limit), "declared oversize /version: %v", err)
}

func TestSocketPath(t *testing.T) {
	for in, want := range map[string]string{
		"unix:///var/run/docker.sock":   "/var/run/docker.sock",
		"/run/qualbox-moby/docker.sock": "/run/qualbox-moby/docker.sock",
	} {
		got, err := socketPath(in)
		assert.NilError(t, err)
		assert.Equal(t, got, want)
	}
	for _, bad := range []string{"", "docker.sock", "tcp://1.2.3.4:2375", "unix://", "//x", "/a/../b", "/a\nb", "npipe:////./pipe/docker_engine"} {
		_, err := socketPath(bad)
		assert.Check(t, err != nil, "%q", bad)
	}
}

// The client speaks the profile's qualified API version on every request
// and never negotiates up to what the daemon offers
// (docs/contract.md#profiles-and-admission). A fake Engine offering 1.56 shows
// it: a negotiating client would switch to /v1.56/.
func TestClientIsPinnedToTheProfileAPIVersion(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	sock := fakeEngine(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Api-Version", "1.56")
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/_ping"):
			w.Write([]byte("OK"))
		case strings.HasSuffix(r.URL.Path, "/version"):
			w.Write([]byte(`{"Version":"29.1.4","ApiVersion":"1.56","MinAPIVersion":"1.40","Os":"linux","Arch":"amd64"}`))
		case strings.HasSuffix(r.URL.Path, "/info"):
			w.Write([]byte(`{"ID":"fake","OSType":"linux","Architecture":"x86_64","CgroupVersion":"1","CgroupDriver":"cgroupfs"}`))
		default:
			http.NotFound(w, r)
		}
	})
	b, err := New(Config{Profile: "linux-x64-cgroupv1", Endpoint: "unix://" + sock, Namespace: "qualbox-test",
		SpillDirectory: t.TempDir(), ImageID: "sha256:" + strings.Repeat("a", 64), User: User{UID: 1, GID: 1}})
	assert.NilError(t, err)
	defer b.Close()
	adm, err := b.Admit(context.Background())
	var ae *AdmissionError
	assert.Assert(t, errors.As(err, &ae), "the fake Engine's /info lacks capabilities: %v", err)
	assert.Check(t, is.Equal(adm.Engine.ClientAPIVersion, "1.41"))
	mu.Lock()
	defer mu.Unlock()
	assert.Assert(t, len(paths) > 0)
	for _, p := range paths {
		assert.Check(t, strings.Contains(p, " /v1.41/"), "request %s is not pinned to API 1.41", p)
	}
}

// Datasets need `type: image` mounts, so a configuration with datasets is
// pinned to the higher of the profile's and the datasets' API version.
func TestPinnedAPIVersion(t *testing.T) {
	prof, err := profiles.Load("linux-x64-cgroupv1")
	assert.NilError(t, err)
	assert.Check(t, is.Equal(pinnedAPIVersion(prof, &Config{}), "1.41"))
	assert.Check(t, is.Equal(pinnedAPIVersion(prof, &Config{Datasets: []Dataset{{Name: "d"}}}), "1.48"))
	prof, err = profiles.Load("linux-x64")
	assert.NilError(t, err)
	assert.Check(t, is.Equal(pinnedAPIVersion(prof, &Config{}), "1.52"))
}

// A daemon whose /version range claims the pinned API version while it
// refuses that version is not admitted: with the image rows unread and
// every other row passing, the "pinned API version served" row fails.
func TestAdmissionNeedsThePinnedAPIVersionServed(t *testing.T) {
	sock := fakeEngine(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Api-Version", "1.56")
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasPrefix(r.URL.Path, "/v1."):
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"message":"client version 1.41 is too old"}`))
		case r.URL.Path == "/_ping":
			w.Write([]byte("OK"))
		case r.URL.Path == "/version":
			w.Write([]byte(`{"Version":"29.1.4","ApiVersion":"1.56","MinAPIVersion":"1.40","Os":"linux","Arch":"amd64"}`))
		case r.URL.Path == "/info":
			w.Write([]byte(`{"ID":"fake","OSType":"linux","Architecture":"x86_64","OperatingSystem":"Debian GNU/Linux 12 (bookworm)",
				"CgroupVersion":"1","CgroupDriver":"cgroupfs","MemoryLimit":true,"SwapLimit":true,"PidsLimit":true,
				"CpuCfsPeriod":true,"CpuCfsQuota":true,"SecurityOptions":["name=seccomp,profile=default"]}`))
		default:
			http.NotFound(w, r)
		}
	})
	b, err := New(Config{Profile: "linux-x64-cgroupv1", Endpoint: "unix://" + sock, Namespace: "qualbox-test",
		SpillDirectory: t.TempDir(), ImageID: "sha256:" + strings.Repeat("a", 64), User: User{UID: 1, GID: 1}})
	assert.NilError(t, err)
	defer b.Close()
	_, err = b.Admit(context.Background())
	var ae *AdmissionError
	assert.Assert(t, errors.As(err, &ae), "got %v", err)
	var names []string
	for _, c := range ae.Failed {
		names = append(names, c.Name)
	}
	assert.DeepEqual(t, names, []string{"pinned API version served"})
}
