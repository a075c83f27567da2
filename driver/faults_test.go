package driver_test

// Fault tests of issue #5 on the real Engine: lost Engine replies through an
// owned fault proxy, persistence failures, controller death, sibling
// survival and removal races. Every case ends with a fresh controller that
// reconciles the last durable record and destroys, and a lookup of every
// resource of the sandbox by exact name and exact ID. TestFaults prints one
// table row per fault point and fails if any resource remains.

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"
	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/driver/internal/enginetest"
	"github.com/qualbox/qualbox/qualify/faultproxy"
	"github.com/qualbox/qualbox/sandboxapi"
)

// faultDeadlineMs is startupMs and cleanupMs of fault runs: a dropped reply
// fails at once (the proxy closes the connection), so the deadline only
// bounds a hang.
const faultDeadlineMs = 10_000

func faultPolicy(outbound bool) sandboxapi.Policy {
	p := enginetest.Policy()
	p.Deadlines = sandboxapi.Deadlines{StartupMs: faultDeadlineMs, CleanupMs: faultDeadlineMs}
	if outbound {
		p.Network = sandboxapi.Network{Kind: sandboxapi.NetworkOutbound}
	}
	return p
}

// faultRow is one row of the fault table.
type faultRow struct {
	group, point string
	// outcome of the faulted operation as the original controller saw it.
	outcome string
	// recovery is what the fresh controller found and did.
	recovery string
	// found counts resources of the sandbox found afterwards; -1 = skipped.
	found  int
	detail string
}

type faultTable struct {
	mu   sync.Mutex
	rows []faultRow
}

func (ft *faultTable) add(r faultRow) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	ft.rows = append(ft.rows, r)
}

// close ends a fault point: it looks up every resource of records by exact
// name and ID, records the row with what it found, requires zero and
// removes by ID whatever a failing point left behind.
func (ft *faultTable) close(t *testing.T, row faultRow, records ...sandboxapi.RecoveryRecord) {
	t.Helper()
	left := leftovers(t, records...)
	row.found, row.detail = len(left), strings.Join(left, " ")
	ft.add(row)
	if !assert.Check(t, len(left) == 0, "left behind: %v", left) {
		purge(t, left)
	}
}

func (ft *faultTable) render(t *testing.T) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	if len(ft.rows) == 0 {
		return
	}
	var b strings.Builder
	tab := tablewriter.NewTable(&b,
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAlignment(tw.AlignLeft),
	)
	tab.Header([]string{"Group", "Fault point", "Faulted operation", "Reconciliation", "Found after"})
	leaks := 0
	for _, r := range ft.rows {
		found := fmt.Sprint(r.found)
		switch {
		case r.found < 0:
			found = "skipped"
		case r.found > 0:
			leaks++
			found += " FAIL " + r.detail
		}
		assert.Check(t, tab.Append([]string{r.group, r.point, r.outcome, r.recovery, found}))
	}
	assert.Check(t, tab.Render())
	t.Logf("fault table (%d fault points):\n%s", len(ft.rows), b.String())
	if leaks > 0 {
		t.Errorf("%d fault points left resources behind", leaks)
	}
}

// durable is an in-memory durable store for sandboxapi.Persisted. Persist
// calls are numbered from 1; from failFrom on (only at failFrom when once)
// they fail without storing. hook, if set, runs before a record is stored.
type durable struct {
	mu       sync.Mutex
	records  []sandboxapi.RecoveryRecord
	calls    int
	failFrom int
	once     bool
	hook     func(n int, r sandboxapi.RecoveryRecord)
}

var errInjectedPersist = errors.New("injected persistence failure")

func (d *durable) persist(_ context.Context, r sandboxapi.RecoveryRecord) error {
	d.mu.Lock()
	d.calls++
	n := d.calls
	if d.failFrom > 0 && (n == d.failFrom || (!d.once && n > d.failFrom)) {
		d.mu.Unlock()
		return errInjectedPersist
	}
	hook := d.hook
	d.mu.Unlock()
	if hook != nil {
		hook(n, r)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.records = append(d.records, r.Clone())
	return nil
}

// heal stops injecting failures.
func (d *durable) heal() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failFrom = 0
}

