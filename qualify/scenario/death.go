package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/qualify/observer"
	"github.com/qualbox/qualbox/sandboxapi"
)

// ControllerDeath kills a child controller process with SIGKILL at chosen
// checkpoints of reserve and start (docs/qualification.md#scenarios;
// docs/contract.md#recovery). The child is the qualify
// binary's internal `controller-child` subcommand (RunChild), which
// persists every recovery record atomically to a file. After the kill the
// scenario records whether compute still runs (controller death does not
// stop compute), then a fresh in-process driver.Backend reconciles the last
// durable record, persists the advanced owner record when reconciliation
// changed it, destroys, and every resource of the sandbox is checked
// absent by exact name and ID. The evidence has one table row per
// checkpoint.
type ControllerDeath struct{}

// ControllerDeathParams are the controller-death params.
type ControllerDeathParams struct {
	// Checkpoints are where the child dies: N (after the N-th persisted
	// record is durable, before the effect it precedes; 0 is the
	// reservation record before Start), "N/before" (at the N-th persist
	// call, before that record is durable: record N-1 and its effect are
	// done) and "exec" (after `qualbox-probe sleep 1000` started as the
	// sandbox's process). Default: every checkpoint of reserve and start,
	// both ways, plus exec.
	Checkpoints []checkpoint `json:"checkpoints,omitempty"`
}

// checkpoint is one ControllerDeathParams entry: an integer or a string.
type checkpoint string

func (c *checkpoint) UnmarshalJSON(data []byte) error {
	var n int
	if err := json.Unmarshal(data, &n); err == nil {
		if n < 0 {
			return fmt.Errorf("checkpoint %d: want a non-negative index", n)
		}
		*c = checkpoint(strconv.Itoa(n))
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf(`checkpoint %s: want an index N, "N/before" or "exec"`, data)
	}
	if err := validCheckpoint(s); err != nil {
		return err
	}
	*c = checkpoint(s)
	return nil
}

// validCheckpoint accepts "N", "N/before" (N >= 1) and "exec".
func validCheckpoint(s string) error {
	if s == CheckpointExec {
		return nil
	}
	n, before := strings.CutSuffix(s, "/before")
	i, err := strconv.Atoi(n)
	switch {
	case err != nil || i < 0 || strconv.Itoa(i) != n:
		return fmt.Errorf(`checkpoint %q: want an index N, "N/before" or "exec"`, s)
	case before && i < 1:
		return fmt.Errorf(`checkpoint %q: "N/before" needs N >= 1 (persist calls count from 1)`, s)
	}
	return nil
}

// Name returns "controller-death".
func (ControllerDeath) Name() string { return "controller-death" }

func (ControllerDeath) params(raw map[string]any) (ControllerDeathParams, error) {
	var p ControllerDeathParams
	if err := DecodeParams(raw, &p); err != nil {
		return p, err
	}
	if p.Checkpoints != nil && len(p.Checkpoints) == 0 {
		return p, errors.New("params.checkpoints: want at least one checkpoint")
	}
	seen := map[checkpoint]bool{}
	for i, c := range p.Checkpoints {
		if seen[c] {
			return p, fmt.Errorf("params.checkpoints[%d]: %q is listed twice", i, c)
		}
		seen[c] = true
	}
	return p, nil
}

// Validate checks params: checkpoints.
func (s ControllerDeath) Validate(params map[string]any) error {
	_, err := s.params(params)
	return err
}

// DeathRow is one checkpoint's row of the controller-death table.
type DeathRow struct {
	Checkpoint string `json:"checkpoint"`
	// Durable is the last durable record at death: phase and identities.
	Durable string `json:"durable"`
	// Persisted is how many records the child had persisted.
	Persisted int `json:"persisted"`
	// ComputeAtKill and ComputeAfterKill are the compute container's
	// state just before SIGKILL and after it (absent, created, running).
	ComputeAtKill    string `json:"computeAtKill"`
	ComputeAfterKill string `json:"computeAfterKill"`
	// Reconciliation is the fresh controller's reconciliation kind.
	Reconciliation string `json:"reconciliation"`
	// Advanced says the owner's record differed and was persisted.
	Advanced bool `json:"advanced"`
	// Destroy is "ok", "n/a" or the error class.
	Destroy string `json:"destroy"`
	// Left is the number of the sandbox's resources present afterwards.
	Left int `json:"left"`
	// Scope is the observer's verdict on the keeper's cgroup after
	// recovery ("" when compute never ran).
	Scope string `json:"scope,omitempty"`
}

