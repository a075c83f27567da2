package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/profiles"
	"github.com/qualbox/qualbox/qualify/dataset"
	"github.com/qualbox/qualbox/qualify/guest/facts"
	"github.com/qualbox/qualbox/sandboxapi"
)

// EngineRestart restarts the Engine daemon under persisted sandboxes and
// recovers them with a fresh controller (docs/qualification.md#engine-restart;
// docs/contract.md#recovery). Per live-restore mode it starts three
// sandboxes whose records a file store keeps (idle; busy, its process
// running; stopped, its compute already removed), seals the stores (the
// controller that wrote them is gone: every effect needs its record stored
// first), restarts the daemon with the manifest's command, waits for it to
// answer, and checks that it did restart (the event stream opened before
// it ended) and what the restart did to compute. A fresh driver backend
// then reconciles each stored record, which must be matched, destroys
// from it, and nothing of the sandbox may remain by exact name and ID.
// After the first restart a new sandbox mounts a dataset image built
// before it by subpath and must read the image's content.
//
// The scenario restarts only what the manifest names: without
// params.restart it is not_applicable. It runs alone under --parallel.
type EngineRestart struct {
	// DatasetSubpath is the subpath of the dataset mount after the
	// restart; "" means "corpus". A negative test mounts another subpath
	// than the content the check expects.
	DatasetSubpath *string
}

// EngineRestartParams are the engine-restart manifest params.
type EngineRestartParams struct {
	// Restart is the command (program, then arguments; no shell) that
	// restarts the Engine daemon with its own configuration, run in
	// qualify's working directory. Unset: not_applicable.
	Restart []string `json:"restart,omitempty"`
	// LiveRestoreRestart restarts the daemon with live-restore on. When
	// given (and the configuration has live-restore off), the scenario
	// also runs the live-restore on case, then Restart again to return
	// the daemon to its configuration.
	LiveRestoreRestart []string `json:"liveRestoreRestart,omitempty"`
	// RestartTimeoutSeconds bounds each run of a restart command
	// (default 300, 1..3600).
	RestartTimeoutSeconds int `json:"restartTimeoutSeconds,omitempty"`
	// ReadyTimeoutSeconds bounds the wait, after the command, for the
	// Engine to answer /_ping (default 300, 1..3600).
	ReadyTimeoutSeconds int `json:"readyTimeoutSeconds,omitempty"`
}

// NoRestartCommand is the not_applicable reason without params.restart.
const NoRestartCommand = "no Engine restart command: qualbox restarts only a daemon the run may restart (the manifest gives no params.restart)"

// Name returns "engine-restart".
func (EngineRestart) Name() string { return "engine-restart" }

// Exclusive says why engine-restart runs alone under --parallel.
func (EngineRestart) Exclusive() string {
	return "restarts the Engine daemon, which stops or interrupts every other scenario's sandboxes"
}

func (EngineRestart) params(raw map[string]any) (EngineRestartParams, error) {
	var p EngineRestartParams
	if err := DecodeParams(raw, &p); err != nil {
		return p, err
	}
	if err := checkArgv("restart", p.Restart); err != nil {
		return p, err
	}
	if err := checkArgv("liveRestoreRestart", p.LiveRestoreRestart); err != nil {
		return p, err
	}
	if p.LiveRestoreRestart != nil && p.Restart == nil {
		return p, errors.New("params.liveRestoreRestart: needs params.restart, which returns the daemon to its configuration afterwards")
	}
	for _, b := range []struct {
		name string
		v    *int
	}{{"restartTimeoutSeconds", &p.RestartTimeoutSeconds}, {"readyTimeoutSeconds", &p.ReadyTimeoutSeconds}} {
		if *b.v < 0 || time.Duration(*b.v)*time.Second > maxRestartTimeout {
			return p, fmt.Errorf("params.%s: want 1..%d seconds, got %d", b.name, int(maxRestartTimeout/time.Second), *b.v)
		}
	}
	return p, nil
}

// Validate checks params: restart, liveRestoreRestart and the two bounds.
func (s EngineRestart) Validate(params map[string]any) error {
	_, err := s.params(params)
	return err
}

