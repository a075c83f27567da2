package driver

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/qualbox/qualbox/sandboxapi"
)

// sandbox is one reserved, then started, sandbox. It implements
// sandboxapi.Reservation, sandboxapi.Sandbox and sandboxapi.CleanupOwner.
//
// # States
//
// The recovery record's Phase is the durable state, checkpointed before
// each effect it covers (docs/contract.md#recovery):
//
//	reserved --Start--> starting --resources acquired, compute verified--> running
//	running  --Stop, or a process failure--> stopping --compute removed--> stopped
//	stopped  --Destroy--> destroying --accessor, volume, network removed--> destroyed
//	starting --startup failure--> (Start's own Destroy) destroying --> destroyed
//	running  --Destroy--> stopping --> destroying --> destroyed
//	any      --a dispatched create's name is absent at cleanup--> uncertain
//	uncertain, stopping, destroying --cleanup retried--> stopped or destroyed
//
// A Destroy of a sandbox that created nothing ends in destroyed if
// authority was verified, else the record stays reserved (Start failed
// before admission). Stop and Destroy are retryable from every phase;
// uncertain keeps ownership until a retry identifies or rules out the
// late resource.
//
// The in-memory flags hold what the record cannot, each set once and never
// cleared:
//
//	startCalled      Start entered (reserved -> starting); a second Start is refused
//	startCancel/Done the Start in flight: joinStart cancels it and waits, so
//	                 cleanup never races an acquisition
//	started          Start succeeded (starting -> running)
//	shutdown         the first public Stop or Destroy entered; a Start that
//	                 has not begun by then is refused
//	computeStopping  stopLocked began removing compute; no process can be
//	                 reserved from then on
//	proc             the sandbox's one process reservation
//	importing        imports in flight (counted, not once-only): no process
//	                 can be reserved while one streams
//	dispatched       roles whose create was sent with an unknown outcome
//	undispatched     roles recorded "creating" whose create was never sent
//	                 (cancelled in between, and the revert to "planned"
//	                 failed to persist); cleanup reverts them itself
//	daemonVerified   this Stop or Destroy call already re-admitted the daemon
//	                 (reset at each call)
//
// # Locks
//
// Lock order: cleanupMu, then ckMu, then mu. cleanupMu serializes Stop and
// Destroy (and guards daemonVerified); ckMu serializes checkpoints so
// persisted records are totally ordered, and the caller's persist function
// runs under it; mu guards the record and the flags and is held only for
// short reads and writes, never across an Engine call, a persist or a
// process method. Backend.mu and process.mu are leaves: they may be taken
// while cleanupMu is held, never while ckMu or mu is. A process reaches its
// sandbox only through Stop, which takes the order from the top. The
// daemon ID lives only in the record's authority.
type sandbox struct {
	b       *Backend
	policy  sandboxapi.Policy
	persist sandboxapi.PersistFunc

	// cleanupMu serializes Stop and Destroy.
	cleanupMu sync.Mutex
	// daemonVerified, guarded by cleanupMu, records that this Stop or
	// Destroy call already repeated daemon admission: once per call, not
	// once per removed resource.
	daemonVerified bool

	// ckMu serializes checkpoints so persisted records are totally ordered.
	ckMu sync.Mutex

	// mu guards everything below.
	mu              sync.Mutex
	record          sandboxapi.RecoveryRecord
	startCalled     bool
	startCancel     context.CancelFunc
	startDone       chan struct{}
	started         bool
	shutdown        bool
	computeStopping bool
	effective       sandboxapi.EffectivePolicy
	proc            *process
	dispatched      map[sandboxapi.Role]bool
	undispatched    map[sandboxapi.Role]bool
	importing       int
	// admittedAt is when the daemon admission of the last CheckReady that
	// passed began, and admittedBy the engine it read; process Start
	// takes it once (takeAdmission).
	admittedAt time.Time
	admittedBy *engine
}

var (
	_ sandboxapi.Reservation = (*sandbox)(nil)
	_ sandboxapi.Sandbox     = (*sandbox)(nil)
)

func newSandbox(b *Backend, policy sandboxapi.Policy, persist sandboxapi.PersistFunc, record sandboxapi.RecoveryRecord) *sandbox {
	return &sandbox{b: b, policy: policy, persist: persist, record: record,
		dispatched: map[sandboxapi.Role]bool{}, undispatched: map[sandboxapi.Role]bool{}}
}

// ID returns the sandbox ID, "docker-<operation UUID>".
func (s *sandbox) ID() sandboxapi.SandboxID { return s.record.SandboxID }

