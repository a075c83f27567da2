package driver

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/moby/client"
	"gotest.tools/v3/assert"
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
	eng, err := newEngine(sock)
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
