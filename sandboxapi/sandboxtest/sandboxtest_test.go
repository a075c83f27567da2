//go:build linux

package sandboxtest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/qualbox/qualbox/sandboxapi"
	"github.com/qualbox/qualbox/sandboxapi/sandboxtest"
)

// TestFakeBackend runs the suite against fakeBackend, a fake that runs
// processes directly on the host with no isolation at all. It only proves
// that the suite itself works; the real target is the Docker driver.
func TestFakeBackend(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh on this host")
	}
	sandboxtest.Run(t, func(t *testing.T) sandboxapi.Backend { return &fakeBackend{dir: t.TempDir()} }, sandboxtest.Config{
		Shell:   "/bin/sh",
		Request: request(),
	})
}

func request() sandboxapi.Request {
	return sandboxapi.Request{Policy: sandboxapi.Policy{
		Resources:        sandboxapi.Resources{CPUs: 1, MemoryBytes: 1 << 28, PIDs: 64},
		TemporaryStorage: sandboxapi.TemporaryStorage{HomeBytes: 1 << 20, TempBytes: 1 << 20},
		Network:          sandboxapi.Network{Kind: sandboxapi.NetworkIsolated},
		Deadlines:        sandboxapi.Deadlines{StartupMs: 10_000, CleanupMs: 10_000},
		Transfers:        sandboxapi.TransferBuffers{ChunkBytes: 65536, MetadataBatchBytes: 1 << 20, MetadataMergeFanIn: 16},
		Streams:          sandboxapi.StreamLimits{MaxBufferedInputBytes: 1 << 20, MaxBufferedOutputBytes: 1 << 20, HighWaterMarkBytes: 1 << 16},
	}}
}

// fakeBackend is a fake: host processes, one temporary directory as the
// "workspace", a recovery record that only tracks the phase.
type fakeBackend struct{ dir string }

func (b *fakeBackend) Support() sandboxapi.Support {
	return sandboxapi.Support{BackendID: "fake", BackendRevision: "1", NetworkModes: []sandboxapi.NetworkKind{sandboxapi.NetworkIsolated}}
}

func (b *fakeBackend) Reserve(req sandboxapi.Request, _ sandboxapi.RecoveryPolicy) (sandboxapi.Reservation, error) {
	req, err := req.Normalize()
	if err != nil {
		return nil, err
	}
	return &fakeSandbox{dir: b.dir, req: req, phase: sandboxapi.PhaseReserved}, nil
}

type fakeSandbox struct {
	dir string
	req sandboxapi.Request

	mu      sync.Mutex
	phase   sandboxapi.Phase
	started bool
	proc    *fakeProcess
}

func (s *fakeSandbox) ID() sandboxapi.SandboxID { return "fake-sandbox" }
func (s *fakeSandbox) Workspace() string        { return s.dir }
func (s *fakeSandbox) Effective() sandboxapi.EffectivePolicy {
	p := s.req.Policy
	return sandboxapi.EffectivePolicy{
		BackendIdentity: "host", Isolation: sandboxapi.IsolationContainer, Resources: p.Resources,
		TemporaryStorage: p.TemporaryStorage, Network: p.Network, NonRoot: true, ReadOnlyRoot: true,
		WorkspaceDiskQuota: sandboxapi.WorkspaceDiskQuota{Kind: sandboxapi.QuotaNotRequested},
	}
}

func (s *fakeSandbox) RecoveryRecord() sandboxapi.RecoveryRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	digest := "sha256:" + strings.Repeat("0", 64)
	r := sandboxapi.RecoveryRecord{
		Format: sandboxapi.RecoveryFormat, BackendID: "fake", BackendRevision: "1", Namespace: "test",
		OperationID: "op", SandboxID: "fake-sandbox", ImageDigest: digest, PolicyDigest: digest, ConfigurationDigest: digest,
		Phase:     s.phase,
		Authority: sandboxapi.Authority{Kind: sandboxapi.AuthorityVerified, BackendIdentity: "host"},
		Resources: []sandboxapi.RecoveryResource{{Role: sandboxapi.RoleCompute, Name: "compute", Identity: sandboxapi.ResourceIdentity{Kind: sandboxapi.IdentityPlanned}}},
	}
	if s.phase == sandboxapi.PhaseReserved {
		r.Authority = sandboxapi.Authority{Kind: sandboxapi.AuthorityUnverified}
	}
	return r
}

