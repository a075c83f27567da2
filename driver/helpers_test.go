package driver_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/driver/internal/enginetest"
	"github.com/qualbox/qualbox/sandboxapi"
)

func newBackend(t *testing.T, mutate ...func(*driver.Config)) *driver.Backend {
	t.Helper()
	cfg := driver.Config{
		Profile:        enginetest.Profile(),
		Endpoint:       "unix://" + enginetest.Socket(),
		Namespace:      "qualbox-test",
		SpillDirectory: t.TempDir(),
		ImageID:        enginetest.Image(t),
		User:           driver.User{UID: 65534, GID: 65534},
	}
	for _, m := range mutate {
		m(&cfg)
	}
	b, err := driver.New(cfg)
	assert.NilError(t, err)
	t.Cleanup(func() { b.Close() })
	return b
}

// started reserves and starts a sandbox and registers its destruction and a
// leak check of its exact resources right away.
func started(t *testing.T, b *driver.Backend, policy sandboxapi.Policy) sandboxapi.Sandbox {
	t.Helper()
	return startedWith(t, b, policy, sandboxapi.InProcess())
}

// startedWith is started under an explicit recovery policy.
func startedWith(t *testing.T, b *driver.Backend, policy sandboxapi.Policy, recovery sandboxapi.RecoveryPolicy) sandboxapi.Sandbox {
	t.Helper()
	res, err := b.Reserve(sandboxapi.Request{Policy: policy}, recovery)
	assert.NilError(t, err)
	t.Cleanup(func() { destroyAndCheck(t, res) })
	sb, err := res.Start(context.Background())
	assert.NilError(t, err)
	return sb
}

// destroyAndCheck destroys owner and asserts that none of its recorded
// resources remains, looking each up by exact ID (or exact planned name
// while unidentified).
func destroyAndCheck(t *testing.T, owner sandboxapi.CleanupOwner) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	assert.Check(t, owner.Destroy(ctx))
	assertGone(t, owner.RecoveryRecord())
}

func assertGone(t testing.TB, record sandboxapi.RecoveryRecord) {
	t.Helper()
	cli := enginetest.Client(t)
	ctx := context.Background()
	for _, r := range record.Resources {
		ref := r.Name
		if r.Identity.Kind == sandboxapi.IdentityIdentified {
			ref = r.Identity.ID
		}
		var err error
		switch r.Role {
		case sandboxapi.RoleCompute, sandboxapi.RoleExport:
			_, err = cli.ContainerInspect(ctx, ref, client.ContainerInspectOptions{})
		case sandboxapi.RoleStorage:
			_, err = cli.VolumeInspect(ctx, ref, client.VolumeInspectOptions{})
		case sandboxapi.RoleNetwork:
			_, err = cli.NetworkInspect(ctx, ref, client.NetworkInspectOptions{})
		}
		assert.Check(t, err != nil, "%s resource %s still exists", r.Role, ref)
	}
}

type result struct {
	stdout, stderr []byte
	exit           sandboxapi.Exit
}

// run starts spec in sb, writes stdin (then half-closes), and collects both
// streams and the exit.
func run(t *testing.T, sb sandboxapi.Sandbox, stdin []byte, exe string, args ...string) result {
	t.Helper()
	pr, err := sb.ReserveProcess(sandboxapi.ProcessSpec{Executable: exe, Args: args, Cwd: sb.Workspace()})
	assert.NilError(t, err)
	p, err := pr.Start(context.Background())
	assert.NilError(t, err)
	return collect(t, p, stdin)
}

func collect(t *testing.T, p sandboxapi.Process, stdin []byte) result {
	t.Helper()
	var r result
	var wg sync.WaitGroup
	var outErr, errErr error
	wg.Add(2)
	go func() { defer wg.Done(); r.stdout, outErr = io.ReadAll(p.Stdout()) }()
	go func() { defer wg.Done(); r.stderr, errErr = io.ReadAll(p.Stderr()) }()
	if len(stdin) > 0 {
		_, err := io.Copy(p.Stdin(), bytes.NewReader(stdin))
		assert.NilError(t, err)
	}
	assert.NilError(t, p.Stdin().Close())
	wg.Wait()
	assert.NilError(t, outErr)
	assert.NilError(t, errErr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	exit, err := p.Wait(ctx)
	assert.NilError(t, err)
	r.exit = exit
	return r
}

func isOp(err error, code sandboxapi.Code) bool {
	var op *sandboxapi.OperationError
	return errors.As(err, &op) && op.Code == code
}
