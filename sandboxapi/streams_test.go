package sandboxapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
)

// TestMain checks that no test of this package leaks a goroutine: every
// owned stream test waits for Done, every WithSandbox test returns.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// process is an in-memory process behind RawStreams: the test plays the
// process through the far ends of three io.Pipes.
type process struct {
	stdin  *io.PipeReader // what the process reads
	stdout *io.PipeWriter // what the process writes
	stderr *io.PipeWriter
	exit   chan Exit
	raw    RawStreams
}

func newProcess() *process {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	p := &process{stdin: inR, stdout: outW, stderr: errW, exit: make(chan Exit, 1)}
	p.raw = RawStreams{Stdin: inW, Stdout: outR, Stderr: errR, Wait: func(ctx context.Context) (Exit, error) {
		select {
		case e := <-p.exit:
			return e, nil
		case <-ctx.Done():
			return Exit{}, ctx.Err()
		}
	}}
	return p
}

func smallLimits() StreamLimits {
	return StreamLimits{MaxBufferedInputBytes: 16, MaxBufferedOutputBytes: 16, HighWaterMarkBytes: 4}
}

// failures counts onFailure calls.
type failures struct {
	n    atomic.Int32
	mu   sync.Mutex
	errs []error
}

func (f *failures) record(err error) {
	f.n.Add(1)
	f.mu.Lock()
	f.errs = append(f.errs, err)
	f.mu.Unlock()
}

// own starts owned streams over p and makes sure they settle at test end.
func own(t *testing.T, p *process, limits StreamLimits) (*OwnedStreams, *failures) {
	t.Helper()
	f := &failures{}
	s := OwnStreams(p.raw, limits, f.record)
	t.Cleanup(func() {
		s.Close(nil)
		p.stdout.Close()
		p.stderr.Close()
		p.stdin.Close()
		select {
		case <-s.Done():
		case <-time.After(5 * time.Second):
			t.Error("owned streams did not settle")
		}
	})
	return s, f
}

func readAll(r io.Reader) <-chan []byte {
	ch := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(r)
		ch <- b
	}()
	return ch
}

func staged(s *OwnedStreams, o *ownedOutput) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return o.staged
}

func TestStreamsRoundTrip(t *testing.T) {
	p := newProcess()
	s, f := own(t, p, smallLimits())

	gotIn := readAll(p.stdin)
	go func() {
		p.stdout.Write([]byte("hello, "))
		p.stderr.Write([]byte("oops"))
		p.stdout.Write([]byte("world"))
		p.stdout.Close()
		p.stderr.Close()
	}()
	gotOut, gotErr := readAll(s.Stdout()), readAll(s.Stderr())

	n, err := s.Stdin().Write([]byte("input bytes"))
	assert.NilError(t, err)
	assert.Equal(t, n, 11)
	assert.NilError(t, s.Stdin().Close())
	assert.NilError(t, s.Stdin().Close(), "second half-close is nil")
	assert.Equal(t, string(<-gotIn), "input bytes", "process saw EOF after input")
	assert.Equal(t, string(<-gotOut), "hello, world")
	assert.Equal(t, string(<-gotErr), "oops")

	_, err = s.Stdin().Write([]byte("x"))
	var state *StateError
	assert.Assert(t, errors.As(err, &state), "write after close: %v", err)

	p.exit <- Exited(3)
	e, err := s.Wait(context.Background())
	assert.NilError(t, err)
	assert.DeepEqual(t, e, Exited(3))
	e, err = s.Wait(context.Background())
	assert.NilError(t, err)
	assert.DeepEqual(t, e, Exited(3)) // the receipt is kept

	select {
	case <-s.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("streams did not settle after EOF and half-close")
	}
	assert.Equal(t, f.n.Load(), int32(0))
	assert.NilError(t, s.Err())
}