func (p EngineRestartParams) restartTimeout() time.Duration {
	if p.RestartTimeoutSeconds == 0 {
		return defaultRestartTimeout
	}
	return time.Duration(p.RestartTimeoutSeconds) * time.Second
}

func (p EngineRestartParams) readyTimeout() time.Duration {
	if p.ReadyTimeoutSeconds == 0 {
		return defaultReadyTimeout
	}
	return time.Duration(p.ReadyTimeoutSeconds) * time.Second
}

// RestartRow is one sandbox's row of the engine-restart table.
type RestartRow struct {
	// Case is "live-restore off" or "live-restore on".
	Case string `json:"case"`
	// Sandbox is idle, busy or stopped.
	Sandbox string `json:"sandbox"`
	// Saved is the record saved before the restart: phase and identities.
	Saved string `json:"saved"`
	// ComputeBefore and ComputeAfter are the compute container's state
	// before and after the restart (absent, created, running, exited).
	ComputeBefore string `json:"computeBefore"`
	ComputeAfter  string `json:"computeAfter"`
	// Reconciliation is the fresh controller's answer for Saved.
	Reconciliation string `json:"reconciliation"`
	// Destroy is "ok", "n/a" or the error.
	Destroy string `json:"destroy"`
	// Left is how many of the sandbox's resources remained afterwards.
	Left int `json:"left"`
}

// Run restarts the daemon in each live-restore mode it can and recovers.
func (s EngineRestart) Run(ctx context.Context, env *Env, params map[string]any, rec *Record) error {
	p, err := s.params(params)
	if err != nil {
		return err
	}
	if p.Restart == nil {
		rec.NotApplicable(NoRestartCommand)
		return nil
	}
	rec.Request("restart", p.Restart)
	if p.LiveRestoreRestart != nil {
		rec.Request("liveRestoreRestart", p.LiveRestoreRestart)
	}
	rec.Request("working directory", workingDir())
	rec.Request("bounds", map[string]string{"restart": p.restartTimeout().String(), "ready": p.readyTimeout().String()})
	rec.Request("policy", env.Policy)
	prof, err := profiles.Load(env.Profile)
	if err != nil {
		return err
	}
	// Pings, /info, the event stream and the dataset image's build and
	// removal go through the scenario's own client at the profile's
	// daemon API version (as datasets does); env.Engine stays read-only.
	cli, err := client.New(client.WithHost(env.Endpoint), client.WithAPIVersion(prof.Daemon.MinAPIVersion))
	if err != nil {
		return err
	}
	defer cli.Close()
	info, err := cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return fmt.Errorf("/info before the restart: %w", err)
	}
	configured := info.Info.LiveRestoreEnabled
	rec.Observe("daemon before the restarts", map[string]any{"id": info.Info.ID, "liveRestoreEnabled": configured, "serverVersion": info.Info.ServerVersion})

	ds := &restartDataset{subpath: "corpus"}
	if s.DatasetSubpath != nil {
		ds.subpath = *s.DatasetSubpath
	}
	defer ds.remove(ctx, env, rec)
	if err := ds.prepare(ctx, env, rec, cli, prof); err != nil {
		return err
	}

	var table []RestartRow
	defer func() { rec.Observe("restart table (text)", restartTable(table)) }()
	run := func(c *restartCase) error {
		rows, err := c.run(ctx)
		table = append(table, rows...)
		rec.Observe("restart table", table)
		return err
	}
	first := &restartCase{env: env, rec: rec, cli: cli, p: p, mode: configured, restart: p.Restart}
	if err := run(first); err != nil {
		return err
	}
	if err := ds.afterRestart(ctx, env, rec); err != nil {
		return err
	}
	switch {
	case configured:
		rec.Observe("live-restore off", "not run: the daemon's configuration has live-restore on, and no restart command turns it off")
	case p.LiveRestoreRestart == nil:
		rec.Observe("live-restore on", "not run: the manifest gives no params.liveRestoreRestart (a restart into live-restore on)")
	default:
		on := &restartCase{env: env, rec: rec, cli: cli, p: p, mode: true, restart: p.LiveRestoreRestart, prepare: p.LiveRestoreRestart, restore: p.Restart}
		if err := run(on); err != nil {
			return err
		}
	}
	return nil
}

