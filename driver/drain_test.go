package driver_test

import (
	"context"
	"io"
	"testing"
	"time"

	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/driver/internal/enginetest"
	"github.com/qualbox/qualbox/sandboxapi"
)

// A caller may wait for the exit receipt before it reads: the post-exit
// drain bound times the Engine's silence, not the time the decoder spends
// waiting for a reader that has not read yet
// (docs/contract.md#processes-and-streams).
func TestOutputReadAfterExitOutlivesTheDrainBound(t *testing.T) {
	b := newBackend(t)
	policy := enginetest.Policy()
	policy.Deadlines.CleanupMs = 1000
	sb := started(t, b, policy)
	pr, err := sb.ReserveProcess(sandboxapi.ProcessSpec{Executable: "/bin/sh", Args: []string{"-c", "head -c 409600 /dev/zero"}, Cwd: sb.Workspace()})
	assert.NilError(t, err)
	p, err := pr.Start(context.Background())
	assert.NilError(t, err)
	assert.NilError(t, p.Stdin().Close())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	exit, err := p.Wait(ctx)
	assert.NilError(t, err)
	assert.Equal(t, exit, sandboxapi.Exited(0))
	time.Sleep(2500 * time.Millisecond) // past the 1 s drain bound
	out, err := io.ReadAll(p.Stdout())
	assert.NilError(t, err)
	assert.Equal(t, len(out), 409600)
	_, err = io.ReadAll(p.Stderr())
	assert.NilError(t, err)
}