func TestStdinChunks(t *testing.T) {
	p := newProcess()
	s, _ := own(t, p, smallLimits())
	done := make(chan error, 1)
	go func() {
		_, err := s.Stdin().Write([]byte("0123456789"))
		done <- err
	}()
	var sizes []int
	buf := make([]byte, 100)
	for total := 0; total < 10; {
		n, err := p.stdin.Read(buf)
		assert.NilError(t, err)
		sizes = append(sizes, n)
		total += n
	}
	assert.NilError(t, <-done)
	assert.DeepEqual(t, sizes, []int{4, 4, 2})
}

func TestStdinLifetimeLimit(t *testing.T) {
	p := newProcess()
	limits := smallLimits()
	limits.MaxStdinBytes = ptr[int64](5)
	s, f := own(t, p, limits)
	go io.Copy(io.Discard, p.stdin)

	_, err := s.Stdin().Write([]byte("abc"))
	assert.NilError(t, err)
	_, err = s.Stdin().Write([]byte("def"))
	assert.Assert(t, errors.Is(err, ErrInputLimit), "%v", err)
	assert.Equal(t, f.n.Load(), int32(1))

	_, again := s.Stdin().Write([]byte("g"))
	assert.Equal(t, again, err, "later writes return the failure")
	_, rerr := s.Stdout().Read(make([]byte, 1))
	assert.Equal(t, rerr, err, "failure closes the outputs too")
}

func TestStdinZeroLifetimeLimit(t *testing.T) {
	p := newProcess()
	limits := smallLimits()
	limits.MaxStdinBytes = ptr[int64](0)
	s, f := own(t, p, limits)
	_, err := s.Stdin().Write(nil)
	assert.NilError(t, err)
	_, err = s.Stdin().Write([]byte("a"))
	assert.Assert(t, errors.Is(err, ErrInputLimit), "%v", err)
	assert.Equal(t, f.n.Load(), int32(1))
}

func TestStdinStagingLimit(t *testing.T) {
	p := newProcess()
	limits := smallLimits()
	limits.MaxBufferedInputBytes = 8
	s, f := own(t, p, limits)

	// Nobody reads the process's stdin, so this write stays pending.
	first := make(chan error, 1)
	go func() {
		_, err := s.Stdin().Write([]byte("12345678"))
		first <- err
	}()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.stdin.pending == 8 {
			return poll.Success()
		}
		return poll.Continue("pending %d", s.stdin.pending)
	})
	_, err := s.Stdin().Write([]byte("9"))
	assert.Assert(t, errors.Is(err, ErrInputLimit), "%v", err)
	assert.Equal(t, <-first, err, "the blocked write ends with the failure")
	assert.Equal(t, f.n.Load(), int32(1))

	// A single write larger than the staging bound fails alone.
	p2 := newProcess()
	s2, f2 := own(t, p2, limits)
	_, err = s2.Stdin().Write(make([]byte, 9))
	assert.Assert(t, errors.Is(err, ErrInputLimit), "%v", err)
	assert.Equal(t, f2.n.Load(), int32(1))
}

func TestStdinRawWriteError(t *testing.T) {
	p := newProcess()
	s, f := own(t, p, smallLimits())
	p.stdin.CloseWithError(errors.New("pipe broke"))
	_, err := s.Stdin().Write([]byte("x"))
	assert.Assert(t, errors.Is(err, ErrStreamFailure), "%v", err)
	assert.ErrorContains(t, err, "pipe broke")
	assert.Equal(t, f.n.Load(), int32(1))
}