// qualifyBinary is the binary run as the child controller.
func qualifyBinary() (string, error) {
	if b := os.Getenv(QualifyBinaryEnv); b != "" {
		return b, nil
	}
	return os.Executable()
}

// Run kills the child at every selected checkpoint and recovers.
func (s ControllerDeath) Run(ctx context.Context, env *Env, params map[string]any, rec *Record) error {
	p, err := s.params(params)
	if err != nil {
		return err
	}
	bin, err := qualifyBinary()
	if err != nil {
		return err
	}
	rec.Request("child controller", bin+" "+ChildCommand)
	rec.Request("policy", env.Policy)
	var points []string
	for _, c := range p.Checkpoints {
		points = append(points, string(c))
	}
	rows := map[string]DeathRow{}
	run := func(cp string) error {
		row, err := deathCase(ctx, env, rec, bin, cp)
		rows[cp] = row
		return err
	}
	if points == nil {
		// Default: exec first; its marker says how many records starting
		// persisted, which fixes the list of checkpoints.
		if err := run(CheckpointExec); err != nil {
			return err
		}
		k := rows[CheckpointExec].Persisted
		rec.Check("default checkpoints: starting persisted records", ">= 1", k, k >= 1)
		points = append(points, "0")
		for n := 1; n <= k; n++ {
			points = append(points, fmt.Sprintf("%d/before", n), strconv.Itoa(n))
		}
		points = append(points, CheckpointExec)
	}
	rec.Request("checkpoints", points)
	var table []DeathRow
	for _, cp := range points {
		if _, done := rows[cp]; !done {
			if err := run(cp); err != nil {
				return err
			}
		}
		table = append(table, rows[cp])
		rec.Observe("checkpoint table", table)
	}
	rec.Observe("checkpoint table (text)", deathTable(table))
	return nil
}

// deathTable renders the rows as a Markdown table.
func deathTable(rows []DeathRow) []string {
	out := []string{"| checkpoint | durable record at death | compute at kill → after | reconciliation | advanced+persisted | destroy | left | scope |", "|---|---|---|---|---|---|---|---|"}
	for _, r := range rows {
		out = append(out, fmt.Sprintf("| %s | %s | %s → %s | %s | %t | %s | %d | %s |", r.Checkpoint, r.Durable, r.ComputeAtKill, r.ComputeAfterKill, r.Reconciliation, r.Advanced, r.Destroy, r.Left, r.Scope))
	}
	return out
}

// describeRecord is "phase P; role identity, ..." of r.
func describeRecord(r sandboxapi.RecoveryRecord) string {
	parts := make([]string, 0, len(r.Resources))
	for _, res := range r.Resources {
		parts = append(parts, string(res.Role)+" "+string(res.Identity.Kind))
	}
	return fmt.Sprintf("phase %s; %s", r.Phase, strings.Join(parts, ", "))
}

// boundedBuffer keeps the first 64 KiB written to it.
type boundedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := 64<<10 - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *boundedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// recordOwner lets the runner check the resources of a record that no
// cleanup owner holds (reconciliation absent): it only reports the record.
type recordOwner struct{ r sandboxapi.RecoveryRecord }

func (o recordOwner) RecoveryRecord() sandboxapi.RecoveryRecord { return o.r }
func (o recordOwner) Stop(context.Context) error {
	return errors.New("record only: reconciliation found no resource")
}
func (o recordOwner) Destroy(context.Context) error {
	return errors.New("record only: reconciliation found no resource")
}

// trackedOwner is the one cleanup owner a death case registers: it
// reports the record of the latest owner set (a durable record read from
// disk, then the recovered owner), so the runner's absence check covers the
// sandbox from the first durable record on, also when the case fails early.
type trackedOwner struct {
	mu  sync.Mutex
	cur sandboxapi.CleanupOwner
}

func (t *trackedOwner) set(o sandboxapi.CleanupOwner) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cur = o
}

func (t *trackedOwner) get() sandboxapi.CleanupOwner {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cur == nil {
		return recordOwner{}
	}
	return t.cur
}

func (t *trackedOwner) RecoveryRecord() sandboxapi.RecoveryRecord { return t.get().RecoveryRecord() }
func (t *trackedOwner) Stop(ctx context.Context) error            { return t.get().Stop(ctx) }
func (t *trackedOwner) Destroy(ctx context.Context) error         { return t.get().Destroy(ctx) }

