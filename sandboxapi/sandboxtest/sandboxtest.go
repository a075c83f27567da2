package sandboxtest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/qualbox/qualbox/sandboxapi"
)

// Config parameterizes Run.
type Config struct {
	// Shell is the absolute guest path of a POSIX sh, e.g. "/bin/sh". The
	// suite runs its processes as Shell -c SCRIPT with cat, printf and
	// sleep available on the guest PATH.
	Shell string
	// Request is the base request of every sandbox the suite creates. It is
	// normalized first; an invalid request fails the suite. Its stream
	// limits must admit 256 KiB of stdin and of output per process, and its
	// execution policy must leave each subtest a few seconds.
	Request sandboxapi.Request
	// Timeout bounds each subtest's operations; zero means two minutes.
	Timeout time.Duration
}

// Run runs the conformance subtests, each on a fresh backend from
// newBackend and a fresh sandbox that the subtest destroys (t.Cleanup)
// even when it fails:
//
//   - Reserve is inert (record phase reserved, every resource planned) and
//     Start works (same ID, valid effective policy, canonical workspace).
//   - stdout and stderr stay separate; exit codes are reported; stdin
//     reaches the process and Close half-closes it.
//   - a second ReserveProcess, a second reservation Start and a second
//     process Start are *sandboxapi.StateError.
//   - ProcessReservation.Stop and Sandbox.Stop make a running process's
//     receipt sandboxapi.Unavailable().
//   - Destroy after Stop succeeds, and a second Destroy is nil (idempotent;
//     retry after a partial failure needs fault injection, see the driver's
//     fault tests).
//   - WithSandbox runs a process and leaves the sandbox destroyed.
func Run(t *testing.T, newBackend func(t *testing.T) sandboxapi.Backend, cfg Config) {
	t.Helper()
	if !sandboxapi.ValidGuestPath(cfg.Shell) {
		t.Fatalf("sandboxtest: Config.Shell %q is not an absolute canonical guest path", cfg.Shell)
	}
	req, err := cfg.Request.Normalize()
	if err != nil {
		t.Fatalf("sandboxtest: Config.Request: %v", err)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Minute
	}
	s := &suite{cfg: cfg, req: req, newBackend: newBackend}
	t.Run("ReserveIsInertAndStartWorks", s.reserveAndStart)
	t.Run("StdoutStderrSeparate", s.separateOutputs)
	t.Run("ExitCode", s.exitCode)
	t.Run("StdinEchoHalfClose", s.stdinEcho)
	t.Run("SecondReserveProcessIsStateError", s.secondReserveProcess)
	t.Run("SecondStartIsStateError", s.secondStart)
	t.Run("ProcessStopYieldsUnavailable", func(t *testing.T) { s.stopYieldsUnavailable(t, true) })
	t.Run("SandboxStopYieldsUnavailable", func(t *testing.T) { s.stopYieldsUnavailable(t, false) })
	t.Run("DestroyAfterStopIsIdempotent", s.destroyIdempotent)
	t.Run("WithSandboxCleansUp", s.withSandbox)
}

type suite struct {
	cfg        Config
	req        sandboxapi.Request
	newBackend func(t *testing.T) sandboxapi.Backend
}

func (s *suite) context(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	t.Cleanup(cancel)
	return ctx
}

// reserve reserves a sandbox and registers its destruction.
func (s *suite) reserve(t *testing.T) sandboxapi.Reservation {
	t.Helper()
	backend := s.newBackend(t)
	res, err := backend.Reserve(s.req, sandboxapi.InProcess())
	if err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	t.Cleanup(func() { destroy(t, res, s.cfg.Timeout) })
	return res
}

// start reserves and starts a sandbox.
func (s *suite) start(t *testing.T) sandboxapi.Sandbox {
	t.Helper()
	res := s.reserve(t)
	sb, err := res.Start(s.context(t))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { destroy(t, sb, s.cfg.Timeout) })
	return sb
}

// destroy reports cleanup failures separately from the test's own.
func destroy(t *testing.T, owner sandboxapi.CleanupOwner, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := owner.Destroy(ctx); err != nil {
		t.Errorf("cleanup: Destroy: %v", err)
	}
}

func (s *suite) spec(sb sandboxapi.Sandbox, script string) sandboxapi.ProcessSpec {
	return sandboxapi.ProcessSpec{
		Executable: s.cfg.Shell,
		Args:       []string{"-c", script},
		Env:        map[string]string{},
		Cwd:        sb.Workspace(),
	}
}