func TestOutputBackpressure(t *testing.T) {
	p := newProcess()
	s, f := own(t, p, smallLimits())
	payload := []byte("abcdefghijklmnopqrstuvwxyz")
	wrote := make(chan error, 1)
	go func() {
		_, err := p.stdout.Write(payload)
		if err == nil {
			err = p.stdout.Close()
		}
		wrote <- err
	}()
	// With no reader the pump stages one high-water mark and waits; the
	// process's write stays blocked.
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if n := staged(s, s.stdout); n == 4 {
			return poll.Success()
		}
		return poll.Continue("staged")
	})
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, staged(s, s.stdout), int64(4))
	select {
	case <-wrote:
		t.Fatal("process write completed without a reader")
	default:
	}

	// A slow reader gets everything, and staging never exceeded the mark.
	var got bytes.Buffer
	buf := make([]byte, 3)
	for {
		n, err := s.Stdout().Read(buf)
		got.Write(buf[:n])
		if err == io.EOF {
			break
		}
		assert.NilError(t, err)
		time.Sleep(time.Millisecond)
	}
	assert.NilError(t, <-wrote)
	assert.Equal(t, got.String(), string(payload))
	s.mu.Lock()
	peak := s.stdout.peak
	s.mu.Unlock()
	assert.Assert(t, peak <= 4, "peak staged %d", peak)
	assert.Equal(t, f.n.Load(), int32(0))
}

func TestOutputBufferedLimit(t *testing.T) {
	p := newProcess()
	limits := smallLimits()
	limits.MaxBufferedOutputBytes = 4
	limits.MaxBufferedInputBytes = 4
	s, f := own(t, p, limits)
	go p.stdout.Write([]byte("1234"))
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if staged(s, s.stdout) == 4 {
			return poll.Success()
		}
		return poll.Continue("staged")
	})
	go p.stderr.Write([]byte("5"))
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if f.n.Load() == 1 {
			return poll.Success()
		}
		return poll.Continue("no failure yet")
	})
	_, err := s.Stderr().Read(make([]byte, 1))
	assert.Assert(t, errors.Is(err, ErrOutputLimit), "%v", err)
	assert.ErrorContains(t, err, "buffered")
}

func TestOutputLifetimeLimit(t *testing.T) {
	p := newProcess()
	limits := smallLimits()
	limits.MaxOutputBytes = ptr[int64](5)
	s, f := own(t, p, limits)
	go readAll(s.Stdout())
	go readAll(s.Stderr())
	_, err := p.stdout.Write([]byte("abc"))
	assert.NilError(t, err)
	go p.stderr.Write([]byte("def"))
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if f.n.Load() == 1 {
			return poll.Success()
		}
		return poll.Continue("no failure yet")
	})
	assert.Assert(t, errors.Is(s.Err(), ErrOutputLimit), "%v", s.Err())
	assert.ErrorContains(t, s.Err(), "lifetime")
}

func TestOutputRawReadError(t *testing.T) {
	p := newProcess()
	s, f := own(t, p, smallLimits())
	p.stderr.CloseWithError(errors.New("attachment cut"))
	_, err := io.ReadAll(s.Stderr())
	assert.Assert(t, errors.Is(err, ErrStreamFailure), "%v", err)
	assert.ErrorContains(t, err, "attachment cut")
	assert.Equal(t, f.n.Load(), int32(1))
}

func TestOutputAbandonment(t *testing.T) {
	p := newProcess()
	s, f := own(t, p, smallLimits())
	assert.NilError(t, s.Stdout().Close())
	assert.Equal(t, f.n.Load(), int32(1))
	assert.Assert(t, errors.Is(f.errs[0], ErrStreamFailure))
	assert.ErrorContains(t, f.errs[0], "abandoned")
	_, err := s.Stdin().Write([]byte("x"))
	assert.Equal(t, err, f.errs[0])
	_, err = s.Stderr().Read(make([]byte, 1))
	assert.Equal(t, err, f.errs[0])
	_, err = s.Stdout().Read(make([]byte, 1))
	var state *StateError
	assert.Assert(t, errors.As(err, &state), "read after close: %v", err)
}

func TestOutputCloseAfterEndIsNotAbandonment(t *testing.T) {
	p := newProcess()
	s, f := own(t, p, smallLimits())
	go func() {
		p.stdout.Write([]byte("ab"))
		p.stdout.Close()
	}()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.stdout.ended {
			return poll.Success()
		}
		return poll.Continue("not ended")
	})
	assert.NilError(t, s.Stdout().Close())
	assert.Equal(t, f.n.Load(), int32(0))
}

