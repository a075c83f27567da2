package driver_test

import (
	"context"
	"strings"
	"testing"

	"github.com/moby/moby/client"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/driver/internal/enginetest"
	"github.com/qualbox/qualbox/sandboxapi"
)

func TestIsolatedNetworkHasOnlyLoopback(t *testing.T) {
	b := newBackend(t)
	r := run(t, started(t, b, enginetest.Policy()), nil, "/bin/sh", "-c", "ls /sys/class/net")
	assert.Check(t, is.Equal(strings.Fields(string(r.stdout))[0], "lo"))
	assert.Check(t, is.Len(strings.Fields(string(r.stdout)), 1))
}

func TestOutboundGetsAPrivateBridge(t *testing.T) {
	b := newBackend(t)
	policy := enginetest.Policy()
	policy.Network = sandboxapi.Network{Kind: sandboxapi.NetworkOutbound}
	sb := started(t, b, policy)
	rec := sb.RecoveryRecord()
	var networkID, computeID string
	for _, r := range rec.Resources {
		switch r.Role {
		case sandboxapi.RoleNetwork:
			networkID = r.Identity.ID
		case sandboxapi.RoleCompute:
			computeID = r.Identity.ID
		}
	}
	assert.Assert(t, networkID != "", "outbound records a network resource")
	cli := enginetest.Client(t)
	n, err := cli.NetworkInspect(context.Background(), networkID, client.NetworkInspectOptions{})
	assert.NilError(t, err)
	assert.Check(t, is.Equal(n.Network.Driver, "bridge"))
	assert.Check(t, !n.Network.Internal)
	c, err := cli.ContainerInspect(context.Background(), computeID, client.ContainerInspectOptions{})
	assert.NilError(t, err)
	assert.Check(t, is.Equal(string(c.Container.HostConfig.NetworkMode), networkID))
	r := run(t, sb, nil, "/bin/sh", "-c", "ls /sys/class/net")
	assert.Check(t, is.Contains(string(r.stdout), "eth0"))
	assert.Check(t, is.Equal(sb.Effective().Network.Kind, sandboxapi.NetworkOutbound))
}
