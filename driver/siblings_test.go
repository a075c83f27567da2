package driver_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/driver/internal/enginetest"
	"github.com/qualbox/qualbox/qualify/faultproxy"
	"github.com/qualbox/qualbox/sandboxapi"
)

// sibling is a foreign resource made to look like one of a sandbox's.
type sibling struct {
	role   sandboxapi.Role
	id     string
	name   string
	labels map[string]string
}

// similarNames returns name + "-x" and name with its first hash digit
// changed ("qualbox-<32 hex>-<role>").
func similarNames(name string) []string {
	i := len("qualbox-")
	d := byte('0')
	if name[i] == '0' {
		d = '1'
	}
	return []string{name + "-x", name[:i] + string(d) + name[i+1:]}
}

// makeSiblings creates, by hand, foreign resources with names similar to
// each of rec's resources and the sandbox's binding labels copied from its
// storage volume (role label set per role). They are removed by ID at
// cleanup; the returned slice is safe to read once makeSiblings returns.
func makeSiblings(t *testing.T, rec sandboxapi.RecoveryRecord) []sibling {
	t.Helper()
	cli := enginetest.Client(t)
	ctx := context.Background()
	var storage string
	for _, r := range rec.Resources {
		if r.Role == sandboxapi.RoleStorage {
			storage = r.Name
		}
	}
	vol, err := cli.VolumeInspect(ctx, storage, client.VolumeInspectOptions{})
	assert.NilError(t, err)
	assert.Assert(t, len(vol.Volume.Labels) > 0, "the storage volume carries binding labels")
	var sibs []sibling
	for _, r := range rec.Resources {
		labels := maps.Clone(vol.Volume.Labels)
		labels["dev.qualbox.sandbox.role"] = string(r.Role)
		for _, name := range similarNames(r.Name) {
			s := sibling{role: r.Role, name: name, labels: labels}
			switch r.Role {
			case sandboxapi.RoleCompute, sandboxapi.RoleExport:
				out, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
					Name:       name,
					Config:     &container.Config{Image: rec.ImageDigest, Cmd: []string{"/bin/sh"}, Labels: labels},
					HostConfig: &container.HostConfig{NetworkMode: "none"},
				})
				assert.NilError(t, err)
				s.id = out.ID
			case sandboxapi.RoleStorage:
				out, err := cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: name, Driver: "local", Labels: labels})
				assert.NilError(t, err)
				s.id = out.Volume.Name
			case sandboxapi.RoleNetwork:
				out, err := cli.NetworkCreate(ctx, name, client.NetworkCreateOptions{Driver: "bridge", Labels: labels})
				assert.NilError(t, err)
				s.id = out.ID
			}
			sib := s
			t.Cleanup(func() { removeSibling(t, cli, sib) })
			sibs = append(sibs, s)
		}
	}
	return sibs
}

func removeSibling(t *testing.T, cli *client.Client, s sibling) {
	t.Helper()
	ctx := context.Background()
	var err error
	switch s.role {
	case sandboxapi.RoleCompute, sandboxapi.RoleExport:
		_, err = cli.ContainerRemove(ctx, s.id, client.ContainerRemoveOptions{Force: true})
	case sandboxapi.RoleStorage:
		_, err = cli.VolumeRemove(ctx, s.id, client.VolumeRemoveOptions{})
	case sandboxapi.RoleNetwork:
		_, err = cli.NetworkRemove(ctx, s.id, client.NetworkRemoveOptions{})
	}
	assert.Check(t, err, "remove sibling %s %s", s.role, s.id)
}