func TestFailureExactlyOnce(t *testing.T) {
	p := newProcess()
	limits := smallLimits()
	limits.MaxStdinBytes = ptr[int64](0)
	s, f := own(t, p, limits)
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(3)
		go func() { defer wg.Done(); s.Stdout().Close() }()
		go func() { defer wg.Done(); s.Stderr().Close() }()
		go func() { defer wg.Done(); s.Stdin().Write([]byte("x")) }()
	}
	wg.Wait()
	assert.Equal(t, f.n.Load(), int32(1))
	s.Close(errors.New("later close"))
	assert.Equal(t, s.Err(), f.errs[0], "close after failure changes nothing")
}

func TestOwnerCloseDoesNotReportFailure(t *testing.T) {
	p := newProcess()
	s, f := own(t, p, smallLimits())
	blocked := make(chan error, 1)
	go func() {
		_, err := s.Stdin().Write([]byte("pending"))
		blocked <- err
	}()
	stop := errors.New("sandbox stopped")
	s.Close(stop)
	assert.Equal(t, <-blocked, stop)
	_, err := s.Stdout().Read(make([]byte, 1))
	assert.Equal(t, err, stop)
	assert.NilError(t, s.Stdout().Close())
	assert.Equal(t, f.n.Load(), int32(0))
	<-s.Done()

	p2 := newProcess()
	s2, _ := own(t, p2, smallLimits())
	s2.Close(nil)
	_, err = s2.Stdin().Write([]byte("x"))
	assert.Assert(t, errors.Is(err, ErrStreamFailure), "%v", err)
}

func TestWaitInvalidExitIsDriverFailure(t *testing.T) {
	p := newProcess()
	s, f := own(t, p, smallLimits())
	p.exit <- Exit{Kind: ExitExited, Code: 300}
	_, err := s.Wait(context.Background())
	assert.Assert(t, errors.Is(err, ErrDriverFailure), "%v", err)
	assert.Equal(t, f.n.Load(), int32(1))
}

func TestWaitContext(t *testing.T) {
	p := newProcess()
	s, f := own(t, p, smallLimits())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Wait(ctx)
	assert.Assert(t, errors.Is(err, ErrCancelled), "%v", err)
	assert.Assert(t, errors.Is(err, context.Canceled), "%v", err)
	assert.Equal(t, f.n.Load(), int32(0), "the caller giving up is not a failure")

	p.raw.Wait = func(context.Context) (Exit, error) { return Exit{}, errors.New("inspect failed") }
	p2 := newProcess()
	p2.raw.Wait = p.raw.Wait
	s2, f2 := own(t, p2, smallLimits())
	_, err = s2.Wait(context.Background())
	assert.Assert(t, errors.Is(err, ErrDriverFailure), "%v", err)
	assert.Equal(t, f2.n.Load(), int32(1))
}

func TestOwnStreamsRejectsBadInput(t *testing.T) {
	tests := map[string]func(p *process, l *StreamLimits){
		"nil stdout":     func(p *process, _ *StreamLimits) { p.raw.Stdout = nil },
		"nil wait":       func(p *process, _ *StreamLimits) { p.raw.Wait = nil },
		"shared reader":  func(p *process, _ *StreamLimits) { p.raw.Stderr = p.raw.Stdout },
		"zero hwm":       func(_ *process, l *StreamLimits) { l.HighWaterMarkBytes = 0 },
		"hwm over input": func(_ *process, l *StreamLimits) { l.MaxBufferedInputBytes = 2 },
	}
	for name, change := range tests {
		t.Run(name, func(t *testing.T) {
			p := newProcess()
			limits := smallLimits()
			change(p, &limits)
			s, f := own(t, p, limits)
			assert.Equal(t, f.n.Load(), int32(1))
			assert.Assert(t, errors.Is(s.Err(), ErrDriverFailure), "%v", s.Err())
			_, err := s.Stdout().Read(make([]byte, 1))
			assert.Assert(t, errors.Is(err, ErrDriverFailure), "%v", err)
			_, err = s.Wait(context.Background())
			assert.Assert(t, err != nil)
		})
	}
}

