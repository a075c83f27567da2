package scenario

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/internal/testengine"
	"github.com/qualbox/qualbox/sandboxapi"
)

type noop struct{}

func (noop) Name() string                  { return "noop" }
func (noop) Validate(map[string]any) error { return nil }
func (noop) Run(context.Context, *Env, map[string]any, *Record) error {
	return nil
}

// A volume labelled with the scenario's namespace that no record lists is
// reported by the check every Default scenario ends with, and left alone.
func TestNamespaceLeftovers(t *testing.T) {
	endpoint := "unix://" + testengine.Require(t)
	cli, err := client.New(client.WithHost(endpoint))
	assert.NilError(t, err)
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	assert.NilError(t, err)

	b := make([]byte, 4)
	_, _ = rand.Read(b)
	ns := "qualbox-leftover-test-" + hex.EncodeToString(b)
	env := &Env{Namespace: ns, Engine: cli, Policy: sandboxapi.Policy{Deadlines: sandboxapi.Deadlines{CleanupMs: 30000}}}

	rec := NewRecord()
	assert.NilError(t, leftoverChecked{noop{}}.Run(ctx, env, nil, rec))
	snap := rec.Snapshot()
	assert.Equal(t, len(snap.Checks), 1)
	assert.Assert(t, snap.Checks[0].OK, "%+v", snap.Checks[0])

	vol, err := cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: ns + "-stray", Labels: map[string]string{NamespaceLabel: ns}})
	assert.NilError(t, err)
	t.Cleanup(func() {
		_, err := cli.VolumeRemove(context.Background(), vol.Volume.Name, client.VolumeRemoveOptions{})
		assert.Check(t, err)
	})
	rec = NewRecord()
	assert.NilError(t, leftoverChecked{noop{}}.Run(ctx, env, nil, rec))
	snap = rec.Snapshot()
	assert.Equal(t, len(snap.Checks), 1)
	c := snap.Checks[0]
	assert.Assert(t, !c.OK && strings.Contains(c.Got, "volume "+ns+"-stray"), "%+v", c)
	// Read-only: the volume is still there.
	_, err = cli.VolumeInspect(ctx, vol.Volume.Name, client.VolumeInspectOptions{})
	assert.NilError(t, err)

	// Every Default scenario carries the check.
	for name, s := range Default() {
		_, ok := s.(leftoverChecked)
		assert.Check(t, ok, "%s is not wrapped", name)
	}
}