func (s *fakeSandbox) Start(context.Context) (sandboxapi.Sandbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return nil, &sandboxapi.StateError{Message: "start is once-only"}
	}
	s.started = true
	s.phase = sandboxapi.PhaseRunning
	return s, nil
}

func (s *fakeSandbox) ReserveProcess(spec sandboxapi.ProcessSpec) (sandboxapi.ProcessReservation, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil || s.phase != sandboxapi.PhaseRunning {
		return nil, &sandboxapi.StateError{Message: "one process per running sandbox"}
	}
	s.proc = &fakeProcess{sb: s, spec: spec, exited: make(chan struct{})}
	return s.proc, nil
}

func (s *fakeSandbox) Stop(context.Context) error {
	s.mu.Lock()
	if s.phase == sandboxapi.PhaseRunning || s.phase == sandboxapi.PhaseReserved {
		s.phase = sandboxapi.PhaseStopped
	}
	proc := s.proc
	s.mu.Unlock()
	if proc != nil {
		proc.kill()
	}
	return nil
}

func (s *fakeSandbox) Destroy(ctx context.Context) error {
	_ = s.Stop(ctx)
	s.mu.Lock()
	s.phase = sandboxapi.PhaseDestroyed
	s.mu.Unlock()
	return nil
}

type fakeProcess struct {
	sb   *fakeSandbox
	spec sandboxapi.ProcessSpec

	mu      sync.Mutex
	started bool
	stopped bool
	cmd     *exec.Cmd
	streams *sandboxapi.OwnedStreams
	exit    sandboxapi.Exit
	exited  chan struct{}
}

func (p *fakeProcess) ID() sandboxapi.ProcessID { return "fake-process" }

func (p *fakeProcess) Start(context.Context) (sandboxapi.Process, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started || p.stopped {
		return nil, &sandboxapi.StateError{Message: "process start is once-only"}
	}
	p.started = true
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, _ := os.Pipe()
	errR, errW, _ := os.Pipe()
	cmd := exec.Command(p.spec.Executable, p.spec.Args...)
	cmd.Dir = p.spec.Cwd
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	for k, v := range p.spec.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, err
	}
	p.cmd = cmd
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		var exitErr *exec.ExitError
		switch {
		case p.stopped:
			p.exit = sandboxapi.Unavailable()
		case err == nil:
			p.exit = sandboxapi.Exited(0)
		case errors.As(err, &exitErr) && exitErr.ExitCode() >= 0:
			p.exit = sandboxapi.Exited(exitErr.ExitCode())
		default:
			p.exit = sandboxapi.Signaled("SIGKILL")
		}
		p.mu.Unlock()
		close(p.exited)
	}()
	p.streams = sandboxapi.OwnStreams(sandboxapi.RawStreams{
		Stdin: inW, Stdout: outR, Stderr: errR,
		Wait: func(ctx context.Context) (sandboxapi.Exit, error) {
			select {
			case <-p.exited:
				p.mu.Lock()
				defer p.mu.Unlock()
				return p.exit, nil
			case <-ctx.Done():
				return sandboxapi.Exit{}, ctx.Err()
			}
		},
	}, p.sb.req.Policy.Streams, func(error) { go p.sb.Stop(context.Background()) })
	return p.streams, nil
}

func (p *fakeProcess) Stop(ctx context.Context) error { return p.sb.Stop(ctx) }

// kill stops the process group and its streams, and waits for the exit.
func (p *fakeProcess) kill() {
	p.mu.Lock()
	p.stopped = true
	cmd, streams := p.cmd, p.streams
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
	streams.Close(&sandboxapi.OperationError{Code: sandboxapi.CodeCancelled, Message: "sandbox stopped"})
	<-streams.Done()
}