// outputProcess is a process whose outputs come through RawStreams.Output,
// the way a backend demultiplexing one attachment delivers them: the test
// plays the backend by sending writes on a channel.
type outputProcess struct {
	stdin  *io.PipeReader
	writes chan outputWrite
	end    chan error
	raw    RawStreams
}

type outputWrite struct {
	stderr bool
	data   string
	done   chan error
}

func newOutputProcess() *outputProcess {
	inR, inW := io.Pipe()
	p := &outputProcess{stdin: inR, writes: make(chan outputWrite), end: make(chan error, 1)}
	p.raw = RawStreams{Stdin: inW, Wait: func(ctx context.Context) (Exit, error) { return Exit{}, ctx.Err() },
		Output: func(stdout, stderr io.Writer) error {
			for {
				select {
				case w := <-p.writes:
					dst := stdout
					if w.stderr {
						dst = stderr
					}
					_, err := dst.Write([]byte(w.data))
					w.done <- err
					if err != nil {
						return err
					}
				case err := <-p.end:
					return err
				}
			}
		}}
	return p
}

func (p *outputProcess) write(stderr bool, data string) chan error {
	done := make(chan error, 1)
	go func() { p.writes <- outputWrite{stderr: stderr, data: data, done: done} }()
	return done
}

func ownOutput(t *testing.T, p *outputProcess, limits StreamLimits) (*OwnedStreams, *failures) {
	t.Helper()
	f := &failures{}
	s := OwnStreams(p.raw, limits, f.record)
	t.Cleanup(func() {
		s.Close(nil)
		p.stdin.Close()
		select {
		case p.end <- nil:
		default:
		}
		select {
		case <-s.Done():
		case <-time.After(5 * time.Second):
			t.Error("owned streams did not settle")
		}
	})
	return s, f
}

func TestOutputModeBackpressureAndEOF(t *testing.T) {
	p := newOutputProcess()
	s, f := ownOutput(t, p, smallLimits())
	payload := "abcdefghijklmnopqrstuvwxyz"
	done := p.write(false, payload)
	// Without a reader one high-water mark is staged and the write waits.
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if staged(s, s.stdout) == 4 {
			return poll.Success()
		}
		return poll.Continue("staged")
	})
	select {
	case <-done:
		t.Fatal("output write completed without a reader")
	case <-time.After(50 * time.Millisecond):
	}
	errDone := p.write(true, "err")
	var got bytes.Buffer
	buf := make([]byte, 3)
	for got.Len() < len(payload) {
		n, err := s.Stdout().Read(buf)
		assert.NilError(t, err)
		got.Write(buf[:n])
	}
	assert.NilError(t, <-done)
	assert.Equal(t, got.String(), payload)
	errOut := readAll(s.Stderr())
	assert.NilError(t, <-errDone)
	p.end <- nil
	rest, err := io.ReadAll(s.Stdout())
	assert.NilError(t, err)
	assert.Equal(t, len(rest), 0)
	assert.Equal(t, string(<-errOut), "err")
	s.mu.Lock()
	peak := s.stdout.peak
	s.mu.Unlock()
	assert.Assert(t, peak <= 4, "peak staged %d", peak)
	assert.Equal(t, f.n.Load(), int32(0))
}

func TestOutputModeErrorIsStreamFailure(t *testing.T) {
	p := newOutputProcess()
	s, f := ownOutput(t, p, smallLimits())
	cause := errors.New("frame header broken")
	p.end <- cause
	_, err := io.ReadAll(s.Stdout())
	assert.Assert(t, errors.Is(err, ErrStreamFailure), "%v", err)
	assert.Assert(t, errors.Is(err, cause), "%v", err)
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if f.n.Load() == 1 {
			return poll.Success()
		}
		return poll.Continue("no failure yet")
	})
}