// restartTable renders the rows as a Markdown table.
func restartTable(rows []RestartRow) []string {
	out := []string{"| case | sandbox | record saved before the restart | compute before → after | reconciliation | destroy | left |", "|---|---|---|---|---|---|---|"}
	for _, r := range rows {
		out = append(out, fmt.Sprintf("| %s | %s | %s | %s → %s | %s | %s | %d |", r.Case, r.Sandbox, r.Saved, r.ComputeBefore, r.ComputeAfter, r.Reconciliation, r.Destroy, r.Left))
	}
	return out
}

func modeName(on bool) string {
	if on {
		return "live-restore on"
	}
	return "live-restore off"
}

// restartStore is one sandbox's durable recovery store, a file written by
// sandboxapi.PersistToFile. Sealing it stands for the end of the
// controller that writes it: a sealed store refuses every record, and since
// the driver stores the record before each effect and a failed store
// aborts the effect (docs/contract.md#recovery), that controller can no
// longer change the Engine: it is quiescent, as Reconcile requires. The
// scenario reopens a store only to clean up after a failed recovery.
type restartStore struct {
	path   string
	mu     sync.Mutex
	sealed bool
}

var errStoreSealed = errors.New("recovery store sealed: the controller that wrote it is gone")

func (s *restartStore) persist(ctx context.Context, r sandboxapi.RecoveryRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sealed {
		return errStoreSealed
	}
	return sandboxapi.PersistToFile(s.path)(ctx, r)
}

func (s *restartStore) setSealed(sealed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sealed = sealed
}

// restartBox is one sandbox of a case.
type restartBox struct {
	name  string
	store *restartStore
	res   sandboxapi.Reservation
	owner *trackedOwner
	row   RestartRow
	// saved is the record read back from the store before the restart.
	saved     sandboxapi.RecoveryRecord
	pidBefore int
	// records are those whose resources must all be gone at the end.
	records []sandboxapi.RecoveryRecord
	// recovered says the fresh controller destroyed it with nothing left.
	recovered bool
}

// restartCase is one live-restore mode as its steps fill it
// (docs/qualification.md#engine-restart):
//
//  1. prepareDaemon: for the on case, restart into live-restore on first;
//  2. startBoxes: the idle, busy and stopped sandboxes, records on file;
//  3. seal: the stores refuse records, the saved records are read back;
//  4. restartEngine: the command, the wait, the checks that it restarted;
//  5. checkCompute: what the restart did to each compute container;
//  6. recoverBoxes: a fresh controller reconciles, persists, destroys;
//  7. checkGone: nothing of any sandbox remains (exact names and IDs);
//  8. cleanup and restore: what recovery left, by the original owners
//     with their stores reopened; the daemon back to its configuration.
type restartCase struct {
	env *Env
	rec *Record
	cli *client.Client
	p   EngineRestartParams
	// mode is the live-restore mode of the case's restart.
	mode bool
	// restart restarts the daemon in mode; prepare, when set, is run
	// first to bring the daemon into mode; restore, when set, is run
	// last to return it to its configuration (live-restore off).
	restart, prepare, restore []string

	dir   string
	old   *driver.Backend
	fresh *driver.Backend
	boxes []*restartBox
}

// name prefixes a check with the case's mode.
func (c *restartCase) name(s string) string { return modeName(c.mode) + ": " + s }

