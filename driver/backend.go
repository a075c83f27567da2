package driver

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/qualbox/qualbox/profiles"
	"github.com/qualbox/qualbox/sandboxapi"
)

// Backend is the Docker Engine sandbox backend. It implements
// sandboxapi.Backend. Construction is inert; the Engine connection opens at
// the first Engine operation.
type Backend struct {
	cfg     Config
	profile profiles.Profile
	ns      sandboxapi.Namespace
	socket  string
	// controller is this process's platform; internal tests play another
	// one (darwin/arm64) against a synthetic Engine.
	controller controllerPlatform
	// standaloneBound bounds each Admit, AdmitAs and Reconcile call
	// (StandaloneDeadlineMs); internal tests shorten it.
	standaloneBound time.Duration

	mu     sync.Mutex
	eng    *engine
	closed bool
}

var _ sandboxapi.Backend = (*Backend)(nil)

// New validates cfg and returns an inert Backend. An invalid cfg is a
// *sandboxapi.ValidationError listing every invalid field at once, each
// Issue's path a Config field path such as "Datasets[1].Name"; no Engine,
// file or network access happens.
func New(cfg Config) (*Backend, error) {
	cfg.Datasets = append([]Dataset(nil), cfg.Datasets...)
	prof, ns, socket, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	return &Backend{cfg: cfg, profile: prof, ns: ns, socket: socket, controller: hostController(),
		standaloneBound: sandboxapi.Milliseconds(StandaloneDeadlineMs)}, nil
}

// Profile returns the backend's profile.
func (b *Backend) Profile() profiles.Profile { return b.profile }

// Socket returns the absolute path of the Engine socket the backend uses.
func (b *Backend) Socket() string { return b.socket }

// Support reports the backend identity and admissible network modes
// (docs/contract.md#policy).
func (b *Backend) Support() sandboxapi.Support {
	return sandboxapi.Support{
		BackendID:       BackendID,
		BackendRevision: b.profile.BackendRevision,
		NetworkModes:    []sandboxapi.NetworkKind{sandboxapi.NetworkIsolated, sandboxapi.NetworkOutbound},
	}
}

// Close releases the Engine connection. Sandboxes still owned keep their
// resources; clean them up before closing.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	if b.eng == nil {
		return nil
	}
	err := b.eng.close()
	b.eng = nil
	return err
}

// engine returns the Engine connection. It is the one way to the Engine,
// so its controller check makes every entry point (start, admission,
// reconcile, cleanup) reject a profile for another controller platform
// before any Engine request (docs/contract.md#profiles-and-admission).
func (b *Backend) engine() (*engine, error) {
	if err := checkController(b.profile, b.controller); err != nil {
		return nil, err
	}
	return b.connect()
}

// connect opens (once) the connection to the configured socket.
func (b *Backend) connect() (*engine, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, &sandboxapi.StateError{Message: "backend is closed"}
	}
	if b.eng == nil {
		eng, err := newEngine(b.socket, pinnedAPIVersion(b.profile, &b.cfg))
		if err != nil {
			return nil, engineFailure(err, "connect to Engine at %s", b.socket)
		}
		b.eng = eng
	}
	return b.eng, nil
}

// StandaloneDeadlineMs bounds each call of Admit, AdmitAs and Reconcile, in
// milliseconds: all of its Engine requests together, whatever the caller's
// context. These calls belong to no started sandbox, so no policy's
// deadlines.startupMs or cleanupMs applies; they take the cleanup deadline
// of a recovered owner (RecoveryCleanupMs), the bound Reconcile's owner
// then works under. A request still unanswered when it expires fails with
// a deadline_exceeded *sandboxapi.OperationError naming the request ("read
// Engine /version at /var/run/docker.sock", "inspect compute container
// <name>"). A shorter caller deadline still applies
// (docs/contract.md#profiles-and-admission).
const StandaloneDeadlineMs = RecoveryCleanupMs

// standaloneContext bounds one Admit, AdmitAs or Reconcile call by
// StandaloneDeadlineMs.
func (b *Backend) standaloneContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, b.standaloneBound)
}