// result is what one process run observed.
type result struct {
	stdout, stderr []byte
	exit           sandboxapi.Exit
}

// run runs script in sb, feeds stdin and half-closes it, and collects both
// outputs and the receipt.
func (s *suite) run(t *testing.T, sb sandboxapi.Sandbox, script string, stdin []byte) result {
	t.Helper()
	ctx := s.context(t)
	pr, err := sb.ReserveProcess(s.spec(sb, script))
	if err != nil {
		t.Fatalf("ReserveProcess: %v", err)
	}
	p, err := pr.Start(ctx)
	if err != nil {
		t.Fatalf("process Start: %v", err)
	}
	stdout, stderr := drain(p.Stdout()), drain(p.Stderr())
	if _, err := p.Stdin().Write(stdin); err != nil {
		t.Errorf("stdin Write: %v", err)
	}
	if err := p.Stdin().Close(); err != nil {
		t.Errorf("stdin Close: %v", err)
	}
	var r result
	for _, out := range []struct {
		ch   <-chan readResult
		dst  *[]byte
		name string
	}{{stdout, &r.stdout, "stdout"}, {stderr, &r.stderr, "stderr"}} {
		got := <-out.ch
		if got.err != nil {
			t.Errorf("reading %s: %v", out.name, got.err)
		}
		*out.dst = got.data
	}
	r.exit, err = p.Wait(ctx)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return r
}

type readResult struct {
	data []byte
	err  error
}

func drain(r io.Reader) <-chan readResult {
	ch := make(chan readResult, 1)
	go func() {
		data, err := io.ReadAll(r)
		ch <- readResult{data, err}
	}()
	return ch
}

func (s *suite) reserveAndStart(t *testing.T) {
	res := s.reserve(t)
	if _, err := sandboxapi.ParseSandboxID(string(res.ID())); err != nil {
		t.Errorf("reservation ID %q: %v", res.ID(), err)
	}
	record := res.RecoveryRecord()
	if err := record.Validate(); err != nil {
		t.Errorf("reservation recovery record: %v", err)
	}
	if record.Phase != sandboxapi.PhaseReserved {
		t.Errorf("reservation phase = %q, want %q", record.Phase, sandboxapi.PhaseReserved)
	}
	for i, r := range record.Resources {
		if r.Identity.Kind != sandboxapi.IdentityPlanned {
			t.Errorf("reservation resource %d (%s) is %q, want planned: Reserve must be inert", i, r.Role, r.Identity.Kind)
		}
	}

	sb, err := res.Start(s.context(t))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { destroy(t, sb, s.cfg.Timeout) })
	if sb.ID() != res.ID() {
		t.Errorf("sandbox ID %q differs from reservation ID %q", sb.ID(), res.ID())
	}
	if err := sb.Effective().Validate(); err != nil {
		t.Errorf("effective policy: %v", err)
	}
	if got, want := sb.Effective().Network, s.req.Policy.Network; got != want {
		t.Errorf("effective network = %+v, want %+v", got, want)
	}
	if !sandboxapi.ValidGuestPath(sb.Workspace()) {
		t.Errorf("workspace %q is not a canonical guest path", sb.Workspace())
	}
	if err := sb.RecoveryRecord().Validate(); err != nil {
		t.Errorf("started recovery record: %v", err)
	}
}

func (s *suite) separateOutputs(t *testing.T) {
	sb := s.start(t)
	r := s.run(t, sb, "printf out; printf err >&2", nil)
	if string(r.stdout) != "out" || string(r.stderr) != "err" {
		t.Errorf("stdout %q, stderr %q; want \"out\" and \"err\"", r.stdout, r.stderr)
	}
	if r.exit != sandboxapi.Exited(0) {
		t.Errorf("exit = %v, want %v", r.exit, sandboxapi.Exited(0))
	}
}

func (s *suite) exitCode(t *testing.T) {
	sb := s.start(t)
	r := s.run(t, sb, "exit 7", nil)
	if r.exit != sandboxapi.Exited(7) {
		t.Errorf("exit = %v, want %v", r.exit, sandboxapi.Exited(7))
	}
}