// run runs the case's steps. The returned error is the case's own failure
// (nothing more can be judged); check failures are recorded.
func (c *restartCase) run(ctx context.Context) ([]RestartRow, error) {
	c.env.Log("%s", modeName(c.mode))
	c.dir = filepath.Join(c.env.Dir, strings.ReplaceAll(modeName(c.mode), " ", "-"))
	if err := os.MkdirAll(filepath.Join(c.dir, "spill-recovery"), 0o700); err != nil {
		return nil, err
	}
	if c.restore != nil {
		defer c.restoreDaemon(ctx)
	}
	if c.prepare != nil {
		ok, err := c.prepareDaemon(ctx)
		if err != nil || !ok {
			return nil, err
		}
	}
	var err error
	c.old, err = c.env.Backend(c.env.Profile)
	if err != nil {
		return nil, err
	}
	defer c.old.Close()
	defer c.cleanup(ctx)
	if err := c.startBoxes(ctx); err != nil {
		return c.rows(), err
	}
	if err := c.seal(ctx); err != nil {
		return c.rows(), err
	}
	if err := c.restartEngine(ctx, "restart", c.restart); err != nil {
		return c.rows(), err
	}
	cctx, cancel := cleanupContext(ctx, c.env.Policy)
	defer cancel()
	if err := c.checkCompute(cctx); err != nil {
		return c.rows(), err
	}
	if err := c.recoverBoxes(cctx); err != nil {
		return c.rows(), err
	}
	return c.rows(), c.checkGone(cctx)
}

func (c *restartCase) rows() []RestartRow {
	out := make([]RestartRow, 0, len(c.boxes))
	for _, b := range c.boxes {
		out = append(out, b.row)
	}
	return out
}

// prepareDaemon restarts the daemon into the case's mode before any
// sandbox exists, and checks /info says so; ok is false when it does not
// (the case is then not run further).
func (c *restartCase) prepareDaemon(ctx context.Context) (bool, error) {
	if err := c.restartEngine(ctx, "restart into "+modeName(c.mode), c.prepare); err != nil {
		return false, err
	}
	info, err := c.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return false, fmt.Errorf("/info after the restart into %s: %w", modeName(c.mode), err)
	}
	return c.rec.Equal(c.name("/info LiveRestoreEnabled after the restart into it"), c.mode, info.Info.LiveRestoreEnabled), nil
}

// restoreDaemon returns the daemon to its configuration after the case.
func (c *restartCase) restoreDaemon(ctx context.Context) {
	if err := c.restartEngine(context.WithoutCancel(ctx), "restart back to the configuration", c.restore); err != nil {
		c.rec.CleanupError(c.name("restart back to the configuration"), err)
		return
	}
	info, err := c.cli.Info(context.WithoutCancel(ctx), client.InfoOptions{})
	if err == nil && info.Info.LiveRestoreEnabled == c.mode {
		err = fmt.Errorf("/info LiveRestoreEnabled is still %t", c.mode)
	}
	c.rec.CleanupError(c.name("daemon back to its configuration"), err)
}

// startBoxes starts the idle, busy and stopped sandboxes on the old
// controller, each persisting through its own file store.
func (c *restartCase) startBoxes(ctx context.Context) error {
	for _, name := range []string{"idle", "busy", "stopped"} {
		b := &restartBox{name: name, store: &restartStore{path: filepath.Join(c.dir, name+".record.json")}, owner: &trackedOwner{},
			row: RestartRow{Case: modeName(c.mode), Sandbox: name, Reconciliation: "n/a", Destroy: "n/a"}}
		c.boxes = append(c.boxes, b)
		res, err := c.old.Reserve(c.env.Request(), sandboxapi.Persisted(b.store.persist))
		if err != nil {
			return fmt.Errorf("%s: reserve: %w", name, err)
		}
		b.res = res
		b.owner.set(res)
		c.rec.Track(b.owner)
		if err := b.store.persist(ctx, res.RecoveryRecord()); err != nil {
			return fmt.Errorf("%s: store the reservation's record: %w", name, err)
		}
		c.env.Log("%s: starting sandbox %s (%s)", modeName(c.mode), name, res.ID())
		sb, err := res.Start(ctx)
		if err != nil {
			return fmt.Errorf("%s: start: %w", name, err)
		}
		switch name {
		case "busy":
			pr, err := sb.ReserveProcess(probeSpec("sleep", "1000"))
			if err == nil {
				_, err = pr.Start(ctx)
			}
			if err != nil {
				return fmt.Errorf("%s: start `qualbox-probe sleep 1000`: %w", name, err)
			}
		case "stopped":
			if err := sb.Stop(ctx); err != nil {
				return fmt.Errorf("%s: stop: %w", name, err)
			}
		}
	}
	return nil
}