func TestOutputModeWriteAfterCloseFails(t *testing.T) {
	p := newOutputProcess()
	s, _ := ownOutput(t, p, smallLimits())
	s.Close(nil)
	err := <-p.write(false, "late")
	assert.Assert(t, errors.Is(err, ErrStreamFailure), "%v", err)
}

func TestOutputModeRejectsReadersToo(t *testing.T) {
	p := newOutputProcess()
	r, w := io.Pipe()
	defer w.Close()
	raw := p.raw
	raw.Stdout = r
	s := OwnStreams(raw, smallLimits(), nil)
	<-s.Done()
	_, err := s.Stdout().Read(make([]byte, 1))
	assert.ErrorContains(t, err, "either output or stdout and stderr")
	p.stdin.Close()
}

// lendingWriter records each Write and what was staged while it ran.
type lendingWriter struct {
	s      *OwnedStreams
	got    bytes.Buffer
	writes []int
	staged []int64
	block  chan struct{} // when set, the first Write waits for it
	err    error         // returned by every Write when set
}

func (w *lendingWriter) Write(p []byte) (int, error) {
	w.writes = append(w.writes, len(p))
	w.staged = append(w.staged, staged(w.s, w.s.stdout))
	if w.block != nil {
		<-w.block
		w.block = nil
	}
	if w.err != nil {
		return 0, w.err
	}
	w.got.Write(p)
	return len(p), nil
}

// io.Copy uses WriteTo: the writer gets staged bytes in place, at most one
// high-water mark per Write, and they stay staged (their room taken) until
// the Write returned.
func TestOutputModeWriteToLendsStagedBytes(t *testing.T) {
	p := newOutputProcess()
	s, f := ownOutput(t, p, smallLimits())
	payload := "abcdefghijklmnopqrstuvwxyz"
	done := p.write(false, payload)
	w := &lendingWriter{s: s}
	copied := make(chan error, 1)
	var n int64
	go func() {
		var err error
		n, err = io.Copy(w, s.Stdout())
		copied <- err
	}()
	assert.NilError(t, <-done)
	p.end <- nil
	assert.NilError(t, <-copied)
	assert.Equal(t, n, int64(len(payload)))
	assert.Equal(t, w.got.String(), payload)
	for i, size := range w.writes {
		assert.Assert(t, size >= 1 && size <= 4, "write %d of %d bytes", i, size)
		assert.Assert(t, w.staged[i] >= int64(size) && w.staged[i] <= 4, "write %d of %d bytes with %d staged", i, size, w.staged[i])
	}
	assert.Equal(t, f.n.Load(), int32(0))
}

// A writer's error ends WriteTo and fails nothing; a Close while the writer
// holds staged bytes makes WriteTo return the close error.
func TestOutputModeWriteToErrors(t *testing.T) {
	t.Run("writer error", func(t *testing.T) {
		p := newOutputProcess()
		s, f := ownOutput(t, p, smallLimits())
		_ = p.write(false, "abc")
		cause := errors.New("disk full")
		n, err := s.stdout.WriteTo(&lendingWriter{s: s, err: cause})
		assert.Equal(t, n, int64(0))
		assert.Assert(t, errors.Is(err, cause), "%v", err)
		assert.Equal(t, f.n.Load(), int32(0))
		assert.NilError(t, s.Err())
	})
	t.Run("close while lent", func(t *testing.T) {
		p := newOutputProcess()
		s, _ := ownOutput(t, p, smallLimits())
		_ = p.write(false, "abcdefgh")
		w := &lendingWriter{s: s, block: make(chan struct{})}
		copied := make(chan error, 1)
		go func() {
			_, err := s.stdout.WriteTo(w)
			copied <- err
		}()
		poll.WaitOn(t, func(poll.LogT) poll.Result {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.stdout.lending {
				return poll.Success()
			}
			return poll.Continue("not lending yet")
		})
		closeErr := errors.New("owner closed")
		s.Close(closeErr)
		close(w.block)
		assert.Assert(t, errors.Is(<-copied, closeErr))
		assert.Equal(t, staged(s, s.stdout), int64(0))
	})
}