func (d *durable) latest() sandboxapi.RecoveryRecord {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.records[len(d.records)-1].Clone()
}

func (d *durable) all() []sandboxapi.RecoveryRecord {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]sandboxapi.RecoveryRecord, len(d.records))
	for i, r := range d.records {
		out[i] = r.Clone()
	}
	return out
}

// lifecycle is one controller's run: reserve, start, one exec that prints
// "ready" and sleeps, destroy. It stops at the first failure and reports the
// stage ("start", "exec", "destroy"); the sandbox is nil unless Start
// succeeded.
type lifecycle struct {
	res   sandboxapi.Reservation
	sb    sandboxapi.Sandbox
	stage string
	err   error
}

// lifecycleOptions adjust runLifecycle: afterStart runs once Start
// succeeded; keep skips the destroy (the controller "walks away").
type lifecycleOptions struct {
	afterStart func(sandboxapi.Sandbox)
	keep       bool
}

func runLifecycle(t *testing.T, b *driver.Backend, policy sandboxapi.Policy, d *durable, opts lifecycleOptions) lifecycle {
	t.Helper()
	ctx := context.Background()
	res, err := b.Reserve(sandboxapi.Request{Policy: policy}, sandboxapi.Persisted(d.persist))
	assert.NilError(t, err)
	d.mu.Lock()
	d.records = append(d.records, res.RecoveryRecord())
	d.mu.Unlock()
	lc := lifecycle{res: res}
	sb, err := res.Start(ctx)
	if err != nil {
		lc.stage, lc.err = "start", err
		return lc
	}
	lc.sb = sb
	if opts.afterStart != nil {
		opts.afterStart(sb)
	}
	if err := execReady(ctx, sb); err != nil {
		lc.stage, lc.err = "exec", err
		return lc
	}
	if opts.keep {
		return lc
	}
	if err := sb.Destroy(ctx); err != nil {
		lc.stage, lc.err = "destroy", err
	}
	return lc
}

// execReady starts `echo ready; sleep 1000` and waits for its output.
func execReady(ctx context.Context, sb sandboxapi.Sandbox) error {
	pr, err := sb.ReserveProcess(sandboxapi.ProcessSpec{Executable: "/bin/sh", Args: []string{"-c", "echo ready; exec sleep 1000"}, Cwd: sb.Workspace()})
	if err != nil {
		return err
	}
	p, err := pr.Start(ctx)
	if err != nil {
		return err
	}
	line := make(chan error, 1)
	go func() {
		s, err := bufio.NewReader(p.Stdout()).ReadString('\n')
		if err == nil && s != "ready\n" {
			err = fmt.Errorf("exec printed %q", s)
		}
		line <- err
	}()
	select {
	case err := <-line:
		return err
	case <-time.After(30 * time.Second):
		return errors.New("exec printed nothing in 30s")
	}
}

func (lc lifecycle) outcome() string {
	if lc.err == nil {
		return "completed"
	}
	return lc.stage + " failed: " + summarize(lc.err)
}

// settle makes the original controller release what it holds (process
// workers, connections) after recovery; its errors do not matter here.
func (lc lifecycle) settle() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if lc.sb != nil {
		_ = lc.sb.Destroy(ctx)
	}
}

// summarize renders an error as its contract type and code.
func summarize(err error) string {
	var ce *sandboxapi.CleanupError
	if errors.As(err, &ce) {
		return summarize(ce.Original) + ", cleanup " + summarize(ce.Err)
	}
	var unc *driver.UncertainError
	if errors.As(err, &unc) {
		return "uncertain " + string(unc.Role)
	}
	var op *sandboxapi.OperationError
	if errors.As(err, &op) {
		return string(op.Code)
	}
	var st *sandboxapi.StateError
	if errors.As(err, &st) {
		return "state"
	}
	var ve *sandboxapi.ValidationError
	if errors.As(err, &ve) {
		return "validation"
	}
	return fmt.Sprintf("%T", err)
}