// inspectRef inspects one resource by exact reference (read-only) and
// returns its ID and, for a container, its state; ok is false when absent.
func inspectRef(ctx context.Context, cli *client.Client, role sandboxapi.Role, ref string) (id, state string, ok bool, err error) {
	absent := func(err error) (string, string, bool, error) {
		if cerrdefs.IsNotFound(err) {
			return "", "", false, nil
		}
		return "", "", false, fmt.Errorf("inspect %s %s: %w", role, ref, err)
	}
	switch role {
	case sandboxapi.RoleCompute, sandboxapi.RoleExport:
		res, err := cli.ContainerInspect(ctx, ref, client.ContainerInspectOptions{})
		if err != nil {
			return absent(err)
		}
		c := res.Container
		if strings.TrimPrefix(c.Name, "/") != ref && c.ID != ref {
			return "", "", false, nil // an ID-prefix match of a name: not this reference
		}
		state = "created"
		if c.State != nil {
			state = string(c.State.Status)
		}
		return c.ID, state, true, nil
	case sandboxapi.RoleStorage:
		res, err := cli.VolumeInspect(ctx, ref, client.VolumeInspectOptions{})
		if err != nil {
			return absent(err)
		}
		return res.Volume.Name, "", true, nil
	case sandboxapi.RoleNetwork:
		res, err := cli.NetworkInspect(ctx, ref, client.NetworkInspectOptions{})
		if err != nil {
			return absent(err)
		}
		if res.Network.Name != ref && res.Network.ID != ref {
			return "", "", false, nil
		}
		return res.Network.ID, "", true, nil
	}
	return "", "", false, fmt.Errorf("unknown resource role %q", role)
}

// leftovers returns "role id" for every resource of records present on the
// Engine, looked up by exact name and by every identified ID. Names derive
// from namespace and operation, so this is exhaustive for the sandbox.
func leftovers(ctx context.Context, cli *client.Client, records ...sandboxapi.RecoveryRecord) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, r := range records {
		for _, res := range r.Resources {
			refs := []string{res.Name}
			if res.Identity.Kind == sandboxapi.IdentityIdentified {
				refs = append(refs, res.Identity.ID)
			}
			for _, ref := range refs {
				id, _, ok, err := inspectRef(ctx, cli, res.Role, ref)
				if err != nil {
					return out, err
				}
				if ok && !seen[id] {
					seen[id] = true
					out = append(out, fmt.Sprintf("%s %s", res.Role, id))
				}
			}
		}
	}
	return out, nil
}

// computeState is the compute container's state by exact name.
func computeState(ctx context.Context, cli *client.Client, r sandboxapi.RecoveryRecord) (id, state string, err error) {
	for _, res := range r.Resources {
		if res.Role == sandboxapi.RoleCompute {
			id, state, ok, err := inspectRef(ctx, cli, res.Role, res.Name)
			if err != nil || !ok {
				return "", "absent", err
			}
			return id, state, nil
		}
	}
	return "", "absent", nil
}

// expectedReconciliation is what Reconcile must answer for r given what
// the Engine holds by exact name: uncertain when a "creating" resource is
// absent, matched when any resource is present, absent otherwise; and
// whether a "creating" identity is present (the owner's record advances).
func expectedReconciliation(ctx context.Context, cli *client.Client, r sandboxapi.RecoveryRecord) (sandboxapi.ReconciliationKind, bool, error) {
	present, uncertain, advance := false, false, false
	for _, res := range r.Resources {
		if res.Identity.Kind == sandboxapi.IdentityPlanned {
			continue
		}
		_, _, ok, err := inspectRef(ctx, cli, res.Role, res.Name)
		if err != nil {
			return "", false, err
		}
		switch {
		case ok && res.Identity.Kind == sandboxapi.IdentityCreating:
			present, advance = true, true
		case ok:
			present = true
		case res.Identity.Kind == sandboxapi.IdentityCreating:
			uncertain = true
		}
	}
	switch {
	case uncertain:
		return sandboxapi.ReconciliationUncertain, advance, nil
	case present:
		return sandboxapi.ReconciliationMatched, advance, nil
	}
	return sandboxapi.ReconciliationAbsent, false, nil
}

