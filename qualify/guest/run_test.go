package guest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/internal/testengine"
	"github.com/qualbox/qualbox/qualify/guest/facts"
)

// Run checks of the built guest image. The containers here are fixtures,
// not the thing under test (the image is), so they are started with
// testcontainers-go: its labels and its lifecycle handling do not weaken
// anything checked. The hardened workload shape itself is exercised with
// the raw Engine API in image_test.go and by the driver.

// useTestcontainers points testcontainers-go at the test Engine and turns
// its reaper off. It discovers its Engine through DOCKER_HOST, so the test
// sets that from the socket explicitly (docker contexts are never
// consulted once DOCKER_HOST is set). The reaper (Ryuk) would need an
// image from a registry, and removal by label scan is not how this
// project cleans up: every container here is terminated by its own ID.
func useTestcontainers(t *testing.T, socket string) {
	t.Setenv("DOCKER_HOST", "unix://"+socket)
	t.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
}

// builtImage builds the guest image on the Engine at socket and registers
// its removal by exact ID.
func builtImage(t *testing.T, socket string) string {
	t.Helper()
	cli, err := client.New(client.WithHost("unix://" + socket))
	assert.NilError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	img, err := Build(ctx, cli, BuildOptions{})
	t.Cleanup(func() {
		if img.ID == "" {
			return
		}
		if err := Remove(context.Background(), cli, img.ID); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	assert.NilError(t, err)
	return img.ID
}

// runToExit runs the image by its exact ID as a plain container (network
// none, as the given user) until it exits, and returns its exit code and
// combined output. The container is removed by ID at cleanup.
//
// testcontainers-go attaches containers to a default network and, when
// the Engine has no "bridge" network (lane B runs with --bridge none,
// docs/lanes.md#lane-b), creates one and never removes it without its
// reaper. Naming "none" as the default bridge network keeps it from
// creating anything but the container.
func runToExit(t *testing.T, image, user string, entrypoint []string, cmd ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	provider, err := testcontainers.NewDockerProvider(testcontainers.WithDefaultBridgeNetwork("none"))
	assert.NilError(t, err)
	defer provider.Close()
	ctr, err := provider.RunContainer(ctx, testcontainers.ContainerRequest{
		Image:              image,
		Entrypoint:         entrypoint,
		Cmd:                cmd,
		ConfigModifier:     func(c *container.Config) { c.User = user },
		HostConfigModifier: func(hc *container.HostConfig) { hc.NetworkMode = "none" },
		WaitingFor:         wait.ForExit().WithExitTimeout(time.Minute),
	})
	testcontainers.CleanupContainer(t, ctr)
	assert.NilError(t, err)
	state, err := ctr.State(ctx)
	assert.NilError(t, err)
	logs, err := ctr.Logs(ctx)
	assert.NilError(t, err)
	defer logs.Close()
	out, err := io.ReadAll(logs)
	assert.NilError(t, err)
	return state.ExitCode, string(out)
}

// The image runs from its exact local ID without any registry: the probe
// as PID 1 under the image's own configuration reports the sandbox user,
// the image's fixed PATH and loopback only; every busybox applet the
// scenarios rely on resolves; and the applet check fails for a command
// the image lacks.
func TestGuestImageRuns(t *testing.T) {
	// The Engine under test: $QUALBOX_ENGINE_SOCKET or lane A
	// (docs/lanes.md); no Engine skips, or fails where one is required.
	socket := testengine.Require(t)
	useTestcontainers(t, socket)
	image := builtImage(t, socket)
	user := fmt.Sprintf("%d:%d", SandboxUID, SandboxGID)

	t.Run("probe facts as PID 1", func(t *testing.T) {
		code, out := runToExit(t, image, user, []string{ProbePath}, "facts")
		assert.Equal(t, code, 0, out)
		var f facts.Facts
		assert.NilError(t, json.Unmarshal([]byte(out), &f), out)
		assert.Check(t, is.Len(f.Errors, 0))
		assert.Check(t, is.DeepEqual(f.Identity, facts.Identity{UID: SandboxUID, GID: SandboxGID, EUID: SandboxUID, EGID: SandboxGID, Groups: []int{SandboxGID}}))
		assert.Check(t, is.DeepEqual(f.PID1Cmdline, []string{ProbePath, "facts"}))
		assert.Assert(t, is.Len(f.Interfaces, 1))
		assert.Check(t, is.Equal(f.Interfaces[0].Name, "lo"))
		// Under the Engine's default seccomp profile the clone with
		// CLONE_NEWUSER is refused, and the control child without it
		// starts: a refusal of the clone itself, not of the child.
		got, refused := facts.ReadUserns(f.UserNamespace, f.UserNamespaceControl)
		assert.Check(t, refused, "user namespace attempt %s", got)
		assert.Check(t, is.DeepEqual(f.UserNamespaceControl, &facts.Outcome{OK: true}))
	})

	applets := `for a in "$@"; do p=$(command -v "$a") || { echo "missing $a"; exit 1; }; echo "$a=$p"; done; echo "PATH=$PATH"`
	t.Run("applets", func(t *testing.T) {
		code, out := runToExit(t, image, user, []string{"/bin/sh", "-c", applets, "sh"}, Applets...)
		assert.Equal(t, code, 0, out)
		for _, a := range Applets {
			// Shell builtins resolve to their name, the rest to /bin links.
			assert.Check(t, strings.Contains(out, a+"=/bin/"+a+"\n") || strings.Contains(out, a+"="+a+"\n"), "applet %s: %s", a, out)
		}
		assert.Check(t, is.Contains(out, "PATH="+Path+"\n"))
	})

	// The same check fails for a command the image does not carry.
	t.Run("missing applet fails", func(t *testing.T) {
		code, out := runToExit(t, image, user, []string{"/bin/sh", "-c", applets, "sh"}, "cat", "apt-get")
		assert.Equal(t, code, 1, out)
		assert.Check(t, is.Contains(out, "missing apt-get"))
	})
}
