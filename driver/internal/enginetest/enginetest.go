package enginetest

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/qualbox/qualbox/internal/testengine"
	"github.com/qualbox/qualbox/profiles"
	"github.com/qualbox/qualbox/qualify/guest"
	"github.com/qualbox/qualbox/sandboxapi"
)

// Socket is the Engine socket tests use (testengine.Socket):
// $QUALBOX_ENGINE_SOCKET, a unix:// DOCKER_HOST, or the lane A default. A
// DOCKER_HOST this package cannot use yields the lane A default here and
// fails the test in Client, which every Engine test calls first.
func Socket() string {
	s, err := testengine.Socket()
	if err != nil {
		return testengine.DefaultSocket
	}
	return s
}

// Profile is the platform profile the driver tests admit the Engine under:
// $QUALBOX_TEST_PROFILE or "linux-x64-cgroupv1", the profile of lanes A and
// B. Lane C runs the suite with "linux-x64" (docs/lanes.md#lane-c).
func Profile() string {
	if p := os.Getenv("QUALBOX_TEST_PROFILE"); p != "" {
		return p
	}
	return "linux-x64-cgroupv1"
}

// Client returns a moby client for the test Engine, closed at cleanup. It
// skips or fails t when no Engine answers (testengine.Require).
func Client(t testing.TB) *client.Client {
	t.Helper()
	socket := testengine.Require(t)
	cli, err := client.New(client.WithHost("unix://" + socket))
	if err != nil {
		t.Fatalf("engine client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

var (
	imageOnce sync.Once
	imageID   string
	imageErr  error
	built     bool
)

// Image returns the guest image ID: $QUALBOX_TEST_IMAGE when set (an image
// the caller owns), else one built once per test binary with guest.Build,
// from the prebuilt static probe $QUALBOX_PROBE_BINARY when set (a host
// without a Go toolchain, such as the lane C guest) or else compiled here.
// The guest image is a qualification asset; driver tests borrow it through
// this test-only import, production driver code never imports qualify.
func Image(t testing.TB) string {
	t.Helper()
	// Outside the Once: a skip there would mark it done with no image.
	cli := Client(t)
	imageOnce.Do(func() {
		if id := os.Getenv("QUALBOX_TEST_IMAGE"); id != "" {
			imageID = id
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		// For the test profile's image architecture (linux-arm64 in lane
		// D's arm64 guest).
		prof, err := profiles.Load(Profile())
		if err != nil {
			imageErr = err
			return
		}
		img, err := guest.Build(ctx, cli, guest.BuildOptions{ProbeBinary: os.Getenv("QUALBOX_PROBE_BINARY"), Architecture: prof.Image.Architecture})
		imageID, imageErr, built = img.ID, err, err == nil
	})
	if imageErr != nil {
		t.Fatalf("build guest image: %v", imageErr)
	}
	return imageID
}

// RemoveImage removes the image Image built, if it built one; call it from
// TestMain after m.Run.
func RemoveImage() error {
	if !built {
		return nil
	}
	cli, err := client.New(client.WithHost("unix://" + Socket()))
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return guest.Remove(ctx, cli, imageID)
}

// Policy returns a small valid policy: 1 CPU, 64 MiB, 64 PIDs, 8 MiB tmpfs
// each, isolated network, 60 s startup and cleanup deadlines.
func Policy() sandboxapi.Policy {
	return sandboxapi.Policy{
		Resources:        sandboxapi.Resources{CPUs: 1, MemoryBytes: 64 << 20, PIDs: 64},
		TemporaryStorage: sandboxapi.TemporaryStorage{HomeBytes: 8 << 20, TempBytes: 8 << 20},
		Network:          sandboxapi.Network{Kind: sandboxapi.NetworkIsolated},
		Deadlines:        sandboxapi.Deadlines{StartupMs: 60000, CleanupMs: 60000},
		Transfers:        sandboxapi.TransferBuffers{ChunkBytes: 64 << 10, MetadataBatchBytes: 1 << 20, MetadataMergeFanIn: 16},
		Streams: sandboxapi.StreamLimits{
			MaxBufferedInputBytes: 1 << 20, MaxBufferedOutputBytes: 1 << 20, HighWaterMarkBytes: 64 << 10,
		},
	}
}