// survivors checks every sibling still exists by ID under its name with
// its labels, and returns how many did.
func survivors(t *testing.T, sibs []sibling) int {
	t.Helper()
	cli := enginetest.Client(t)
	ctx := context.Background()
	n := 0
	for _, s := range sibs {
		var name string
		var labels map[string]string
		var err error
		switch s.role {
		case sandboxapi.RoleCompute, sandboxapi.RoleExport:
			var in client.ContainerInspectResult
			in, err = cli.ContainerInspect(ctx, s.id, client.ContainerInspectOptions{})
			if err == nil {
				name, labels = strings.TrimPrefix(in.Container.Name, "/"), in.Container.Config.Labels
			}
		case sandboxapi.RoleStorage:
			var in client.VolumeInspectResult
			in, err = cli.VolumeInspect(ctx, s.id, client.VolumeInspectOptions{})
			name, labels = in.Volume.Name, in.Volume.Labels
		case sandboxapi.RoleNetwork:
			var in client.NetworkInspectResult
			in, err = cli.NetworkInspect(ctx, s.id, client.NetworkInspectOptions{})
			name, labels = in.Network.Name, in.Network.Labels
		}
		if !assert.Check(t, err, "sibling %s %s %s did not survive", s.role, s.name, s.id) {
			continue
		}
		assert.Check(t, name == s.name && maps.Equal(labels, s.labels), "sibling %s %s changed", s.role, s.id)
		n++
	}
	return n
}

// testSiblingSurvival runs each cleanup path with foreign look-alikes of
// the sandbox's resources present: normal destroy, fresh reconcile and
// destroy, and lost-reply recovery (create identified by exact name, and a
// lost delete reply).
func testSiblingSurvival(t *testing.T, table *faultTable) {
	outbound := bridgeUnavailable(t) == ""
	req := faultproxy.Request
	for _, tc := range []struct {
		path  string
		rules []faultproxy.Rule
		keep  bool
		// early makes the siblings at the compute "creating" checkpoint,
		// before the compute create, instead of after Start.
		early bool
	}{
		{path: "normal destroy"},
		{path: "fresh reconcile + destroy", keep: true},
		{path: "lost reply POST /containers/create (compute)", rules: []faultproxy.Rule{faultproxy.DropReply(req("POST", "/containers/create").Nth(1))}, early: true},
		{path: "lost reply DELETE /volumes/{name}", rules: []faultproxy.Rule{faultproxy.DropReply(req("DELETE", "/volumes/[^/]+"))}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			p := newProxy(t, tc.rules...)
			var (
				mu   sync.Mutex
				sibs []sibling
			)
			d := &durable{}
			opts := lifecycleOptions{keep: tc.keep}
			if tc.early {
				d.hook = func(_ int, r sandboxapi.RecoveryRecord) {
					mu.Lock()
					defer mu.Unlock()
					for _, res := range r.Resources {
						if res.Role == sandboxapi.RoleCompute && res.Identity.Kind == sandboxapi.IdentityCreating && sibs == nil {
							sibs = makeSiblings(t, r)
						}
					}
				}
			} else {
				opts.afterStart = func(sb sandboxapi.Sandbox) {
					mu.Lock()
					defer mu.Unlock()
					sibs = makeSiblings(t, sb.RecoveryRecord())
				}
			}
			lc := runLifecycle(t, newBackend(t, viaProxy(p)), faultPolicy(outbound), d, opts)
			if tc.rules != nil {
				assert.Check(t, len(p.Fired()) == 1)
			} else {
				assert.Check(t, lc.err)
			}
			r := recoverFresh(t, d)
			p.SetRules()
			lc.settle()
			mu.Lock()
			defer mu.Unlock()
			assert.Assert(t, len(sibs) > 0, "siblings were made")
			alive := survivors(t, sibs)
			left := leftovers(t, append(d.all(), lc.res.RecoveryRecord())...)
			row := faultRow{group: "sibling survival", point: fmt.Sprintf("%s, %d/%d siblings survive", tc.path, alive, len(sibs)),
				outcome: lc.outcome(), recovery: r.String(), found: len(left), detail: strings.Join(left, " ")}
			if alive != len(sibs) {
				row.found += len(sibs) - alive
				row.detail += fmt.Sprintf(" %d siblings removed", len(sibs)-alive)
			}
			table.add(row)
			if !assert.Check(t, len(left) == 0, "left behind: %v", left) {
				purge(t, left)
			}
		})
	}
}