// RecoveryRecord returns a copy of the latest recovery record.
func (s *sandbox) RecoveryRecord() sandboxapi.RecoveryRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.record.Clone()
}

// Effective returns the policy read back from the started compute container.
func (s *sandbox) Effective() sandboxapi.EffectivePolicy {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.effective
}

// Workspace returns "/workspace/work".
func (s *sandbox) Workspace() string { return WorkPath }

func (s *sandbox) resource(role sandboxapi.Role) (sandboxapi.RecoveryResource, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.record.Resources {
		if r.Role == role {
			return r, true
		}
	}
	return sandboxapi.RecoveryResource{}, false
}

// checkpoint applies mutate to a copy of the record, validates it, persists
// it through the caller's persist function and only then makes it current.
// Callers checkpoint before each effect the record must cover.
func (s *sandbox) checkpoint(ctx context.Context, mutate func(*sandboxapi.RecoveryRecord)) error {
	s.ckMu.Lock()
	defer s.ckMu.Unlock()
	s.mu.Lock()
	next := s.record.Clone()
	s.mu.Unlock()
	mutate(&next)
	if err := next.Validate(); err != nil {
		return fmt.Errorf("driver: internal recovery record is invalid: %w", err)
	}
	if s.persist != nil {
		if err := s.persist(ctx, next.Clone()); err != nil {
			return &sandboxapi.OperationError{Code: sandboxapi.CodeDriverFailure, Message: "persist recovery record", Err: err}
		}
	}
	s.mu.Lock()
	s.record = next
	s.mu.Unlock()
	return nil
}

func setIdentity(role sandboxapi.Role, id sandboxapi.ResourceIdentity) func(*sandboxapi.RecoveryRecord) {
	return func(r *sandboxapi.RecoveryRecord) {
		for i := range r.Resources {
			if r.Resources[i].Role == role {
				r.Resources[i].Identity = id
			}
		}
	}
}

func setPhase(p sandboxapi.Phase) func(*sandboxapi.RecoveryRecord) {
	return func(r *sandboxapi.RecoveryRecord) { r.Phase = p }
}

// Start admits the Engine and acquires the sandbox's resources
// (docs/contract.md#profiles-and-admission). It is bounded by
// deadlines.startupMs and ctx. On failure it cleans up what it acquired and
// returns the original error (a *sandboxapi.CleanupError if cleanup failed too).
func (s *sandbox) Start(ctx context.Context) (sandboxapi.Sandbox, error) {
	s.mu.Lock()
	if s.startCalled {
		s.mu.Unlock()
		return nil, &sandboxapi.StateError{Message: "sandbox start is once-only"}
	}
	if s.shutdown {
		s.mu.Unlock()
		return nil, &sandboxapi.StateError{Message: "sandbox start cannot follow Stop or Destroy"}
	}
	s.startCalled = true
	ctx, cancel := context.WithTimeout(ctx, s.b.startupTimeout(s.policy))
	s.startCancel = cancel
	s.startDone = make(chan struct{})
	s.mu.Unlock()

	err := s.acquire(ctx)
	cancel()
	if err == nil {
		s.mu.Lock()
		s.started = true
		s.mu.Unlock()
		close(s.startDone)
		return s, nil
	}
	close(s.startDone)
	err = sandboxapi.FromContext(err, "sandbox startup")
	cctx, ccancel := s.cleanupContext(context.WithoutCancel(ctx))
	defer ccancel()
	if cerr := s.destroy(cctx); cerr != nil {
		return nil, &sandboxapi.CleanupError{Original: err, Err: cerr}
	}
	return nil, err
}

func (s *sandbox) cleanupContext(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, s.b.cleanupTimeout(s.policy))
}

// acquire is Start's work, in steps (each checkpointed before its effect,
// as create does):
//
//  1. admitEngine: the controller, the spill directory and the Engine's
//     admission, then the record's verified authority (phase starting);
//  2. createVolume: the storage volume;
//  3. createNetwork: the private network, when the policy is outbound;
//  4. createContainer: compute, verified against its request;
//  5. startWithAccessor: compute started while the export accessor is
//     created;
//  6. running: the started compute verified, the effective policy
//     derived from it, the record's phase running.
func (s *sandbox) acquire(ctx context.Context) error {
	a := &acquisition{s: s, b: s.b}
	if err := a.admitEngine(ctx); err != nil {
		return err
	}
	if err := a.createVolume(ctx); err != nil {
		return err
	}
	if err := a.createNetwork(ctx); err != nil {
		return err
	}
	computeID, err := a.createContainer(ctx, sandboxapi.RoleCompute)
	if err != nil {
		return err
	}
	started, err := a.startWithAccessor(ctx, computeID)
	if err != nil {
		return err
	}
	return a.running(ctx, started)
}