// recovery is what a fresh controller did with the last durable record.
type recovery struct {
	kind     sandboxapi.ReconciliationKind
	advanced bool
	present  int
	err      error
}

func (r recovery) String() string {
	s := string(r.kind)
	if r.kind == sandboxapi.ReconciliationMatched || r.kind == sandboxapi.ReconciliationUncertain {
		s += fmt.Sprintf(", %d present", r.present)
		if r.advanced {
			s += ", advanced+persisted"
		}
		if r.err != nil {
			s += ", destroy: " + summarize(r.err)
		} else {
			s += ", destroyed"
		}
	}
	return s
}

// recoverFresh is a fresh controller on the real socket: it reconciles
// d.latest(), persists an advanced owner record, destroys, and returns what
// it found. A conflict or a reconcile error fails the test.
func recoverFresh(t *testing.T, d *durable) recovery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fresh := newBackend(t)
	last := d.latest()
	out, err := fresh.Reconcile(ctx, last)
	assert.NilError(t, err)
	r := recovery{kind: out.Kind}
	switch out.Kind {
	case sandboxapi.ReconciliationConflict:
		t.Errorf("fresh controller: conflict: %s", out.Reason)
	case sandboxapi.ReconciliationMatched, sandboxapi.ReconciliationUncertain:
		r.present = len(leftovers(t, last))
		if adv := out.Owner.RecoveryRecord(); !reflect.DeepEqual(adv, last) {
			r.advanced = true
			d.heal()
			assert.NilError(t, d.persist(ctx, adv))
		}
		r.err = out.Owner.Destroy(ctx)
		var unc *driver.UncertainError
		if r.err != nil && !errors.As(r.err, &unc) {
			t.Errorf("fresh controller: destroy: %v", r.err)
		}
	}
	return r
}

// leftovers returns "role ref" for every resource of the records' sandbox
// that exists: looked up by exact name and by every ID any record
// identified. Names derive from the operation, so this is exhaustive.
func leftovers(t *testing.T, records ...sandboxapi.RecoveryRecord) []string {
	t.Helper()
	cli := enginetest.Client(t)
	seen := map[string]bool{}
	var out []string
	for _, rec := range records {
		for _, r := range rec.Resources {
			refs := []string{r.Name}
			if r.Identity.Kind == sandboxapi.IdentityIdentified {
				refs = append(refs, r.Identity.ID)
			}
			for _, ref := range refs {
				id, ok := lookup(t, cli, r.Role, ref)
				if ok && !seen[id] {
					seen[id] = true
					out = append(out, fmt.Sprintf("%s %s", r.Role, id))
				}
			}
		}
	}
	return out
}

// purge removes resources leftovers found ("role id"), by exact ID, so a
// failing case does not leave them on the shared Engine.
func purge(t *testing.T, left []string) {
	t.Helper()
	cli := enginetest.Client(t)
	ctx := context.Background()
	for _, pass := range []string{"compute export", "storage", "network"} {
		for _, l := range left {
			role, id, _ := strings.Cut(l, " ")
			if !strings.Contains(pass, role) {
				continue
			}
			var err error
			switch sandboxapi.Role(role) {
			case sandboxapi.RoleCompute, sandboxapi.RoleExport:
				_, err = cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true})
			case sandboxapi.RoleStorage:
				_, err = cli.VolumeRemove(ctx, id, client.VolumeRemoveOptions{})
			case sandboxapi.RoleNetwork:
				_, err = cli.NetworkRemove(ctx, id, client.NetworkRemoveOptions{})
			}
			if err != nil && !cerrdefs.IsNotFound(err) {
				t.Errorf("purge %s: %v", l, err)
			}
		}
	}
}