// deathCase runs one child to checkpoint cp, kills it and recovers. Checks
// are named "<cp>: ...". The returned error is the case's own failure
// (nothing more can be judged); check failures are recorded, not returned.
// The steps, in order (docs/qualification.md#scenarios):
//
//  1. prepare: the case's directories and the child's configuration;
//  2. startChild: run the child controller, which blocks at cp;
//  3. awaitCheckpoint: wait for its marker (or its early end);
//  4. observeAtDeath: the durable record and compute's state before the kill;
//  5. kill: SIGKILL, and check it blocked at cp and died of it;
//  6. afterKill: the last durable record, and compute still running;
//  7. recoverSandbox: a fresh controller reconciles, persists and destroys;
//  8. checkGone: nothing of the sandbox remains, the scope is gone.
func deathCase(ctx context.Context, env *Env, rec *Record, bin, cp string) (DeathRow, error) {
	d := &death{env: env, rec: rec, cp: cp, row: DeathRow{Checkpoint: cp, Destroy: "n/a"}, owner: &trackedOwner{}}
	env.Log("checkpoint %s", cp)
	if err := d.prepare(); err != nil {
		return d.row, err
	}
	if err := d.startChild(bin); err != nil {
		return d.row, err
	}
	// Every return below must leave no child behind, blocked or not.
	defer d.reap()
	d.awaitCheckpoint(ctx)
	cctx, cancel := cleanupContext(ctx, env.Policy)
	defer cancel()
	if err := d.observeAtDeath(cctx); err != nil {
		return d.row, err
	}
	d.kill()
	last, err := d.afterKill(cctx)
	if err != nil {
		return d.row, err
	}
	defer d.closeFresh()
	records, err := d.recoverSandbox(cctx, last)
	if err != nil {
		return d.row, err
	}
	return d.row, d.checkGone(cctx, records)
}

// death is the state of one deathCase as its steps fill it.
type death struct {
	env *Env
	rec *Record
	cp  string
	row DeathRow
	// dir holds the case's spill directories, record and marker files.
	dir string
	cfg ChildConfig

	child *childProc

	// owner is the one cleanup owner the case registers with rec, once.
	owner   *trackedOwner
	tracked bool

	marker      ChildMarker
	blocked     bool
	exitedEarly bool
	early       error

	computeID string
	scope     *observer.Scope
	snaps     []observer.Snapshot
	fresh     *driver.Backend
}

// name prefixes a check or observation with the checkpoint.
func (d *death) name(s string) string { return d.cp + ": " + s }

// track points the registered cleanup owner at o: the runner checks the
// absence of whatever the latest durable record lists, from the first
// record read on.
func (d *death) track(o sandboxapi.CleanupOwner) {
	d.owner.set(o)
	if !d.tracked {
		d.rec.Track(d.owner)
		d.tracked = true
	}
}

// snapshot reads and keeps a snapshot of the keeper's scope.
func (d *death) snapshot(label string) observer.Snapshot {
	s := d.scope.Read(d.env.HostFS(), label)
	d.snaps = append(d.snaps, s)
	return s
}

// prepare creates the case's directories and the child's configuration.
func (d *death) prepare() error {
	d.dir = filepath.Join(d.env.Dir, "checkpoint-"+strings.ReplaceAll(d.cp, "/", "-"))
	spill := filepath.Join(d.dir, "spill")
	for _, dir := range []string{spill, filepath.Join(d.dir, "spill-recovery")} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	}
	env := d.env
	d.cfg = ChildConfig{
		Profile: env.Profile, Endpoint: env.Endpoint, ImageID: env.ImageID, Namespace: env.Namespace,
		User: env.User, Policy: env.Policy, SpillDir: spill,
		RecordFile: filepath.Join(d.dir, "record.json"), MarkerFile: filepath.Join(d.dir, "marker.json"), Checkpoint: d.cp,
	}
	return nil
}

// startChild starts the child controller; reap must follow.
func (d *death) startChild(bin string) error {
	var err error
	d.child, err = startChildProc(bin, d.cfg)
	return err
}

// reap kills and waits for a child that kill did not reap.
func (d *death) reap() { d.child.reap() }

// awaitCheckpoint waits for the child's marker, its early end, the startup
// deadline (plus 30 s) or ctx, and records which.
func (d *death) awaitCheckpoint(ctx context.Context) {
	deadline := time.After(time.Duration(d.env.Policy.Deadlines.StartupMs)*time.Millisecond + 30*time.Second)
	defer func() { d.row.Persisted = d.marker.Persisted }()
	for {
		select {
		case err := <-d.child.exited:
			d.exitedEarly = true
			d.early = fmt.Errorf("child exited before its checkpoint: %v", err)
			if err == nil {
				d.early = errors.New("child exited 0 before its checkpoint")
			}
			return
		case <-deadline:
			d.early = errors.New("child did not reach its checkpoint in time")
			return
		case <-ctx.Done():
			d.early = ctx.Err()
			return
		case <-time.After(10 * time.Millisecond):
		}
		if data, err := os.ReadFile(d.cfg.MarkerFile); err == nil && json.Unmarshal(data, &d.marker) == nil {
			d.blocked = true
			return
		}
	}
}