// acquisition is the state of one acquire as its steps fill it.
type acquisition struct {
	s   *sandbox
	b   *Backend
	eng *engine
	adm *Admission
	// record is the recovery record once the authority is verified: its
	// labels and names are what every resource is created and read back
	// with.
	record    sandboxapi.RecoveryRecord
	storage   sandboxapi.RecoveryResource
	networkID string
}

// admitEngine checks the controller and the spill directory, admits the
// Engine and records its verified authority (phase starting).
func (a *acquisition) admitEngine(ctx context.Context) error {
	b, s := a.b, a.s
	if err := checkController(b.profile, b.controller); err != nil {
		return err
	}
	if err := checkSpillDirectory(b.cfg.SpillDirectory); err != nil {
		return err
	}
	eng, err := b.engine()
	if err != nil {
		return err
	}
	a.eng = eng
	adm, err := admit(ctx, eng, b.controller, b.profile, &b.cfg, true)
	if err != nil {
		return err
	}
	a.adm = adm
	if err := s.checkpoint(ctx, func(r *sandboxapi.RecoveryRecord) {
		r.Phase = sandboxapi.PhaseStarting
		r.Authority = sandboxapi.Authority{Kind: sandboxapi.AuthorityVerified, BackendIdentity: adm.Engine.DaemonID}
	}); err != nil {
		return err
	}
	a.record = s.RecoveryRecord()
	a.storage, _ = s.resource(sandboxapi.RoleStorage)
	return nil
}

// createVolume creates the storage volume.
func (a *acquisition) createVolume(ctx context.Context) error {
	eng := a.eng
	_, err := a.s.create(ctx, eng, sandboxapi.RoleStorage, func(ctx context.Context) (string, error) {
		res, err := eng.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: a.storage.Name, Driver: "local", Labels: resourceLabels(a.record, sandboxapi.RoleStorage)})
		return res.Volume.Name, err
	})
	return err
}

// createNetwork creates the private bridge network when the record plans
// one (outbound); an Engine warning on its create is an error.
func (a *acquisition) createNetwork(ctx context.Context) error {
	res, ok := a.s.resource(sandboxapi.RoleNetwork)
	if !ok {
		return nil
	}
	eng := a.eng
	f := false
	in, err := a.s.create(ctx, eng, sandboxapi.RoleNetwork, func(ctx context.Context) (string, error) {
		out, err := eng.cli.NetworkCreate(ctx, res.Name, client.NetworkCreateOptions{
			Driver: "bridge", Scope: "local", EnableIPv6: &f, Labels: resourceLabels(a.record, sandboxapi.RoleNetwork),
		})
		if err == nil && len(out.Warning) > 0 {
			return out.ID, &sandboxapi.UnsupportedError{Message: fmt.Sprintf("Engine warned on network create: %q", out.Warning)}
		}
		return out.ID, err
	})
	if err != nil {
		return err
	}
	a.networkID = in.id
	return nil
}

// createContainer creates the container of role and verifies the
// create's own readback against the request: one inspect per create.
// Create warnings other than the dataset mounts' are an error.
func (a *acquisition) createContainer(ctx context.Context, role sandboxapi.Role) (string, error) {
	b, s, eng := a.b, a.s, a.eng
	platform := &ocispec.Platform{OS: "linux", Architecture: b.profile.Image.Architecture}
	res, _ := s.resource(role)
	spec := b.workloadSpec(a.record, s.policy, role, a.storage.Name, a.networkID)
	in, err := s.create(ctx, eng, role, func(ctx context.Context) (string, error) {
		out, err := eng.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
			Name: res.Name, Config: spec.config, HostConfig: spec.host,
			NetworkingConfig: &network.NetworkingConfig{}, Platform: platform,
		})
		mounts := 0
		if role == sandboxapi.RoleCompute {
			mounts = len(b.cfg.Datasets)
		}
		if err == nil && !acceptableCreateWarnings(out.Warnings, mounts) {
			return out.ID, &CreateWarningError{Role: role, Datasets: mounts, Warnings: out.Warnings}
		}
		return out.ID, err
	})
	if err != nil {
		return "", err
	}
	if err := b.verifyContainer(*in.container, a.record, s.policy, role, a.storage.Name, a.networkID, false); err != nil {
		return "", err
	}
	return in.id, nil
}