// lookup inspects one resource by exact reference and returns its ID.
func lookup(t *testing.T, cli *client.Client, role sandboxapi.Role, ref string) (string, bool) {
	t.Helper()
	ctx := context.Background()
	var id string
	var err error
	switch role {
	case sandboxapi.RoleCompute, sandboxapi.RoleExport:
		var res client.ContainerInspectResult
		res, err = cli.ContainerInspect(ctx, ref, client.ContainerInspectOptions{})
		id = res.Container.ID
		if err == nil && strings.TrimPrefix(res.Container.Name, "/") != ref && res.Container.ID != ref {
			return "", false // an ID-prefix match of a name: not this reference
		}
	case sandboxapi.RoleStorage:
		var res client.VolumeInspectResult
		res, err = cli.VolumeInspect(ctx, ref, client.VolumeInspectOptions{})
		id = res.Volume.Name
	case sandboxapi.RoleNetwork:
		var res client.NetworkInspectResult
		res, err = cli.NetworkInspect(ctx, ref, client.NetworkInspectOptions{})
		id = res.Network.ID
		if err == nil && res.Network.Name != ref && res.Network.ID != ref {
			return "", false
		}
	}
	if err != nil {
		if !cerrdefs.IsNotFound(err) {
			t.Errorf("inspect %s %s: %v", role, ref, err)
		}
		return "", false
	}
	return id, true
}

// shortDir returns a fresh short directory for sockets (t.TempDir paths
// carry the test name and can exceed the Unix socket path limit).
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "qbf")
	assert.NilError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func newProxy(t *testing.T, rules ...faultproxy.Rule) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(shortDir(t), enginetest.Socket(), rules...)
	assert.NilError(t, err)
	t.Cleanup(func() { assert.Check(t, p.Close()) })
	return p
}

func viaProxy(p *faultproxy.Proxy) func(*driver.Config) {
	return func(c *driver.Config) { c.Endpoint = p.Endpoint() }
}

var (
	bridgeOnce   sync.Once
	bridgeReason string
)

// bridgeUnavailable returns why the Engine cannot create a bridge network
// here, or "" when it can: it creates and removes one by ID.
func bridgeUnavailable(t *testing.T) string {
	bridgeOnce.Do(func() {
		cli := enginetest.Client(t)
		ctx := context.Background()
		name := fmt.Sprintf("qualbox-faults-bridge-probe-%d", time.Now().UnixNano())
		out, err := cli.NetworkCreate(ctx, name, client.NetworkCreateOptions{Driver: "bridge"})
		if err != nil {
			bridgeReason = "the Engine cannot create a bridge network: " + err.Error()
			return
		}
		if _, err := cli.NetworkRemove(ctx, out.ID, client.NetworkRemoveOptions{}); err != nil {
			t.Errorf("remove probe network %s: %v", out.ID, err)
		}
	})
	return bridgeReason
}

// checkpointLabel names the change from prev to next, e.g. "storage
// creating" or "phase running".
func checkpointLabel(prev, next sandboxapi.RecoveryRecord) string {
	var parts []string
	if prev.Phase != next.Phase {
		parts = append(parts, "phase "+string(next.Phase))
	}
	for i, r := range next.Resources {
		if i < len(prev.Resources) && prev.Resources[i].Identity.Kind != r.Identity.Kind {
			parts = append(parts, string(r.Role)+" "+string(r.Identity.Kind))
		}
	}
	if len(parts) == 0 {
		return "unchanged"
	}
	return strings.Join(parts, ", ")
}

// referenceCheckpoints runs the lifecycle without faults and returns the
// label of every checkpoint (persist call) in order.
func referenceCheckpoints(t *testing.T) []string {
	t.Helper()
	var d durable
	lc := runLifecycle(t, newBackend(t), faultPolicy(false), &d, lifecycleOptions{})
	assert.NilError(t, lc.err)
	recs := d.all()
	labels := make([]string, 0, len(recs)-1)
	for i := 1; i < len(recs); i++ {
		labels = append(labels, checkpointLabel(recs[i-1], recs[i]))
	}
	assert.Check(t, len(leftovers(t, recs...)) == 0)
	return labels
}