// observeAtDeath records, for a blocked child, the durable record and the
// compute container's state before the kill, and resolves the keeper's
// scope when compute runs.
func (d *death) observeAtDeath(cctx context.Context) error {
	if !d.blocked {
		return nil
	}
	last, err := sandboxapi.ReadRecoveryRecordFile(d.cfg.RecordFile)
	if err != nil {
		return nil
	}
	d.track(recordOwner{r: last})
	id, state, err := computeState(cctx, d.env.Engine, last)
	if err != nil {
		return err
	}
	d.row.ComputeAtKill = state
	if state != "running" {
		return nil
	}
	pid, err := observer.KeeperPID(cctx, d.env.Engine, id)
	if err == nil {
		var s observer.Scope
		if s, err = observer.Resolve(d.env.HostFS(), pid); err == nil {
			d.scope = &s
			checkReadable(d.rec, d.name("observer: \"before kill\" snapshot"), d.snapshot("before kill"))
		}
	}
	d.rec.Check(d.name("observer: running compute's scope resolved"), "resolved", errText(err), err == nil)
	return nil
}

// kill sends SIGKILL (also to an early child still running past its
// deadline), reaps the child and checks it blocked at its checkpoint and
// died of the signal.
func (d *death) kill() {
	killed := d.child.kill(d.exitedEarly)
	d.rec.Check(d.name("child blocked at its checkpoint and died of SIGKILL"), "marker written; killed by SIGKILL",
		fmt.Sprintf("marker %t (%d persisted); %s; %s", d.blocked, d.marker.Persisted, d.child.cmd.ProcessState, errText(d.early)),
		d.blocked && killed && d.early == nil)
	if !d.blocked {
		d.rec.Observe(d.name("child output"), d.child.out.String())
	}
}

// afterKill reads the last durable record and checks that controller
// death did not stop compute (and, for a running compute, that the keeper
// and the exec's process still run in the scope).
func (d *death) afterKill(cctx context.Context) (sandboxapi.RecoveryRecord, error) {
	last, err := sandboxapi.ReadRecoveryRecordFile(d.cfg.RecordFile)
	if err != nil {
		return last, fmt.Errorf("%s: read the last durable record: %w", d.cp, err)
	}
	d.track(recordOwner{r: last})
	d.row.Durable = describeRecord(last)
	d.rec.Observe(d.name("durable record at death"), last)

	time.Sleep(300 * time.Millisecond)
	computeID, after, err := computeState(cctx, d.env.Engine, last)
	if err != nil {
		return last, err
	}
	d.computeID = computeID
	d.row.ComputeAfterKill = after
	if d.row.ComputeAtKill == "running" {
		d.rec.Equal(d.name("compute still running after controller death"), "running", after)
	}
	if d.scope != nil {
		during := d.snapshot("after kill")
		d.rec.Check(d.name("observer: keeper still in the scope after the kill"), "keeper in cgroup.procs", during.Procs, containsInt(during.Procs, d.scope.PID))
		if d.cp == CheckpointExec {
			pid := probeSleepPID(d.env.HostFS(), d.scope, d.snapshot)
			d.rec.Check(d.name("observer: the process `qualbox-probe sleep 1000` still runs in the scope"), "a host PID", pid, pid > 0)
		}
	}
	return last, nil
}

