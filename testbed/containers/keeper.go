package containers

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/moby/moby/api/types/container"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
)

// KeeperCommand is what a keeper container runs: a shell that sleeps until
// the container is removed.
var KeeperCommand = []string{"/bin/sh", "-c", "while :; do sleep 3600; done"}

var (
	envMu     sync.Mutex
	envSocket string
)

// pinEnvironment points testcontainers-go at socket and disables its
// reaper. testcontainers-go caches the Docker host on first use, so a
// process can use one socket only; asking for another is an error.
func pinEnvironment(socket string) error {
	envMu.Lock()
	defer envMu.Unlock()
	if envSocket != "" {
		if envSocket != socket {
			return fmt.Errorf("containers: testcontainers-go is already bound to %s, cannot use %s in the same process", envSocket, socket)
		}
		return nil
	}
	if err := os.Setenv("DOCKER_HOST", "unix://"+socket); err != nil {
		return err
	}
	if err := os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true"); err != nil {
		return err
	}
	envSocket = socket
	// The provider's connection banner would go to the test's stdout.
	tclog.SetDefault(tclog.NewNoopLogger())
	return nil
}

// Keeper is a started container of a local image running KeeperCommand
// with no network, created through testcontainers-go.
type Keeper struct {
	c *testcontainers.DockerContainer
}

// ID returns the container's Engine ID.
func (k *Keeper) ID() string { return k.c.GetContainerID() }

// Remove force-removes exactly this container and its anonymous volumes.
func (k *Keeper) Remove(ctx context.Context) error {
	return k.c.Terminate(ctx)
}

// StartKeeper creates and starts a keeper container of imageID (an exact
// local "sha256:" image ID) on the Engine at socket (an absolute Unix socket
// path). It never pulls: an absent image is an error from the Engine. On
// error nothing is left behind.
func StartKeeper(ctx context.Context, socket, imageID string) (*Keeper, error) {
	if err := pinEnvironment(socket); err != nil {
		return nil, err
	}
	c, err := testcontainers.Run(ctx, imageID,
		testcontainers.WithEntrypoint(KeeperCommand[0]),
		testcontainers.WithCmd(KeeperCommand[1:]...),
		testcontainers.WithHostConfigModifier(func(h *container.HostConfig) { h.NetworkMode = "none" }),
		testcontainers.WithLogger(tclog.NewNoopLogger()),
	)
	if err != nil {
		if c != nil {
			_ = c.Terminate(context.WithoutCancel(ctx))
		}
		return nil, fmt.Errorf("containers: start keeper of %s: %w", imageID, err)
	}
	return &Keeper{c: c}, nil
}