// startWithAccessor starts compute while it creates the export accessor:
// the accessor depends on the volume only, compute's start on compute
// only. Both finish before it returns (also on failure, so cleanup never
// races a create), and the compute create was dispatched first, so the
// Engine sees the same create order. A start failure is reported before
// an accessor failure.
func (a *acquisition) startWithAccessor(ctx context.Context, computeID string) (*inspection, error) {
	var started *inspection
	var startErr, exportErr error
	var wg sync.WaitGroup
	wg.Go(func() { _, exportErr = a.createContainer(ctx, sandboxapi.RoleExport) })
	wg.Go(func() { started, startErr = a.s.startCompute(ctx, a.eng, computeID) })
	wg.Wait()
	if startErr != nil {
		return nil, startErr
	}
	if exportErr != nil {
		return nil, exportErr
	}
	return started, nil
}

// running verifies the started compute, derives the effective policy
// from it and records the phase running.
func (a *acquisition) running(ctx context.Context, started *inspection) error {
	s := a.s
	if err := a.b.verifyContainer(*started.container, a.record, s.policy, sandboxapi.RoleCompute, a.storage.Name, a.networkID, true); err != nil {
		return err
	}
	s.mu.Lock()
	s.effective = effectiveFrom(a.adm.Engine.DaemonID, *started.container)
	s.mu.Unlock()
	if err := s.effective.Validate(); err != nil {
		return fmt.Errorf("driver: effective policy: %w", err)
	}
	return s.checkpoint(ctx, setPhase(sandboxapi.PhaseRunning))
}

// create acquires one resource: checkpoint "creating", dispatch, inspect,
// verify ownership, checkpoint "identified". It returns the inspection, the
// resource's readback. A create the Engine answered
// with an error did not happen and reverts to "planned"; a create whose
// outcome is unknown (transport failure, deadline) stays "creating".
func (s *sandbox) create(ctx context.Context, eng *engine, role sandboxapi.Role, do func(context.Context) (string, error)) (*inspection, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.checkpoint(ctx, setIdentity(role, sandboxapi.ResourceIdentity{Kind: sandboxapi.IdentityCreating})); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		// Not dispatched: the original owner knows it and can say so. If
		// that revert does not persist, the owner still knows, and its
		// cleanup reverts the record (removeRole).
		if rerr := s.checkpoint(context.WithoutCancel(ctx), setIdentity(role, sandboxapi.ResourceIdentity{Kind: sandboxapi.IdentityPlanned})); rerr != nil {
			s.mu.Lock()
			s.undispatched[role] = true
			s.mu.Unlock()
			return nil, errors.Join(err, rerr)
		}
		return nil, err
	}
	s.mu.Lock()
	s.dispatched[role] = true
	s.mu.Unlock()
	dctx, dcancel := dispatchContext(ctx, s.b.cleanupTimeout(s.policy))
	id, err := do(dctx)
	dcancel()
	if err != nil {
		var unsupported *sandboxapi.UnsupportedError
		if errors.As(err, &unsupported) {
			return nil, err // created with warnings: keep "creating" so cleanup identifies and removes it
		}
		if engineAnswered(err) {
			s.mu.Lock()
			delete(s.dispatched, role)
			s.mu.Unlock()
			if rerr := s.checkpoint(context.WithoutCancel(ctx), setIdentity(role, sandboxapi.ResourceIdentity{Kind: sandboxapi.IdentityPlanned})); rerr != nil {
				return nil, errors.Join(engineFailure(err, "create %s", role), rerr)
			}
		}
		return nil, engineFailure(err, "create %s resource", role)
	}
	in, err := s.inspectOwnedRef(ctx, eng, role, id)
	if err != nil {
		return nil, err
	}
	if in.id != id {
		return nil, &sandboxapi.StateError{Message: fmt.Sprintf("%s create returned %s but inspection found %s", role, id, in.id)}
	}
	if err := checkRequested(role, in); err != nil {
		return nil, err
	}
	if err := s.checkpoint(ctx, setIdentity(role, sandboxapi.ResourceIdentity{Kind: sandboxapi.IdentityIdentified, ID: in.id, Fingerprint: in.fingerprint})); err != nil {
		return nil, err
	}
	s.mu.Lock()
	delete(s.dispatched, role)
	s.mu.Unlock()
	return in, nil
}

// dispatchContext is the context a dispatched create runs under. The
// caller's cancellation is honoured before dispatch and at the next step,
// never by cutting the request in flight: a create cut mid-request has an
// unknown outcome, and cleanup could only call it uncertain
// (docs/contract.md#cleanup). The caller's deadline still bounds it, and
// so does bound (the cleanup deadline) from now, whichever comes first: a
// Stop or Destroy that waits for Start to settle never waits longer than
// its own cleanup deadline for a hung create, which then stays the
// "uncertain" case cleanup already handles.
func dispatchContext(ctx context.Context, bound time.Duration) (context.Context, context.CancelFunc) {
	dl := time.Now().Add(bound)
	if cdl, ok := ctx.Deadline(); ok && cdl.Before(dl) {
		dl = cdl
	}
	return context.WithDeadline(context.WithoutCancel(ctx), dl)
}

