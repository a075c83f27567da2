package testengine

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// The switches, read from the process environment on each call.
const (
	// RequireEnv set to "1" makes an absent Engine a test failure.
	RequireEnv = "QUALBOX_REQUIRE_ENGINE"
	// NoEngineEnv set to "1" skips every Engine test without dialing.
	NoEngineEnv = "QUALBOX_NO_ENGINE"
	// SocketEnv names the Engine socket (an absolute Unix socket path).
	SocketEnv = "QUALBOX_ENGINE_SOCKET"
)

// DefaultSocket is lane A's socket (docs/lanes.md).
const DefaultSocket = "/var/run/docker.sock"

// PingTimeout bounds the one ping per socket and test binary.
const PingTimeout = 5 * time.Second

// Socket returns the absolute path of the Engine socket tests use:
// $QUALBOX_ENGINE_SOCKET; else the path of a unix:// DOCKER_HOST, so that a
// DOCKER_HOST naming another Engine never silently becomes lane A; else
// DefaultSocket. A DOCKER_HOST of another scheme (tcp://, ssh://) names an
// Engine these tests cannot use: the error says so and Require fails.
func Socket() (string, error) {
	if s := os.Getenv(SocketEnv); s != "" {
		return s, nil
	}
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		u, err := url.Parse(h)
		if err != nil || u.Scheme != "unix" || u.Path == "" {
			return "", fmt.Errorf("testengine: DOCKER_HOST=%q is not a unix:// socket; set %s to the Engine's socket path", h, SocketEnv)
		}
		return u.Path, nil
	}
	return DefaultSocket, nil
}

var pings sync.Map // socket path -> *ping

type ping struct {
	once sync.Once
	err  error
}

// answers pings the Engine at socket once per test binary.
func answers(socket string) error {
	v, _ := pings.LoadOrStore(socket, &ping{})
	p := v.(*ping)
	p.once.Do(func() {
		cli, err := client.New(client.WithHost("unix://" + socket))
		if err != nil {
			p.err = err
			return
		}
		defer cli.Close()
		ctx, cancel := context.WithTimeout(context.Background(), PingTimeout)
		defer cancel()
		_, p.err = cli.Ping(ctx, client.PingOptions{})
	})
	return p.err
}

// Require returns the socket path of the Engine the calling test runs
// against. When no Engine answers there it skips the test, or fails it
// under QUALBOX_REQUIRE_ENGINE=1; under QUALBOX_NO_ENGINE=1 it skips
// without dialing. Call it first in every test that needs an Engine.
func Require(t testing.TB) string {
	t.Helper()
	require, none := os.Getenv(RequireEnv) == "1", os.Getenv(NoEngineEnv) == "1"
	if require && none {
		t.Fatalf("%s=1 and %s=1 contradict each other: set one", RequireEnv, NoEngineEnv)
	}
	if none {
		t.Skipf("needs a Docker Engine; %s=1 (make test-hermetic) skips every Engine test", NoEngineEnv)
	}
	socket, err := Socket()
	if err != nil {
		t.Fatal(err)
	}
	if err := answers(socket); err != nil {
		msg := fmt.Sprintf("needs a Docker Engine; none answers at %s (%v): run `make engine` (lane A) or set %s", socket, err, SocketEnv)
		if require {
			t.Fatalf("%s (%s=1: an absent Engine is a failure)", msg, RequireEnv)
		}
		t.Skip(msg)
	}
	return socket
}