func TestFaults(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("controller child process")
	}
	table := &faultTable{}
	t.Cleanup(func() { table.render(t) })
	checkpoints := referenceCheckpoints(t)
	t.Logf("lifecycle checkpoints: %q", checkpoints)
	t.Run("lost-reply", func(t *testing.T) { testLostReplies(t, table) })
	t.Run("persist-failure", func(t *testing.T) { testPersistFailures(t, table, checkpoints) })
	t.Run("controller-death", func(t *testing.T) { testControllerDeath(t, table, checkpoints) })
	t.Run("sibling-survival", func(t *testing.T) { testSiblingSurvival(t, table) })
	t.Run("removal-race", func(t *testing.T) { testRemovalRaces(t, table) })
	t.Run("late-create", func(t *testing.T) { testLateCreate(t, table) })
	t.Run("bad-record", func(t *testing.T) { testBadRecords(t, table) })
}

// testBadRecords: Reconcile rejects invalid records with the typed error
// before any Engine request (the backend's endpoint is a proxy that
// records every request it sees).
func testBadRecords(t *testing.T, table *faultTable) {
	p := newProxy(t)
	b := newBackend(t, viaProxy(p))
	res, err := b.Reserve(sandboxapi.Request{Policy: faultPolicy(true)}, sandboxapi.InProcess())
	assert.NilError(t, err)
	reserved := res.RecoveryRecord()
	identified := sandboxapi.ResourceIdentity{Kind: sandboxapi.IdentityIdentified, ID: strings.Repeat("c", 64), Fingerprint: "sha256:" + strings.Repeat("d", 64)}
	for _, tc := range []struct {
		name   string
		mutate func(*sandboxapi.RecoveryRecord)
		want   []string
	}{
		{"wrong format string", func(r *sandboxapi.RecoveryRecord) { r.Format = "agenai.sandbox-recovery.v1" }, []string{"format"}},
		{"duplicate roles", func(r *sandboxapi.RecoveryRecord) { r.Resources[1].Role = r.Resources[0].Role }, []string{"resources.1.role"}},
		{"unverified authority with identified resources", func(r *sandboxapi.RecoveryRecord) {
			r.Phase = sandboxapi.PhaseRunning
			r.Resources[0].Identity = identified
		}, []string{"authority"}},
		{"oversize", func(r *sandboxapi.RecoveryRecord) {
			r.BackendRevision = strings.Repeat("r", sandboxapi.MaxRecoveryBytes)
		}, []string{"(root)"}},
		{"five resources", func(r *sandboxapi.RecoveryRecord) {
			r.Resources = append(r.Resources, sandboxapi.RecoveryResource{Role: sandboxapi.RoleCompute, Name: "qualbox-extra", Identity: sandboxapi.ResourceIdentity{Kind: sandboxapi.IdentityPlanned}})
		}, []string{"resources", "resources.4.role"}},
		{"creating with an ID", func(r *sandboxapi.RecoveryRecord) {
			r.Phase = sandboxapi.PhaseStarting
			r.Authority = sandboxapi.Authority{Kind: sandboxapi.AuthorityVerified, BackendIdentity: "A:B"}
			r.Resources[0].Identity = sandboxapi.ResourceIdentity{Kind: sandboxapi.IdentityCreating, ID: "x"}
		}, []string{"resources.0.identity.id"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := reserved.Clone()
			tc.mutate(&rec)
			_, err := b.Reconcile(context.Background(), rec)
			var verr *sandboxapi.ValidationError
			assert.Assert(t, errors.As(err, &verr), "got %T %v", err, err)
			var paths []string
			for _, issue := range verr.Issues {
				paths = append(paths, issue.PathString())
			}
			assert.DeepEqual(t, paths, tc.want)
			assert.Check(t, len(p.Seen()) == 0, "Reconcile reached the Engine: %v", p.Seen())
			table.add(faultRow{group: "bad record", point: tc.name, outcome: "ValidationError at " + strings.Join(paths, ", "),
				recovery: fmt.Sprintf("rejected before Engine access (%d requests)", len(p.Seen()))})
		})
	}
}