// engineAnswered reports whether err carries an Engine HTTP reply that
// rejected the request (so the effect did not happen).
func engineAnswered(err error) bool {
	return cerrdefs.IsConflict(err) || cerrdefs.IsInvalidArgument(err) || cerrdefs.IsNotFound(err) ||
		cerrdefs.IsPermissionDenied(err) || cerrdefs.IsFailedPrecondition(err) || cerrdefs.IsNotImplemented(err)
}

// inspectOwned inspects the identified resource of role and checks that it
// is exactly the owned one.
func (s *sandbox) inspectOwned(ctx context.Context, eng *engine, role sandboxapi.Role) (*inspection, error) {
	res, _ := s.resource(role)
	return s.inspectOwnedRef(ctx, eng, role, res.Identity.ID)
}

func (s *sandbox) inspectOwnedRef(ctx context.Context, eng *engine, role sandboxapi.Role, ref string) (*inspection, error) {
	res, _ := s.resource(role)
	in, err := inspectResource(ctx, eng, role, ref)
	if err != nil {
		return nil, err
	}
	if in == nil {
		return nil, &sandboxapi.OperationError{Code: sandboxapi.CodeDriverFailure, Message: fmt.Sprintf("%s resource %s vanished", role, ref)}
	}
	if err := checkOwned(in, s.RecoveryRecord(), res); err != nil {
		return nil, err
	}
	return in, nil
}

// startCompute prepares the workspace in the created compute container,
// starts it and reads it back.
//
// The Engine mounts the container's dataset subpaths both for the archive
// request that prepares the workspace and for the start, so a subpath it
// cannot mount inside its image fails either one; that refusal is a
// *DatasetSubpathError, without the Engine's host paths.
func (s *sandbox) startCompute(ctx context.Context, eng *engine, computeID string) (*inspection, error) {
	if err := s.prepareWork(ctx, eng, computeID); err != nil {
		if de := datasetSubpathFailure(err, s.b.cfg.Datasets); de != nil {
			return nil, de
		}
		return nil, err
	}
	if _, err := eng.cli.ContainerStart(ctx, computeID, client.ContainerStartOptions{}); err != nil {
		if de := datasetSubpathFailure(err, s.b.cfg.Datasets); de != nil {
			return nil, de
		}
		return nil, engineFailure(err, "start compute container %s", computeID)
	}
	return s.inspectOwned(ctx, eng, sandboxapi.RoleCompute)
}

// prepareWork creates /workspace/work owned by the workload through the
// archive endpoint: the volume root and a Docker-created WorkingDir are
// owned by root, and the workload has no capability to fix that.
func (s *sandbox) prepareWork(ctx context.Context, eng *engine, computeID string) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeDir, Name: "work/", Mode: 0o755,
		Uid: int(s.b.cfg.User.UID), Gid: int(s.b.cfg.User.GID), ModTime: time.Unix(0, 0), Format: tar.FormatPAX,
	}); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if _, err := eng.cli.CopyToContainer(ctx, computeID, client.CopyToContainerOptions{
		DestinationPath: WorkspacePath, Content: &buf,
	}); err != nil {
		return engineFailure(err, "prepare %s in compute container %s", WorkPath, computeID)
	}
	return nil
}

// effectiveFrom derives the effective policy from the started compute
// container's readback (verifyContainer already compared each field with
// the request): CPUs, memory and PIDs from HostConfig, tmpfs sizes from the
// Tmpfs options, the network from NetworkMode.
func effectiveFrom(daemonID string, c container.InspectResponse) sandboxapi.EffectivePolicy {
	h := c.HostConfig
	pids := int64(0)
	if h.PidsLimit != nil {
		pids = *h.PidsLimit
	}
	network := sandboxapi.NetworkOutbound
	if h.NetworkMode == "none" {
		network = sandboxapi.NetworkIsolated
	}
	return sandboxapi.EffectivePolicy{
		BackendIdentity: daemonID,
		Isolation:       sandboxapi.IsolationContainer,
		Resources: sandboxapi.Resources{
			CPUs: float64(h.NanoCPUs) / 1e9, MemoryBytes: h.Memory, PIDs: pids,
		},
		TemporaryStorage: sandboxapi.TemporaryStorage{
			HomeBytes: tmpfsSize(h.Tmpfs[HomePath]), TempBytes: tmpfsSize(h.Tmpfs[TempPath]),
		},
		Network:            sandboxapi.Network{Kind: network},
		NonRoot:            c.Config.User != "" && c.Config.User != "0" && !strings.HasPrefix(c.Config.User, "0:") && c.Config.User != "root",
		ReadOnlyRoot:       h.ReadonlyRootfs,
		WorkspaceDiskQuota: sandboxapi.WorkspaceDiskQuota{Kind: sandboxapi.QuotaNotRequested},
	}
}