func (s *suite) stdinEcho(t *testing.T) {
	sb := s.start(t)
	input := append([]byte("binary\x00input\xff\n"), bytes.Repeat([]byte("0123456789"), 20000)...)
	r := s.run(t, sb, "cat", input)
	if !bytes.Equal(r.stdout, input) {
		t.Errorf("cat echoed %d bytes, want the %d written", len(r.stdout), len(input))
	}
	if r.exit != sandboxapi.Exited(0) {
		t.Errorf("exit = %v, want %v (cat must see EOF after half-close)", r.exit, sandboxapi.Exited(0))
	}
}

func wantStateError(t *testing.T, what string, err error) {
	t.Helper()
	var state *sandboxapi.StateError
	if !errors.As(err, &state) {
		t.Errorf("%s: got %T %v, want *sandboxapi.StateError", what, err, err)
	}
}

func (s *suite) secondReserveProcess(t *testing.T) {
	sb := s.start(t)
	if _, err := sb.ReserveProcess(s.spec(sb, "exit 0")); err != nil {
		t.Fatalf("first ReserveProcess: %v", err)
	}
	_, err := sb.ReserveProcess(s.spec(sb, "exit 0"))
	wantStateError(t, "second ReserveProcess", err)
}

func (s *suite) secondStart(t *testing.T) {
	ctx := s.context(t)
	res := s.reserve(t)
	sb, err := res.Start(ctx)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { destroy(t, sb, s.cfg.Timeout) })
	_, err = res.Start(ctx)
	wantStateError(t, "second reservation Start", err)

	pr, err := sb.ReserveProcess(s.spec(sb, "exit 0"))
	if err != nil {
		t.Fatalf("ReserveProcess: %v", err)
	}
	p, err := pr.Start(ctx)
	if err != nil {
		t.Fatalf("process Start: %v", err)
	}
	_, err = pr.Start(ctx)
	wantStateError(t, "second process Start", err)
	out, errs := drain(p.Stdout()), drain(p.Stderr())
	_ = p.Stdin().Close()
	<-out
	<-errs
	if _, err := p.Wait(ctx); err != nil {
		t.Errorf("Wait: %v", err)
	}
}

func (s *suite) stopYieldsUnavailable(t *testing.T, viaProcess bool) {
	ctx := s.context(t)
	sb := s.start(t)
	pr, err := sb.ReserveProcess(s.spec(sb, "sleep 1000"))
	if err != nil {
		t.Fatalf("ReserveProcess: %v", err)
	}
	p, err := pr.Start(ctx)
	if err != nil {
		t.Fatalf("process Start: %v", err)
	}
	out, errs := drain(p.Stdout()), drain(p.Stderr())
	if viaProcess {
		err = pr.Stop(ctx)
	} else {
		err = sb.Stop(ctx)
	}
	if err != nil {
		t.Fatalf("Stop: %v", err)
	}
	exit, err := p.Wait(ctx)
	if err != nil {
		t.Fatalf("Wait after Stop: %v", err)
	}
	if exit != sandboxapi.Unavailable() {
		t.Errorf("exit after Stop = %v, want %v", exit, sandboxapi.Unavailable())
	}
	<-out // the outputs end, with EOF or the stop error
	<-errs
}

func (s *suite) destroyIdempotent(t *testing.T) {
	ctx := s.context(t)
	sb := s.start(t)
	if err := sb.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatalf("Destroy after Stop: %v", err)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Errorf("second Destroy: %v, want nil", err)
	}
}

func (s *suite) withSandbox(t *testing.T) {
	backend := s.newBackend(t)
	var seen sandboxapi.Sandbox
	out, err := sandboxapi.WithSandbox(s.context(t), backend, s.req, sandboxapi.InProcess(),
		func(ctx context.Context, sb sandboxapi.Sandbox) (string, error) {
			seen = sb
			r := s.run(t, sb, "printf inside", nil)
			return string(r.stdout), nil
		})
	if err != nil {
		t.Fatalf("WithSandbox: %v", err)
	}
	if out != "inside" {
		t.Errorf("WithSandbox result %q, want \"inside\"", out)
	}
	if seen == nil {
		t.Fatal("WithSandbox did not call use")
	}
	if phase := seen.RecoveryRecord().Phase; phase != sandboxapi.PhaseDestroyed {
		t.Errorf("phase after WithSandbox = %q, want %q", phase, sandboxapi.PhaseDestroyed)
	}
	if err := seen.Destroy(s.context(t)); err != nil {
		t.Errorf("Destroy after WithSandbox: %v, want nil (retryable)", err)
	}
}