// testLostReplies drops the Engine's reply to each mutating call of the
// lifecycle in turn; the original controller fails (and, for startup,
// cleans up through the same faulty proxy); a fresh controller recovers.
func testLostReplies(t *testing.T, table *faultTable) {
	req := faultproxy.Request
	for _, tc := range []struct {
		point    string
		match    faultproxy.Match
		outbound bool
	}{
		{"POST /volumes/create", req("POST", "/volumes/create"), false},
		{"POST /networks/create", req("POST", "/networks/create"), true},
		{"POST /containers/create (compute)", req("POST", "/containers/create").Nth(1), false},
		{"POST /containers/create (export)", req("POST", "/containers/create").Nth(2), false},
		{"PUT /containers/{id}/archive", req("PUT", "/containers/[^/]+/archive"), false},
		{"POST /containers/{id}/start", req("POST", "/containers/[^/]+/start"), false},
		{"POST /containers/{id}/exec", req("POST", "/containers/[^/]+/exec"), false},
		{"POST /exec/{id}/start", req("POST", "/exec/[^/]+/start"), false},
		{"DELETE /containers/{id} (compute)", req("DELETE", "/containers/[^/]+").Nth(1), false},
		{"DELETE /containers/{id} (export)", req("DELETE", "/containers/[^/]+").Nth(2), false},
		{"DELETE /volumes/{name}", req("DELETE", "/volumes/[^/]+"), false},
		{"DELETE /networks/{id}", req("DELETE", "/networks/[^/]+"), true},
	} {
		for _, sever := range []bool{false, true} {
			testLostReply(t, table, tc.point, faultproxy.DropReply(tc.match), tc.outbound, sever)
		}
	}
	// The exec's hijacked stream dies inside the first frame header.
	cut := faultproxy.CutStream(req("POST", "/exec/[^/]+/start"), 4)
	testLostReply(t, table, "exec stream cut after 4 bytes", cut, false, false)
}

// testLostReply drops one reply; with sever, the original controller also
// loses the Engine right after (as if it died there), so only the fresh
// controller can clean up.
func testLostReply(t *testing.T, table *faultTable, point string, rule faultproxy.Rule, outbound, sever bool) {
	group := "lost reply"
	if sever {
		group = "lost reply + Engine lost"
	}
	t.Run(group+" "+point, func(t *testing.T) {
		row := faultRow{group: group, point: point}
		if outbound {
			if reason := bridgeUnavailable(t); reason != "" {
				row.found, row.outcome = -1, "skipped: "+reason
				table.add(row)
				t.Skip(reason)
			}
		}
		p := newProxy(t, rule)
		if sever {
			p.SeverAfterFault()
		}
		var d durable
		lc := runLifecycle(t, newBackend(t, viaProxy(p)), faultPolicy(outbound), &d, lifecycleOptions{})
		fired := p.Fired()
		assert.Check(t, len(fired) == 1, "the fault fired %d times", len(fired))
		assert.Check(t, lc.err != nil, "the faulted operation reported no error")
		row.outcome = lc.outcome()
		if len(fired) == 1 {
			row.outcome += fmt.Sprintf(" (Engine said %d)", fired[0].Status)
		}
		r := recoverFresh(t, &d)
		row.recovery = r.String()
		p.SetRules()
		lc.settle()
		table.close(t, row, append(d.all(), lc.res.RecoveryRecord())...)
	})
}