// recoverSandbox has a fresh controller reconcile the last durable record,
// persist the owner's record when reconciliation advanced it, and destroy.
// It returns the records whose resources must all be gone.
func (d *death) recoverSandbox(cctx context.Context, last sandboxapi.RecoveryRecord) ([]sandboxapi.RecoveryRecord, error) {
	env, rec, name := d.env, d.rec, d.name
	wantKind, wantAdvance, err := expectedReconciliation(cctx, env.Engine, last)
	if err != nil {
		return nil, err
	}
	d.fresh, err = driver.New(driver.Config{
		Profile: env.Profile, Endpoint: env.Endpoint, Namespace: env.Namespace,
		SpillDirectory: filepath.Join(d.dir, "spill-recovery"), ImageID: env.ImageID, User: env.User,
	})
	if err != nil {
		return nil, err
	}
	out, rerr := d.fresh.Reconcile(cctx, last)
	d.row.Reconciliation = string(out.Kind)
	if rerr != nil {
		d.row.Reconciliation = "error: " + rerr.Error()
	}
	got := d.row.Reconciliation
	if out.Kind == sandboxapi.ReconciliationConflict {
		got += ": " + out.Reason
	}
	rec.Check(name("reconciliation of the last durable record"), string(wantKind), got, rerr == nil && out.Kind == wantKind)
	records := []sandboxapi.RecoveryRecord{last}
	if out.Owner == nil {
		return records, nil
	}
	owner := out.Owner
	d.track(owner)
	adv := owner.RecoveryRecord()
	d.row.Advanced = !reflect.DeepEqual(adv, last)
	rec.Equal(name("owner record advanced (a creating resource was found)"), wantAdvance, d.row.Advanced)
	if d.row.Advanced {
		records = append(records, adv)
		perr := sandboxapi.PersistToFile(d.cfg.RecordFile)(cctx, adv)
		back, berr := sandboxapi.ReadRecoveryRecordFile(d.cfg.RecordFile)
		rec.Check(name("advanced owner record persisted before cleanup"), "the owner's record on disk", errText(errors.Join(perr, berr)),
			perr == nil && berr == nil && reflect.DeepEqual(back, adv))
		rec.Observe(name("advanced record"), adv)
	}
	derr := owner.Destroy(cctx)
	var unc *driver.UncertainError
	switch {
	case derr == nil:
		d.row.Destroy = "ok"
	case errors.As(derr, &unc):
		d.row.Destroy = "uncertain " + string(unc.Role)
	default:
		d.row.Destroy = "error: " + derr.Error()
	}
	// A "creating" resource whose name is absent keeps its retry owner:
	// destroy says so instead of claiming success.
	wantDestroy := "ok"
	if wantKind == sandboxapi.ReconciliationUncertain {
		wantDestroy = "uncertain <role>"
	}
	rec.Check(name("destroy by the recovered owner"), wantDestroy, d.row.Destroy,
		derr == nil && wantKind != sandboxapi.ReconciliationUncertain || unc != nil && wantKind == sandboxapi.ReconciliationUncertain)
	return records, nil
}

// closeFresh closes the recovering controller, if recover made one.
func (d *death) closeFresh() {
	if d.fresh != nil {
		d.fresh.Close()
	}
}

// checkGone checks that no resource of records remains, by exact names and
// IDs, and that the keeper's scope (when compute ran) is gone or empty.
func (d *death) checkGone(cctx context.Context, records []sandboxapi.RecoveryRecord) error {
	left, err := leftovers(cctx, d.env.Engine, records...)
	if err != nil {
		return err
	}
	d.row.Left = len(left)
	d.rec.Check(d.name("no resource of the sandbox remains (exact names and IDs)"), "none", strings.Join(append([]string{"none"}, left...)[min(len(left), 1):], ", "), len(left) == 0)
	if d.scope != nil {
		a := d.scope.WaitAbsent(cctx, d.env.HostFS(), 50*time.Millisecond)
		d.row.Scope = a.String()
		d.rec.Check(d.name("observer: scope gone or empty after recovery"), "gone|empty", a.String(), a.OK())
		d.rec.Observe("observer:"+d.cp, map[string]any{"computeId": d.computeID, "scope": d.scope, "snapshots": d.snaps, "absence": a})
	}
	return nil
}

// probeSleepPID polls the scope (up to 5 s) for the probe's `sleep 1000`
// and returns its host PID, or 0.
func probeSleepPID(host fs.FS, scope *observer.Scope, snapshot func(string) observer.Snapshot) int {
	deadline := time.Now().Add(5 * time.Second)
	for {
		s := scope.Read(host, "probe lookup")
		for _, p := range s.Procs {
			cmd, err := fs.ReadFile(host, fmt.Sprintf("proc/%d/cmdline", p))
			if err == nil && strings.Contains(string(cmd), "qualbox-probe") && strings.HasSuffix(string(cmd), "\x00sleep\x001000\x00") {
				snapshot("exec running")
				return p
			}
		}
		if time.Now().After(deadline) {
			snapshot("exec not found")
			return 0
		}
		time.Sleep(50 * time.Millisecond)
	}
}
