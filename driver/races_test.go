package driver_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/driver/internal/enginetest"
	"github.com/qualbox/qualbox/qualify/faultproxy"
	"github.com/qualbox/qualbox/sandboxapi"
)

// deleteStatuses summarizes the replies to DELETE requests a proxy saw:
// "204", "204->409" (Engine said 204, the client got 409), "409(fake)"
// (answered by the proxy, never forwarded).
func deleteStatuses(p *faultproxy.Proxy) string {
	var s []string
	for _, e := range p.Seen() {
		if e.Method != "DELETE" {
			continue
		}
		switch {
		case e.Status == 0:
			s = append(s, fmt.Sprintf("%d(fake)", e.ClientStatus))
		case e.ClientStatus != e.Status:
			s = append(s, fmt.Sprintf("%d->%d", e.Status, e.ClientStatus))
		default:
			s = append(s, fmt.Sprint(e.Status))
		}
	}
	return strings.Join(s, " ")
}

func roleID(rec sandboxapi.RecoveryRecord, role sandboxapi.Role) string {
	for _, r := range rec.Resources {
		if r.Role == role {
			return r.Identity.ID
		}
	}
	return ""
}

// testRemovalRaces: two owners (the original and a reconciled one) destroy
// the same sandbox concurrently while an external force removal of the
// compute container races them; a 409 whose removal completed and a 404
// count as gone; a 409 whose resource stays present never does.
func testRemovalRaces(t *testing.T, table *faultTable) {
	outbound := bridgeUnavailable(t) == ""
	for i, net := range []bool{false, false, outbound} {
		point := fmt.Sprintf("two owners + external force remove, run %d", i+1)
		if net {
			point += " (outbound)"
		}
		t.Run(point, func(t *testing.T) {
			origProxy, freshProxy := newProxy(t), newProxy(t)
			d := &durable{}
			lc := runLifecycle(t, newBackend(t, viaProxy(origProxy)), faultPolicy(net), d, lifecycleOptions{keep: true})
			assert.NilError(t, lc.err)
			running := d.latest()
			out, err := newBackend(t, viaProxy(freshProxy)).Reconcile(context.Background(), running)
			assert.NilError(t, err)
			assert.Assert(t, out.Kind == sandboxapi.ReconciliationMatched, "%s %s", out.Kind, out.Reason)
			cli := enginetest.Client(t)
			origProxy.SetRules() // reset the evidence window
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var wg sync.WaitGroup
			start := make(chan struct{})
			var origErr, freshErr, extErr error
			wg.Add(3)
			go func() { defer wg.Done(); <-start; origErr = lc.sb.Destroy(ctx) }()
			go func() { defer wg.Done(); <-start; freshErr = out.Owner.Destroy(ctx) }()
			go func() {
				defer wg.Done()
				<-start
				_, extErr = cli.ContainerRemove(ctx, roleID(running, sandboxapi.RoleCompute), client.ContainerRemoveOptions{Force: true})
			}()
			close(start)
			wg.Wait()
			assert.Check(t, origErr, "original owner")
			assert.Check(t, freshErr, "reconciled owner")
			ext := "204"
			if extErr != nil {
				ext = summarizeEngine(extErr)
			}
			left := leftovers(t, append(d.all(), out.Owner.RecoveryRecord())...)
			table.add(faultRow{group: "removal race", point: point,
				outcome:  fmt.Sprintf("original: %s; DELETEs %s", okOr(origErr), deleteStatuses(origProxy)),
				recovery: fmt.Sprintf("reconciled: %s; DELETEs %s; external: %s", okOr(freshErr), deleteStatuses(freshProxy), ext),
				found:    len(left), detail: strings.Join(left, " ")})
			if !assert.Check(t, len(left) == 0, "left behind: %v", left) {
				purge(t, left)
			}
		})
	}

	req := faultproxy.Request
	for _, tc := range []struct {
		point string
		rule  faultproxy.Rule
		// external removes compute and export directly before the destroy.
		external bool
		// stays: the 409 left the container in place, so destroy must fail.
		stays bool
	}{
		{point: "409 \"removal already in progress\", then gone", rule: faultproxy.ReplaceReply(req("DELETE", "/containers/[^/]+").Nth(1), 409, "removal of container is already in progress")},
		{point: "409 while the container stays present", rule: faultproxy.Answer(req("DELETE", "/containers/[^/]+").Nth(1), 409, "removal of container is already in progress"), stays: true},
		{point: "404: removed externally first", external: true},
	} {
		t.Run(tc.point, func(t *testing.T) {
			p := newProxy(t)
			d := &durable{}
			policy := faultPolicy(false)
			if tc.stays {
				policy.Deadlines.CleanupMs = 2000
			}
			lc := runLifecycle(t, newBackend(t, viaProxy(p)), policy, d, lifecycleOptions{keep: true})
			assert.NilError(t, lc.err)
			running := d.latest()
			if tc.external {
				cli := enginetest.Client(t)
				for _, role := range []sandboxapi.Role{sandboxapi.RoleCompute, sandboxapi.RoleExport} {
					_, err := cli.ContainerRemove(context.Background(), roleID(running, role), client.ContainerRemoveOptions{Force: true})
					assert.NilError(t, err)
				}
			} else {
				p.SetRules(tc.rule)
			}
			err := lc.sb.Destroy(context.Background())
			row := faultRow{group: "removal race", point: tc.point, outcome: fmt.Sprintf("destroy: %s; DELETEs %s", okOr(err), deleteStatuses(p))}
			if tc.stays {
				assert.Check(t, err != nil, "a 409 with the container still present is not gone")
				_, present := lookup(t, enginetest.Client(t), sandboxapi.RoleCompute, roleID(running, sandboxapi.RoleCompute))
				assert.Check(t, present, "the compute container is still there")
				r := recoverFresh(t, d)
				row.recovery = r.String()
			} else {
				assert.Check(t, err)
				row.recovery = "not needed"
			}
			p.SetRules()
			lc.settle()
			table.close(t, row, append(d.all(), lc.res.RecoveryRecord())...)
		})
	}
}

func okOr(err error) string {
	if err == nil {
		return "ok"
	}
	return summarize(err)
}

// summarizeEngine renders an Engine client error as its status class.
func summarizeEngine(err error) string {
	msg := err.Error()
	for _, k := range []string{"No such container", "already in progress", "is not running"} {
		if strings.Contains(msg, k) {
			return k
		}
	}
	return msg
}
