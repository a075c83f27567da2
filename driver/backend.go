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

	mu     sync.Mutex
	eng    *engine
	closed bool
}

var _ sandboxapi.Backend = (*Backend)(nil)

// New validates cfg and returns an inert Backend. Invalid fields are
// *ConfigError naming the field; no Engine, file or network access happens.
func New(cfg Config) (*Backend, error) {
	cfg.Datasets = append([]Dataset(nil), cfg.Datasets...)
	prof, ns, socket, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	return &Backend{cfg: cfg, profile: prof, ns: ns, socket: socket}, nil
}

// Profile returns the backend's profile.
func (b *Backend) Profile() profiles.Profile { return b.profile }

// Socket returns the absolute path of the Engine socket the backend uses.
func (b *Backend) Socket() string { return b.socket }

// Support reports the backend identity and admissible network modes
// (seed SandboxSupport).
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

func (b *Backend) engine() (*engine, error) {
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

// Admit runs the profile's admission against the Engine and image without
// any resource effect, returning every check and the Engine facts. A
// rejected admission returns the Admission and an *AdmissionError.
func (b *Backend) Admit(ctx context.Context) (*Admission, error) {
	eng, err := b.engine()
	if err != nil {
		return nil, err
	}
	return admit(ctx, eng, b.profile, &b.cfg, true)
}

// admitDaemon repeats the daemon part of admission (controller, /version,
// /info) and returns the daemon ID. Cleanup runs it before acting: images
// may be gone by then, and cleanup does not need them.
func (b *Backend) admitDaemon(ctx context.Context, eng *engine) (string, error) {
	adm, err := admit(ctx, eng, b.profile, &b.cfg, false)
	if err != nil {
		return "", err
	}
	return adm.Engine.DaemonID, nil
}

// Reserve validates req synchronously and returns an inert reservation
// (seed backend.reserve). Unsupported policies (required workspace quota,
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
	return time.Duration(p.Deadlines.StartupMs) * time.Millisecond
}

func (b *Backend) cleanupTimeout(p sandboxapi.Policy) time.Duration {
	return time.Duration(p.Deadlines.CleanupMs) * time.Millisecond
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