// tmpfsSize returns the size= option of tmpfs mount options in bytes, or 0.
func tmpfsSize(options string) int64 {
	for _, opt := range strings.Split(options, ",") {
		if v, ok := strings.CutPrefix(opt, "size="); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return 0
}

// joinStart cancels a Start in progress and waits for it to settle, so
// cleanup never races an acquisition.
func (s *sandbox) joinStart() {
	s.mu.Lock()
	cancel, done := s.startCancel, s.startDone
	s.mu.Unlock()
	if cancel == nil {
		return
	}
	select {
	case <-done:
	default:
		cancel()
		<-done
	}
}

// Stop force-removes the exact compute container; volume and accessor stay
// (docs/contract.md#cleanup). It is bounded by deadlines.cleanupMs and ctx, and
// retryable.
func (s *sandbox) Stop(ctx context.Context) error {
	s.markShutdown()
	s.joinStart()
	ctx, cancel := s.cleanupContext(ctx)
	defer cancel()
	s.cleanupMu.Lock()
	defer s.cleanupMu.Unlock()
	s.daemonVerified = false
	return s.stopLocked(ctx)
}

// Destroy removes compute, export accessor, volume and network by exact ID
// (docs/contract.md#cleanup). It can be retried after a partial failure.
func (s *sandbox) Destroy(ctx context.Context) error {
	s.markShutdown()
	s.joinStart()
	ctx, cancel := s.cleanupContext(ctx)
	defer cancel()
	return s.destroy(ctx)
}

func (s *sandbox) markShutdown() {
	s.mu.Lock()
	s.shutdown = true
	s.mu.Unlock()
}

func (s *sandbox) destroy(ctx context.Context) error {
	s.cleanupMu.Lock()
	defer s.cleanupMu.Unlock()
	s.daemonVerified = false
	if s.untouched() {
		// Nothing was created. A record that reached verified authority
		// still ends durably in destroyed, not in starting.
		rec := s.RecoveryRecord()
		if rec.Authority.Kind == sandboxapi.AuthorityVerified && rec.Phase != sandboxapi.PhaseDestroyed {
			return s.checkpoint(ctx, setPhase(sandboxapi.PhaseDestroyed))
		}
		return nil
	}
	var errs []error
	// lateContainer: this owner dispatched a compute or export create whose
	// outcome is unknown, so it may still land. It mounts the storage volume
	// by name, and the Engine creates a missing named volume on container
	// create, so removing storage now would let the late create bring back
	// an unlabelled volume under the owned name that no owner could clean
	// up (reconcile conflicts on it). Storage stays owned until a retry or
	// a fresh controller, once quiescent, identifies the container. A
	// recovered owner runs after quiescence (Reconcile's precondition): an
	// absent name there will not land, and storage is removed.
	lateContainer := false
	var uncertain *UncertainError
	if err := s.stopLocked(ctx); err != nil {
		if !errors.As(err, &uncertain) {
			return err
		}
		// An uncertain compute create must not keep the rest alive.
		errs = append(errs, err)
		lateContainer = uncertain.Dispatched
	}
	if err := s.checkpoint(ctx, setPhase(sandboxapi.PhaseDestroying)); err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, role := range []sandboxapi.Role{sandboxapi.RoleExport, sandboxapi.RoleStorage, sandboxapi.RoleNetwork} {
		if _, ok := s.resource(role); !ok || (role == sandboxapi.RoleStorage && lateContainer) {
			continue
		}
		if err := s.removeRole(ctx, role); err != nil {
			errs = append(errs, err)
			if role == sandboxapi.RoleExport && errors.As(err, &uncertain) && uncertain.Dispatched {
				lateContainer = true
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return s.checkpoint(ctx, setPhase(sandboxapi.PhaseDestroyed))
}

// untouched reports whether no resource was ever created or dispatched:
// every resource planned. Removal is then a no-op.
func (s *sandbox) untouched() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.record.Resources {
		if r.Identity.Kind != sandboxapi.IdentityPlanned {
			return false
		}
	}
	return true
}

func (s *sandbox) stopLocked(ctx context.Context) error {
	if s.untouched() {
		return nil
	}
	s.mu.Lock()
	s.computeStopping = true
	proc := s.proc
	phase := s.record.Phase
	s.mu.Unlock()
	if phase == sandboxapi.PhaseDestroyed {
		return nil // a late stop, e.g. from a process failure, after destroy
	}
	if proc != nil {
		proc.closeAdmission()
	}
	if phase != sandboxapi.PhaseStopped && phase != sandboxapi.PhaseDestroying && phase != sandboxapi.PhaseDestroyed {
		if err := s.checkpoint(ctx, setPhase(sandboxapi.PhaseStopping)); err != nil {
			return err
		}
	}
	if err := s.removeRole(ctx, sandboxapi.RoleCompute); err != nil {
		if proc != nil {
			proc.releaseStreams()
		}
		return err
	}
	if proc != nil {
		proc.computeStopped()
	}
	if phase == sandboxapi.PhaseDestroying || phase == sandboxapi.PhaseDestroyed {
		return nil
	}
	return s.checkpoint(ctx, setPhase(sandboxapi.PhaseStopped))
}

// removeRole removes the resource of role by its exact identity. A planned
// resource was never created. A creating resource is identified by its
// exact planned name and labels first (and that identification is
// checkpointed); if the name is absent its outcome stays uncertain, unless
// this owner knows it never sent the create: then the record returns to
// planned.
func (s *sandbox) removeRole(ctx context.Context, role sandboxapi.Role) error {
	eng, err := s.b.engine()
	if err != nil {
		return err
	}
	if err := s.verifyDaemon(ctx, eng); err != nil {
		return err
	}
	res, _ := s.resource(role)
	switch res.Identity.Kind {
	case sandboxapi.IdentityPlanned:
		return nil
	case sandboxapi.IdentityCreating:
		in, err := inspectResource(ctx, eng, role, res.Name)
		if err != nil {
			return err
		}
		if in == nil {
			s.mu.Lock()
			dispatched, undispatched := s.dispatched[role], s.undispatched[role]
			s.mu.Unlock()
			if undispatched && !dispatched {
				// This owner never sent the create and the name is
				// absent: nothing can land, the resource is planned.
				if err := s.checkpoint(ctx, setIdentity(role, sandboxapi.ResourceIdentity{Kind: sandboxapi.IdentityPlanned})); err != nil {
					return err
				}
				s.mu.Lock()
				delete(s.undispatched, role)
				s.mu.Unlock()
				return nil
			}
			if err := s.checkpoint(ctx, setPhase(sandboxapi.PhaseUncertain)); err != nil {
				return err
			}
			return &UncertainError{Role: role, Name: res.Name, Dispatched: dispatched}
		}
		if err := checkOwned(in, s.RecoveryRecord(), res); err != nil {
			return err
		}
		if err := s.checkpoint(ctx, setIdentity(role, sandboxapi.ResourceIdentity{Kind: sandboxapi.IdentityIdentified, ID: in.id, Fingerprint: in.fingerprint})); err != nil {
			return err
		}
		res, _ = s.resource(role)
	}
	return removeByID(ctx, eng, role, res.Identity.ID)
}

// verifyDaemon repeats daemon admission and the identity check before a
// cleanup effect: a changed profile or daemon keeps cleanup ownership but is
// never acted on. Callers hold cleanupMu; it runs once per Stop or Destroy.
func (s *sandbox) verifyDaemon(ctx context.Context, eng *engine) error {
	if s.daemonVerified {
		return nil
	}
	if err := s.checkDaemon(ctx, eng); err != nil {
		return err
	}
	s.daemonVerified = true
	return nil
}

// checkDaemon repeats daemon admission (controller, /version, /info) and
// requires the daemon the record's authority names. Exec, import, export
// and cleanup run it before acting (docs/contract.md#profiles-and-admission).
// Before authority is verified there is nothing to compare and it returns
// nil.
func (s *sandbox) checkDaemon(ctx context.Context, eng *engine) error {
	rec := s.RecoveryRecord()
	if rec.Authority.Kind != sandboxapi.AuthorityVerified {
		return nil
	}
	id, err := s.b.admitDaemon(ctx, eng)
	if err != nil {
		return err
	}
	if id != rec.Authority.BackendIdentity {
		return &sandboxapi.StateError{Message: fmt.Sprintf("Engine at %s is daemon %q, the record's resources belong to %q", eng.socket, id, rec.Authority.BackendIdentity)}
	}
	return nil
}

// checkComputeActive inspects the owned compute container (exact ID,
// labels, fingerprint) and requires it running: exec create and exec start
// never reach a replaced, stopped or paused workload.
func (s *sandbox) checkComputeActive(ctx context.Context, eng *engine) error {
	in, err := s.inspectOwned(ctx, eng, sandboxapi.RoleCompute)
	if err != nil {
		return err
	}
	st := in.container.State
	if st == nil || !st.Running || st.Paused || st.Restarting || st.Dead {
		return &sandboxapi.StateError{Message: fmt.Sprintf("compute container %s is not running (%+v)", in.id, st)}
	}
	return nil
}

// checkAccessor re-inspects the export accessor before an export: still
// the owned container with its recorded fingerprint, never started, and
// mounting the workspace read-only without network, exactly as created.
func (s *sandbox) checkAccessor(ctx context.Context, eng *engine) error {
	in, err := s.inspectOwned(ctx, eng, sandboxapi.RoleExport)
	if err != nil {
		return err
	}
	storage, _ := s.resource(sandboxapi.RoleStorage)
	return s.b.verifyContainer(*in.container, s.RecoveryRecord(), s.policy, sandboxapi.RoleExport, storage.Name, "", false)
}

// UncertainError reports a resource whose create was dispatched (or
// recovered as "creating") but whose exact name is absent: the create may
// still land, so ownership is retained and cleanup can be retried.
type UncertainError struct {
	Role       sandboxapi.Role
	Name       string
	Dispatched bool
}

func (e *UncertainError) Error() string {
	return fmt.Sprintf("driver: %s resource %s: create outcome unknown and the name is absent; retry cleanup once the previous operation is quiescent", e.Role, e.Name)
}

func (e *UncertainError) Unwrap() error {
	return &sandboxapi.StateError{Message: "resource acquisition outcome is uncertain"}
}

var _ sandboxapi.ReadinessChecker = (*sandbox)(nil)

// CheckReady repeats, on demand, what ReserveProcess and process Start
// check before an exec (docs/contract.md#pool): the sandbox is started,
// running, not stopping, without a reserved process or an import in
// progress (*sandboxapi.StateError otherwise); then daemon admission
// against the record's daemon identity and an inspection of the owned
// compute container requiring it running (preflight), bounded by
// deadlines.startupMs and ctx. When it passes, the process Start that
// follows within handoffAdmission reuses its daemon admission
// (takeAdmission). A changed daemon identity or a replaced or
// stopped compute is a *sandboxapi.StateError; failed admission is an
// *sandboxapi.UnsupportedError.
func (s *sandbox) CheckReady(ctx context.Context) error {
	s.mu.Lock()
	switch {
	case !s.started:
		s.mu.Unlock()
		return &sandboxapi.StateError{Message: "sandbox is not started"}
	case s.proc != nil:
		s.mu.Unlock()
		return &sandboxapi.StateError{Message: "the sandbox's one process is already reserved"}
	case s.importing > 0:
		s.mu.Unlock()
		return &sandboxapi.StateError{Message: "a workspace import is in progress"}
	case s.computeStopping || s.record.Phase != sandboxapi.PhaseRunning:
		s.mu.Unlock()
		return &sandboxapi.StateError{Message: "sandbox compute is " + string(s.record.Phase)}
	}
	s.mu.Unlock()
	eng, err := s.b.engine()
	if err != nil {
		return err
	}
	began := time.Now()
	if err := s.preflight(ctx, eng, s.checkComputeActive); err != nil {
		return err
	}
	s.mu.Lock()
	s.admittedAt, s.admittedBy = began, eng
	s.mu.Unlock()
	return nil
}

// handoffAdmission is how long after a passed CheckReady's admission
// began the sandbox's process Start may rely on it instead of reading
// /version and /info again (docs/contract.md#pool): the pool's hand-out
// check and the exec that follows it are one admission, not two. The
// compute container is still inspected before the exec create and again
// before the exec start.
const handoffAdmission = time.Second

// takeAdmission reports whether a CheckReady's admission of eng began less
// than handoffAdmission ago, and consumes it: it serves one Start at most.
func (s *sandbox) takeAdmission(eng *engine) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ok := s.admittedBy == eng && time.Since(s.admittedAt) < handoffAdmission
	s.admittedAt, s.admittedBy = time.Time{}, nil
	return ok
}

// execPreflight is process Start's check before the exec create: daemon
// admission and the compute inspection (preflight), or only the
// inspection when a CheckReady admitted eng less than handoffAdmission
// ago (takeAdmission).
func (s *sandbox) execPreflight(ctx context.Context, eng *engine) error {
	if s.takeAdmission(eng) {
		return s.checkComputeActive(ctx, eng)
	}
	return s.preflight(ctx, eng, s.checkComputeActive)
}