// seal seals every store, reads back the record each holds (the last one
// the old controller stored) and records the compute containers' state.
func (c *restartCase) seal(ctx context.Context) error {
	cctx, cancel := cleanupContext(ctx, c.env.Policy)
	defer cancel()
	for _, b := range c.boxes {
		b.store.setSealed(true)
		saved, err := sandboxapi.ReadRecoveryRecordFile(b.store.path)
		if err != nil {
			return fmt.Errorf("%s: read the stored record: %w", b.name, err)
		}
		b.saved = saved
		b.records = []sandboxapi.RecoveryRecord{saved}
		b.owner.set(recordOwner{r: saved})
		b.row.Saved = describeRecord(saved)
		c.rec.Observe(c.name(b.name+": record saved before the restart"), saved)
		state, pid, err := c.compute(cctx, saved)
		if err != nil {
			return err
		}
		b.row.ComputeBefore, b.pidBefore = state, pid
	}
	return nil
}

// compute is the compute container's state by exact name and, running,
// its keeper's PID.
func (c *restartCase) compute(ctx context.Context, r sandboxapi.RecoveryRecord) (string, int, error) {
	id, state, err := computeState(ctx, c.env.Engine, r)
	if err != nil || state != "running" {
		return state, 0, err
	}
	in, err := c.env.Engine.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return "", 0, fmt.Errorf("inspect compute %s: %w", id, err)
	}
	if in.Container.State == nil {
		return state, 0, nil
	}
	return state, in.Container.State.Pid, nil
}

// restartEngine runs argv and waits for the Engine; it records what the
// command did, whether the Engine answers again and whether the event
// stream opened before the command ended (the daemon went away). The
// returned error is for an Engine that does not answer again: nothing
// after can be judged.
func (c *restartCase) restartEngine(ctx context.Context, label string, argv []string) error {
	name := func(s string) string { return c.name(label + ": " + s) }
	before, err := c.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return fmt.Errorf("%s: /info before: %w", label, err)
	}
	w := watchEvents(ctx, c.cli)
	defer w.stop()
	c.env.Log("%s: %s: %s", modeName(c.mode), label, strings.Join(argv, " "))
	start := time.Now()
	status, output, cmdErr := runRestartCommand(ctx, argv, c.p.restartTimeout())
	took := time.Since(start)
	c.rec.Check(name(fmt.Sprintf("command exits 0 within %s", c.p.restartTimeout())), "exit status 0",
		fmt.Sprintf("%s after %s", status, took.Round(time.Millisecond)), cmdErr == nil)
	ready, readyErr := waitReady(ctx, c.cli, c.p.readyTimeout())
	c.rec.Check(name(fmt.Sprintf("the Engine answers /_ping within %s of the command's end", c.p.readyTimeout())), "answered",
		map[bool]string{true: "answered after " + ready.Round(time.Millisecond).String(), false: errText(readyErr)}[readyErr == nil], readyErr == nil)
	ended, ok := w.ended(streamEndGrace)
	c.rec.Check(name("the event stream opened before the command ended (the daemon that served it went away)"), "ended", ended, ok)
	events, count := w.seen()
	fact := map[string]any{
		"command": argv, "status": status, "output": output, "commandMs": took.Milliseconds(), "readyMs": ready.Milliseconds(),
		"eventStream": ended, "events": events, "eventCount": count,
		"daemonBefore": map[string]any{"id": before.Info.ID, "liveRestoreEnabled": before.Info.LiveRestoreEnabled},
	}
	defer func() { c.rec.Observe(c.name(label), fact) }()
	if readyErr != nil {
		return fmt.Errorf("%s: the Engine does not answer after %s: %w", label, strings.Join(argv, " "), readyErr)
	}
	after, err := c.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return fmt.Errorf("%s: /info after: %w", label, err)
	}
	fact["daemonAfter"] = map[string]any{"id": after.Info.ID, "liveRestoreEnabled": after.Info.LiveRestoreEnabled}
	return nil
}

