package driver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moby/moby/client"

	"github.com/qualbox/qualbox/sandboxapi"
)

// ReserveProcess validates spec and reserves the sandbox's one process
// (docs/contract.md#processes-and-streams). It is synchronous and inert. An
// invalid spec is a *sandboxapi.ValidationError; a HOME, TMPDIR or PATH
// different from the fixed environment is a *sandboxapi.UnsupportedError; a
// second reservation, a stopped sandbox or a workspace import still in
// progress (docs/contract.md#workspace-files) is a *sandboxapi.StateError.
func (s *sandbox) ReserveProcess(spec sandboxapi.ProcessSpec) (sandboxapi.ProcessReservation, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	fixed := fixedEnvironmentMap()
	for name, want := range fixed {
		if got, ok := spec.Env[name]; ok && got != want {
			return nil, &sandboxapi.UnsupportedError{Message: fmt.Sprintf("env %s=%q conflicts with the fixed %s=%q", name, got, name, want)}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		return nil, &sandboxapi.StateError{Message: "sandbox is not started"}
	}
	if s.proc != nil {
		return nil, &sandboxapi.StateError{Message: "the sandbox's one process is already reserved"}
	}
	if s.importing > 0 {
		return nil, &sandboxapi.StateError{Message: "a workspace import is in progress; reserve the process once it returned"}
	}
	if s.computeStopping {
		return nil, &sandboxapi.StateError{Message: "sandbox compute is stopping"}
	}
	if s.record.Phase != sandboxapi.PhaseRunning {
		return nil, &sandboxapi.StateError{Message: "sandbox compute is " + string(s.record.Phase)}
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	p := &process{
		s:           s,
		spec:        spec,
		id:          sandboxapi.ProcessID("docker-process-" + hex.EncodeToString(b[:])),
		stopping:    make(chan struct{}),
		exitCh:      make(chan struct{}),
		streamEnded: make(chan struct{}, 1),
		streamDone:  make(chan struct{}),
	}
	s.proc = p
	return p, nil
}

// process is the sandbox's one exec (docs/contract.md#processes-and-streams).
type process struct {
	s    *sandbox
	spec sandboxapi.ProcessSpec
	id   sandboxapi.ProcessID

	mu        sync.Mutex
	entered   bool
	stopOnce  sync.Once
	stopping  chan struct{}
	conn      net.Conn
	owned     *sandboxapi.OwnedStreams
	deadline  *time.Timer
	workers   sync.WaitGroup
	startDone chan struct{}

	exitOnce sync.Once
	exitCh   chan struct{}
	exit     sandboxapi.Exit
	// streamEnded wakes the monitor when the output stream ends: the exit
	// code usually follows within milliseconds.
	streamEnded chan struct{}
	// streamDone is closed when the demultiplexer returned: the attach
	// stream ended or failed.
	streamDone chan struct{}
	// delivering counts decoder writes waiting on our own readers, and
	// delivered is the UnixNano time the last one returned: the post-exit
	// drain bound times the Engine's silence, not a slow reader.
	delivering atomic.Int32
	delivered  atomic.Int64
	// failed is the first error fail was given (guarded by mu).
	failed error
}

var _ sandboxapi.ProcessReservation = (*process)(nil)

// ID returns the process ID.
func (p *process) ID() sandboxapi.ProcessID { return p.id }

// Stop stops the whole sandbox's compute (stopScope "sandbox").
func (p *process) Stop(ctx context.Context) error { return p.s.Stop(ctx) }

// Start creates and attaches the exec as the workload user with the fixed
// environment, no TTY and separate stdout/stderr, then owns its streams
// under policy.streams. It is once-only and bounded by deadlines.startupMs.
// Before the exec create it repeats daemon admission (execPreflight), and
// before the exec create and again before the exec start it checks that
// the owned compute container is still the running one. With policy.execution deadline, the timer starts at this
// call (launch entry) and stays armed until the exit receipt is observed
// and the streams have ended; its expiry stops the whole sandbox
// (docs/contract.md#processes-and-streams).
func (p *process) Start(ctx context.Context) (_ sandboxapi.Process, err error) {
	p.mu.Lock()
	if p.entered {
		p.mu.Unlock()
		return nil, &sandboxapi.StateError{Message: "process start is once-only"}
	}
	p.entered = true
	p.startDone = make(chan struct{})
	s := p.s
	policy := s.policy
	if policy.Execution.Kind == sandboxapi.ExecutionDeadline {
		timeout := sandboxapi.Milliseconds(policy.Execution.TimeoutMs)
		p.deadline = time.AfterFunc(timeout, func() { p.expire(timeout) })
	}
	p.mu.Unlock()
	defer close(p.startDone)
	defer func() {
		if err != nil {
			p.disarm()
			if f := p.failure(); f != nil {
				err = f // the deadline or a stop interrupted the launch
			}
		}
	}()
	select {
	case <-p.stopping:
		return nil, &sandboxapi.StateError{Message: "sandbox compute is stopping"}
	default:
	}
	ctx, cancel := context.WithTimeout(ctx, s.b.startupTimeout(policy))
	defer cancel()
	go func() {
		select {
		case <-p.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()

	eng, err := s.b.engine()
	if err != nil {
		return nil, err
	}
	compute, _ := s.resource(sandboxapi.RoleCompute)
	if compute.Identity.Kind != sandboxapi.IdentityIdentified {
		return nil, &sandboxapi.StateError{Message: "sandbox compute is not identified"}
	}
	containerID := compute.Identity.ID
	if err := s.execPreflight(ctx, eng); err != nil {
		return nil, err
	}
	created, err := eng.cli.ExecCreate(ctx, containerID, client.ExecCreateOptions{
		User:         fmt.Sprintf("%d:%d", s.b.cfg.User.UID, s.b.cfg.User.GID),
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		Env:          processEnv(p.spec.Env),
		WorkingDir:   p.spec.Cwd,
		Cmd:          append([]string{p.spec.Executable}, p.spec.Args...),
	})
	if err != nil {
		return nil, engineFailure(err, "create exec in %s", containerID)
	}
	if err := checkEngineID("exec", created.ID); err != nil {
		return nil, err
	}
	if err := s.checkComputeActive(ctx, eng); err != nil {
		return nil, err
	}
	conn, stream, err := eng.startExec(ctx, created.ID)
	if err != nil {
		return nil, err
	}
	select {
	case <-p.stopping:
		conn.Close()
		return nil, &sandboxapi.OperationError{Code: sandboxapi.CodeCancelled, Message: "process attached after sandbox shutdown entered"}
	default:
	}
	return p.own(eng, created.ID, containerID, conn, stream), nil
}

// own takes the attached exec's connection and multiplexed stream: it owns
// the streams under policy.streams first, then lets the frame decoder run
// and starts the exit monitor and the post-exit drain watch, so a framing
// failure always finds the owned streams to fail. The decoder runs inside
// the owned streams' output goroutine (RawStreams.Output) and stages each
// payload straight into the reader's buffer: no pipe and no second
// goroutine between the connection and the reader.
func (p *process) own(eng *engine, execID, containerID string, conn net.Conn, stream io.Reader) *sandboxapi.OwnedStreams {
	owning := make(chan struct{})
	raw := sandboxapi.RawStreams{
		Stdin: &stdinConn{conn: conn},
		Output: func(stdout, stderr io.Writer) error {
			defer close(p.streamDone)
			<-owning
			err := demux(stream, &deliveryWriter{p: p, w: stdout}, &deliveryWriter{p: p, w: stderr})
			select {
			case p.streamEnded <- struct{}{}:
			default:
			}
			if err != nil {
				// Fail with the contract's code before returning: the
				// owned streams would call any output error a
				// stream_failure, and an oversize frame is output_limit.
				p.fail(streamError(err))
			}
			return err
		},
		Wait: p.wait,
	}
	owned := sandboxapi.OwnStreams(raw, p.s.policy.Streams, p.fail)
	p.mu.Lock()
	p.conn, p.owned = conn, owned
	p.mu.Unlock()
	close(owning)
	p.workers.Add(2)
	go func() {
		defer p.workers.Done()
		p.monitor(eng, execID, containerID)
	}()
	go func() {
		defer p.workers.Done()
		p.drainAfterExit()
	}()
	return owned
}

// streamError converts a demultiplexer failure into the contract's error:
// an oversize frame is output_limit, other framing and read failures
// stream_failure.
func streamError(err error) error {
	code := sandboxapi.CodeStreamFailure
	if errors.Is(err, sandboxapi.ErrOutputLimit) {
		code = sandboxapi.CodeOutputLimit
	}
	return &sandboxapi.OperationError{Code: code, Message: "exec output stream", Err: err}
}

// drainAfterExit bounds the time between the exit receipt and the end of
// the attach stream by deadlines.cleanupMs: once the exit is observed the
// driver no longer depends on the Engine (or anything in between) closing
// the stream. Past the bound the streams fail with stream_failure, the
// connection closes and the sandbox stops; the exit receipt stays. When
// exit and stream end are both seen, the execution deadline is disarmed.
func (p *process) drainAfterExit() {
	select {
	case <-p.exitCh:
	case <-p.stopping:
		return
	}
	bound := p.s.b.cleanupTimeout(p.s.policy)
	p.delivered.Store(time.Now().UnixNano())
	t := time.NewTimer(bound)
	defer t.Stop()
	for {
		select {
		case <-p.streamDone:
			p.disarm()
			return
		case <-p.stopping:
			return
		case <-t.C:
		}
		// Time spent handing bytes to a reader that has not read yet is
		// the caller's, not the Engine's: re-arm while a delivery waits,
		// and count the bound from the last delivery.
		if p.delivering.Load() > 0 {
			t.Reset(bound)
			continue
		}
		if idle := time.Since(time.Unix(0, p.delivered.Load())); idle < bound {
			t.Reset(bound - idle)
			continue
		}
		p.fail(&sandboxapi.OperationError{Code: sandboxapi.CodeStreamFailure, Message: fmt.Sprintf("exec stream still open %v after the exit receipt", bound)})
		p.closeConn()
		return
	}
}

// deliveryWriter marks the decoder's writes into the owned streams, which
// block while the reader's staging is full (backpressure).
type deliveryWriter struct {
	p *process
	w io.Writer
}

func (d *deliveryWriter) Write(b []byte) (int, error) {
	d.p.delivering.Add(1)
	n, err := d.w.Write(b)
	d.p.delivered.Store(time.Now().UnixNano())
	d.p.delivering.Add(-1)
	return n, err
}

// expire is the execution deadline. Once the exit receipt exists, the
// process did not overrun: only its streams are still open, a
// stream_failure.
func (p *process) expire(timeout time.Duration) {
	select {
	case <-p.exitCh:
		p.fail(&sandboxapi.OperationError{Code: sandboxapi.CodeStreamFailure, Message: fmt.Sprintf("exec stream still open when the execution deadline of %v expired after the exit receipt", timeout)})
		p.closeConn()
	default:
		p.fail(&sandboxapi.OperationError{Code: sandboxapi.CodeDeadlineExceeded, Message: fmt.Sprintf("execution deadline of %v expired", timeout)})
	}
}

// disarm stops the execution deadline, if any.
func (p *process) disarm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.deadline != nil {
		p.deadline.Stop()
	}
}

func (p *process) closeConn() {
	p.mu.Lock()
	conn := p.conn
	p.mu.Unlock()
	if conn != nil {
		conn.Close()
	}
}

// processEnv is the fixed environment followed by the spec's other entries
// in name order.
func processEnv(extra map[string]string) []string {
	env := append([]string(nil), FixedEnvironment...)
	fixed := fixedEnvironmentMap()
	names := make([]string, 0, len(extra))
	for k := range extra {
		if _, ok := fixed[k]; !ok {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		env = append(env, k+"="+extra[k])
	}
	return env
}

// stdinConn is the raw stdin: writes go to the hijacked connection, Close
// half-closes it so the process reads EOF while output keeps flowing.
type stdinConn struct {
	conn net.Conn
}

func (c *stdinConn) Write(p []byte) (int, error) { return c.conn.Write(p) }

func (c *stdinConn) Close() error {
	if cw, ok := c.conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.conn.Close()
}

// execInspect is the part of GET /exec/{id}/json the monitor needs, with
// ExitCode nullable: the moby client maps null to 0, which would turn a
// pending exec into a successful one.
type execInspect struct {
	ID          string `json:"ID"`
	ContainerID string `json:"ContainerID"`
	Running     bool   `json:"Running"`
	ExitCode    *int   `json:"ExitCode"`
}

// monitor polls exec inspect until the leader's exit code is observed
// (docs/contract.md#processes-and-streams). A non-running exec with a null exit
// code stays pending. Once stop began, observations are discarded: the receipt
// becomes unavailable{sandbox_stopped}, never the 137 the removal causes.
func (p *process) monitor(eng *engine, execID, containerID string) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-p.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	delay := 5 * time.Millisecond
	for {
		var out execInspect
		rctx, rcancel := context.WithTimeout(ctx, p.s.b.cleanupTimeout(p.s.policy))
		status, err := eng.getJSON(rctx, "/exec/"+execID+"/json", &out)
		rcancel()
		select {
		case <-p.stopping:
			return
		default:
		}
		switch {
		case err != nil:
			p.fail(engineFailure(err, "inspect exec %s", execID))
			return
		case status == 404:
			p.fail(&sandboxapi.OperationError{Code: sandboxapi.CodeDriverFailure, Message: "Engine lost the owned exec " + execID + " before sandbox removal"})
			return
		case out.ID != execID || out.ContainerID != containerID:
			p.fail(&sandboxapi.OperationError{Code: sandboxapi.CodeDriverFailure, Message: fmt.Sprintf("exec inspection %s/%s differs from the owned exec %s/%s", out.ID, out.ContainerID, execID, containerID)})
			return
		case !out.Running && out.ExitCode != nil:
			if *out.ExitCode < 0 || *out.ExitCode > 255 {
				p.fail(&sandboxapi.OperationError{Code: sandboxapi.CodeDriverFailure, Message: fmt.Sprintf("exec %s reported exit code %d", execID, *out.ExitCode)})
				return
			}
			p.setExit(sandboxapi.Exited(*out.ExitCode))
			return
		}
		select {
		case <-p.stopping:
			return
		case <-p.streamEnded:
			delay = time.Millisecond
			continue
		case <-time.After(delay):
		}
		delay = min(delay*2, 100*time.Millisecond)
	}
}

func (p *process) setExit(e sandboxapi.Exit) {
	p.exitOnce.Do(func() {
		p.exit = e
		close(p.exitCh)
	})
}

func (p *process) wait(ctx context.Context) (sandboxapi.Exit, error) {
	select {
	case <-p.exitCh:
		return p.exit, nil
	case <-ctx.Done():
		return sandboxapi.Exit{}, sandboxapi.FromContext(ctx.Err(), "wait for process exit")
	}
}

// fail stops the whole sandbox: abandonment, malformed framing, overflow, a
// lost exec or the execution deadline (docs/contract.md#processes-and-streams).
func (p *process) fail(err error) {
	p.mu.Lock()
	owned := p.owned
	if p.failed == nil {
		p.failed = err
	}
	p.mu.Unlock()
	if owned != nil {
		owned.Close(err)
	}
	select {
	case <-p.stopping:
		return // stop is already under way
	default:
	}
	go func() {
		ctx, cancel := p.s.cleanupContext(context.Background())
		defer cancel()
		_ = p.s.Stop(ctx)
	}()
}

// failure returns the first error fail was given, or nil.
func (p *process) failure() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed
}

// closeAdmission refuses further starts and discards later exec
// observations; stop calls it before removing compute.
func (p *process) closeAdmission() {
	p.stopOnce.Do(func() { close(p.stopping) })
}

// releaseStreams closes the streams without settling the exit: stop calls
// it when compute removal failed, so readers are not left blocked while the
// receipt waits for a retried stop.
func (p *process) releaseStreams() {
	p.mu.Lock()
	owned := p.owned
	p.mu.Unlock()
	if owned != nil {
		owned.Close(errComputeStopped())
	}
}

func errComputeStopped() error {
	return &sandboxapi.OperationError{Code: sandboxapi.CodeStreamFailure, Message: "sandbox compute stopped"}
}

// computeStopped settles the process after compute removal: an unobserved
// exit becomes unavailable{sandbox_stopped}, the connection closes and the
// workers are joined.
func (p *process) computeStopped() {
	p.closeAdmission()
	p.setExit(sandboxapi.Unavailable())
	p.mu.Lock()
	started := p.startDone
	p.mu.Unlock()
	if started != nil {
		<-started
	}
	p.mu.Lock()
	conn, owned := p.conn, p.owned
	p.mu.Unlock()
	if owned != nil {
		owned.Close(errComputeStopped())
	}
	if conn != nil {
		conn.Close()
	}
	p.workers.Wait()
}