// Admit runs the profile's admission against the Engine and image without
// any resource effect, returning every check and the Engine facts. A
// rejected admission returns the Admission and an *AdmissionError. A
// profile for another controller platform is rejected with only its
// controller check, before any Engine request. The call is bounded by
// StandaloneDeadlineMs: an Engine that does not answer in time fails it
// with a deadline_exceeded *sandboxapi.OperationError naming the request.
func (b *Backend) Admit(ctx context.Context) (*Admission, error) {
	return b.admitAs(ctx, b.controller)
}

// AdmitAs is Admit as if this process ran on controller, for admission
// tests of Desktop profiles against a synthetic Engine
// (docs/lanes.md#desktop-synthetic) on a Linux host. The Admission records
// the platform as played ("darwin/arm64 (played by linux/amd64 for a
// synthetic Engine)"). It is bounded as Admit is. Only admission is
// played: Start, Reconcile and
// cleanup of this Backend keep checking the real platform.
func (b *Backend) AdmitAs(ctx context.Context, controller profiles.Platform) (*Admission, error) {
	c := controllerPlatform{Platform: controller, played: controller != b.controller.Platform}
	return b.admitAs(ctx, c)
}

func (b *Backend) admitAs(ctx context.Context, c controllerPlatform) (*Admission, error) {
	if !c.matches(b.profile) {
		return admit(ctx, nil, c, b.profile, &b.cfg, true)
	}
	eng, err := b.connect()
	if err != nil {
		return nil, err
	}
	ctx, cancel := b.standaloneContext(ctx)
	defer cancel()
	return admit(ctx, eng, c, b.profile, &b.cfg, true)
}

// admitDaemon repeats the daemon part of admission (controller, /version,
// /info) and returns the daemon ID. Cleanup runs it before acting: images
// may be gone by then, and cleanup does not need them.
func (b *Backend) admitDaemon(ctx context.Context, eng *engine) (string, error) {
	adm, err := admit(ctx, eng, b.controller, b.profile, &b.cfg, false)
	if err != nil {
		return "", err
	}
	return adm.Engine.DaemonID, nil
}

// Reserve validates req synchronously and returns an inert reservation
// (docs/contract.md#policy). Unsupported policies (required workspace quota,
// unrepresentable CPUs, memory under 6 MiB) fail here with
// *sandboxapi.UnsupportedError; invalid ones with *sandboxapi.ValidationError.
func (b *Backend) Reserve(req sandboxapi.Request, recovery sandboxapi.RecoveryPolicy) (sandboxapi.Reservation, error) {
	norm, err := req.Normalize()
	if err != nil {
		return nil, err
	}
	if err := checkPolicy(norm.Policy, b.profile); err != nil {
		return nil, err
	}
	record := newRecoveryRecord(&b.cfg, b.ns, b.profile.BackendRevision, norm.Policy)
	if err := record.Validate(); err != nil {
		return nil, err
	}
	return newSandbox(b, norm.Policy, recovery.Persist, record), nil
}

func (b *Backend) startupTimeout(p sandboxapi.Policy) time.Duration {
	return sandboxapi.Milliseconds(p.Deadlines.StartupMs)
}

func (b *Backend) cleanupTimeout(p sandboxapi.Policy) time.Duration {
	return sandboxapi.Milliseconds(p.Deadlines.CleanupMs)
}

// pinnedAPIVersion is the Engine API version the backend speaks: the
// profile's qualified version (daemon.minAPIVersion, which admission checks
// the daemon serves), raised to the datasets' minimum when datasets are
// attached, since `type: image` mounts need it
// (docs/contract.md#datasets). Admission records it as
// EngineFacts.ClientAPIVersion.
func pinnedAPIVersion(prof profiles.Profile, cfg *Config) string {
	pin := prof.Daemon.MinAPIVersion
	if len(cfg.Datasets) > 0 {
		d, dok := apiVersion(prof.Datasets.MinAPIVersion)
		p, pok := apiVersion(pin)
		if dok && (!pok || d > p) {
			pin = prof.Datasets.MinAPIVersion
		}
	}
	return pin
}

func runtimeTuple() string { return runtime.GOOS + "/" + runtime.GOARCH }