// checkCompute checks what the restart did to each compute container:
// with live-restore off the daemon stops running containers at shutdown
// (exited afterwards), with it on they keep running with the same keeper;
// a stopped sandbox's compute stays absent either way. A command that
// restarted nothing fails the off case here too.
func (c *restartCase) checkCompute(ctx context.Context) error {
	for _, b := range c.boxes {
		state, pid, err := c.compute(ctx, b.saved)
		if err != nil {
			return err
		}
		b.row.ComputeAfter = state
		switch {
		case b.row.ComputeBefore != "running":
			// The stopped sandbox: nothing to stop; the row records it.
		case c.mode:
			want := fmt.Sprintf("running, keeper PID %d", b.pidBefore)
			got := fmt.Sprintf("%s, keeper PID %d", state, pid)
			c.rec.Check(c.name(b.name+": compute kept running by live-restore (same keeper)"), want, got, want == got)
		default:
			c.rec.Equal(c.name(b.name+": running compute stopped by the restart"), "exited", state)
		}
	}
	return nil
}

// recoverBoxes has a fresh controller reconcile each saved record, persist
// the owner's record when reconciliation advanced it, and destroy.
func (c *restartCase) recoverBoxes(ctx context.Context) error {
	env := c.env
	var err error
	c.fresh, err = driver.New(driver.Config{
		Profile: env.Profile, Endpoint: env.Endpoint, Namespace: env.Namespace,
		SpillDirectory: filepath.Join(c.dir, "spill-recovery"), ImageID: env.ImageID, User: env.User,
	})
	if err != nil {
		return err
	}
	for _, b := range c.boxes {
		c.recoverBox(ctx, b)
	}
	return nil
}

func (c *restartCase) recoverBox(ctx context.Context, b *restartBox) {
	name := func(s string) string { return c.name(b.name + ": " + s) }
	out, err := c.fresh.Reconcile(ctx, b.saved)
	b.row.Reconciliation = string(out.Kind)
	switch {
	case err != nil:
		b.row.Reconciliation = "error: " + err.Error()
	case out.Kind == sandboxapi.ReconciliationConflict:
		b.row.Reconciliation += ": " + out.Reason
	}
	c.rec.Check(name("a fresh controller reconciles the record saved before the restart"), string(sandboxapi.ReconciliationMatched), b.row.Reconciliation,
		err == nil && out.Kind == sandboxapi.ReconciliationMatched)
	if out.Owner == nil {
		return
	}
	owner := out.Owner
	b.owner.set(owner)
	// A record saved after start holds identified resources only, so
	// Reconcile advances nothing that would need storing before cleanup
	// (controller-death covers "creating"); its names and IDs join the
	// absence check all the same.
	b.records = append(b.records, owner.RecoveryRecord())
	derr := owner.Destroy(ctx)
	b.row.Destroy = "ok"
	if derr != nil {
		b.row.Destroy = "error: " + derr.Error()
	}
	c.rec.Check(name("destroy by the recovered owner"), "ok", b.row.Destroy, derr == nil)
	b.recovered = derr == nil
}

// checkGone checks, per sandbox, that none of its resources remains, by
// exact names and IDs.
func (c *restartCase) checkGone(ctx context.Context) error {
	for _, b := range c.boxes {
		left, err := leftovers(ctx, c.env.Engine, b.records...)
		if err != nil {
			return err
		}
		b.row.Left = len(left)
		b.recovered = b.recovered && len(left) == 0
		got := "none"
		if len(left) > 0 {
			got = strings.Join(left, ", ")
		}
		c.rec.Check(c.name(b.name+": no resource of the sandbox remains (exact names and IDs)"), "none", got, len(left) == 0)
	}
	return nil
}