// testPersistFailures fails the persist function at each checkpoint: once
// (a transient store error) and from there on (the store is gone, so the
// original controller cannot clean up and the fresh one must).
func testPersistFailures(t *testing.T, table *faultTable, checkpoints []string) {
	for _, once := range []bool{false, true} {
		for i, label := range checkpoints {
			n := i + 1
			mode := "from"
			if once {
				mode = "once at"
			}
			point := fmt.Sprintf("persist fails %s #%d (%s)", mode, n, label)
			t.Run(point, func(t *testing.T) {
				d := &durable{failFrom: n, once: once}
				lc := runLifecycle(t, newBackend(t), faultPolicy(false), d, lifecycleOptions{})
				assert.Check(t, errors.Is(lc.err, errInjectedPersist), "got %v", lc.err)
				row := faultRow{group: "persist failure", point: point, outcome: lc.outcome()}
				r := recoverFresh(t, d)
				row.recovery = r.String()
				d.heal()
				lc.settle()
				table.close(t, row, append(d.all(), lc.res.RecoveryRecord())...)
			})
		}
	}
}

// TestReconcileAfterVolumeRootChanges is the regression test of a conflict
// found by the controller-death faults: the local volume driver reports the
// ctime of the volume's data directory as CreatedAt, so once anything
// changed the volume root a second or more after creation, the recorded
// storage fingerprint no longer matched and a fresh controller refused to
// clean up (conflict, resources leaked).
func TestReconcileAfterVolumeRootChanges(t *testing.T) {
	b := newBackend(t)
	var d durable
	lc := runLifecycle(t, b, faultPolicy(false), &d, lifecycleOptions{keep: true})
	assert.NilError(t, lc.err)
	t.Cleanup(lc.settle)
	running := d.latest()
	time.Sleep(1100 * time.Millisecond)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	assert.NilError(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "later/", Mode: 0o755}))
	assert.NilError(t, tw.Close())
	_, err := enginetest.Client(t).CopyToContainer(context.Background(), roleID(running, sandboxapi.RoleCompute),
		client.CopyToContainerOptions{DestinationPath: driver.WorkspacePath, Content: &buf})
	assert.NilError(t, err)
	out, err := newBackend(t).Reconcile(context.Background(), running)
	assert.NilError(t, err)
	assert.Assert(t, out.Kind == sandboxapi.ReconciliationMatched, "%s: %s", out.Kind, out.Reason)
	assert.NilError(t, out.Owner.Destroy(context.Background()))
	assert.Check(t, len(leftovers(t, d.all()...)) == 0)
}

// testLateCreate holds the compute create in the proxy past startupMs: the
// controller gives up (deadline), its cleanup finds the name absent
// (uncertain), and the create lands afterwards. Once the proxy is
// quiescent a fresh controller recovers.
func testLateCreate(t *testing.T, table *faultTable) {
	for _, tc := range []struct {
		role string
		nth  int
	}{{"compute", 1}, {"export", 2}} {
		t.Run(tc.role, func(t *testing.T) { testLateContainerCreate(t, table, tc.role, tc.nth) })
	}
}

func testLateContainerCreate(t *testing.T, table *faultTable, role string, nth int) {
	p := newProxy(t, faultproxy.Delay(faultproxy.Request("POST", "/containers/create").Nth(nth), 4*time.Second))
	policy := faultPolicy(false)
	policy.Deadlines.StartupMs = 2500
	var d durable
	lc := runLifecycle(t, newBackend(t, viaProxy(p)), policy, &d, lifecycleOptions{})
	row := faultRow{group: "late create", point: "POST /containers/create (" + role + ") held 4s > startupMs 2500", outcome: lc.outcome()}
	// Quiescence: the held create reached the Engine and was answered.
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if f := p.Fired(); len(f) == 1 && (f[0].Status != 0 || f[0].Err != "") {
			row.outcome += fmt.Sprintf(" (landed late: Engine said %d)", f[0].Status)
			break
		}
	}
	r := recoverFresh(t, &d)
	row.recovery = r.String()
	lc.settle()
	table.close(t, row, append(d.all(), lc.res.RecoveryRecord())...)
}