// cleanup removes, through its original owner with its store reopened,
// every sandbox the fresh controller did not remove; failures are cleanup
// errors. It also closes the fresh controller.
func (c *restartCase) cleanup(ctx context.Context) {
	for _, b := range c.boxes {
		if b.recovered || b.res == nil {
			continue
		}
		b.store.setSealed(false)
		b.owner.set(b.res)
		stopErr, destroyErr := stopAndDestroy(ctx, c.env.Policy, b.res)
		c.rec.CleanupError(c.name(b.name+": stop by the original owner"), stopErr)
		c.rec.CleanupError(c.name(b.name+": destroy by the original owner"), destroyErr)
	}
	if c.fresh != nil {
		c.fresh.Close()
	}
}

// restartDataset is the dataset part: an image built before the first
// restart, mounted by subpath in a sandbox started after it
// (docs/contract.md#datasets). An Engine without image mounts or the
// containerd image store makes it not applicable, with admission's reason.
type restartDataset struct {
	subpath string
	spec    dataset.Spec
	img     dataset.Image
	cli     *client.Client
	// reason is why the part does not apply, or "".
	reason string
}

// prepare builds the image and admits a backend that selects it.
func (d *restartDataset) prepare(ctx context.Context, env *Env, rec *Record, cli *client.Client, prof profiles.Profile) error {
	arch := "arm64"
	if prof.Image.Architecture == "arm64" {
		arch = "amd64"
	}
	d.spec = dataset.Reference(arch)
	img, err := dataset.Build(ctx, cli, d.spec)
	if err != nil {
		return fmt.Errorf("build dataset image: %w", err)
	}
	d.img, d.cli = img, cli
	rec.Observe("dataset image (built before the restart)", map[string]any{"id": img.ID, "architecture": img.Architecture})
	b, err := datasetBackend(env, "dataset-admission", d.datasets())
	if err != nil {
		return err
	}
	defer b.Close()
	_, err = b.Admit(ctx)
	if reason, applicable := datasetsApplicable(err); !applicable {
		d.reason = reason
		rec.Observe("dataset after restart", "not_applicable: "+reason)
		return nil
	}
	rec.Check("dataset after restart: admission with the dataset before the restart", "admitted", errText(err), err == nil)
	if err != nil {
		d.reason = "admission failed: " + err.Error()
	}
	return nil
}

func (d *restartDataset) datasets() []driver.Dataset {
	sub := "corpus"
	return []driver.Dataset{{Name: "ref", ImageID: d.img.ID, Subpath: &sub}}
}

// afterRestart starts a sandbox that mounts the image by subpath, lists
// the mount from inside and destroys the sandbox.
func (d *restartDataset) afterRestart(ctx context.Context, env *Env, rec *Record) error {
	if d.img.ID == "" || d.reason != "" {
		return nil
	}
	ds := d.datasets()
	*ds[0].Subpath = d.subpath
	b, err := datasetBackend(env, "dataset", ds)
	if err != nil {
		return err
	}
	defer b.Close()
	rec.Request("dataset after restart", ds)
	res, err := execOnceOn(ctx, env, rec, b, probeSpec("tree", "/datasets/ref"), nil)
	rec.Check("dataset after restart: a sandbox mounting the image by subpath starts and runs", "nil", errText(err), err == nil)
	if err != nil {
		return nil
	}
	var r facts.Result
	if err := json.Unmarshal(res.Stdout, &r); err != nil {
		rec.Check("dataset after restart: the probe's tree result", "one JSON result", fmt.Sprintf("%q: %v", res.Stdout, err), false)
		return nil
	}
	rec.Observe("dataset after restart: probe result", r)
	want, _ := d.spec.Expected("corpus")
	rec.Equal("dataset after restart: /datasets/ref shows the image's corpus exactly", lines(want), treeLines(r))
	return nil
}

// remove removes the dataset image by exact ID (a cleanup error when that
// fails; already gone is fine).
func (d *restartDataset) remove(ctx context.Context, env *Env, rec *Record) {
	if d.img.ID == "" {
		return
	}
	cctx, cancel := cleanupContext(ctx, env.Policy)
	defer cancel()
	if err := dataset.Remove(cctx, d.cli, d.img.ID); err != nil && !cerrdefs.IsNotFound(err) {
		rec.CleanupError("remove dataset image "+d.img.ID, err)
	}
}
