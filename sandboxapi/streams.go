package sandboxapi

import (
	"context"
	"errors"
	"io"
	"reflect"
	"sync"
)

// RawStreams are a backend's unowned process streams: what the Engine attachment
// gives before any limit is applied (docs/contract.md#processes-and-streams).
//
// Stdin receives the process's input; its Close must half-close so the
// process reads EOF. Stdout and Stderr are read by one goroutine each; when
// they also implement io.Closer, OwnedStreams closes them on failure or
// Close to unblock those reads (otherwise the backend must end them, e.g. by
// stopping the sandbox). Wait observes the leader's exit.
//
// Output replaces Stdout and Stderr (leave both nil) for a backend that
// demultiplexes both outputs from one source, such as an Engine exec
// attachment: OwnedStreams calls it once, from a goroutine of its own, with
// one writer per output. Each Write stages a copy of its bytes for the
// public reader and blocks while that output has no room (backpressure);
// after a failure or Close it returns the close error, and Output should
// return. Output returns nil when both outputs ended cleanly, or the error
// that ended them. It saves a goroutine and a copy per chunk over two
// readers fed from one source.
type RawStreams struct {
	Stdin  io.WriteCloser
	Stdout io.Reader
	Stderr io.Reader
	Output func(stdout, stderr io.Writer) error
	Wait   func(ctx context.Context) (Exit, error)
}

// OwnedStreams owns a process's raw streams and enforces the policy's
// StreamLimits on them (docs/contract.md#processes-and-streams). It implements
// Process. All byte counts are bytes; every method is safe for concurrent use.
//
// Stdin: Write hands bytes to the raw stdin in chunks of at most
// HighWaterMarkBytes, serializing concurrent writes, and returns when the
// raw stdin accepted them (backpressure). The bytes of all Write calls not
// yet returned are staged; a Write that would stage more than
// MaxBufferedInputBytes, or that would make the lifetime total exceed
// MaxStdinBytes when set, fails with an input_limit *OperationError, which
// is a failure. Close half-closes: it waits for admitted writes, then
// closes the raw stdin. Write after Close is a *StateError.
//
// Stdout and Stderr: one goroutine per raw reader (or one running Output)
// stages what it reads for the public reader in a buffer of at most
// HighWaterMarkBytes per stream, allocated at the stream's first byte and
// waiting while it is full (backpressure reaches the process through the
// raw transport). More than MaxBufferedOutputBytes
// staged over both streams, or a lifetime total over MaxOutputBytes when
// set, is an output_limit failure. Raw EOF reaches the reader as io.EOF
// after the staged bytes; a raw read error is a stream_failure failure.
// Closing a public reader before its raw stream ended is abandonment, a
// stream_failure failure; after the raw end it only discards staged bytes.
// The public readers also implement io.WriterTo, which io.Copy prefers: it
// hands the writer the staged bytes in place, each batch in one Write
// (contiguous bytes, at most HighWaterMarkBytes), and they stay staged,
// within both bounds, until that Write returned. A writer waiting for room
// waits for room for its whole chunk or half the buffer, whichever is
// smaller, so a reader of small pieces wakes it once per half buffer.
//
// A failure calls onFailure exactly once (the backend stops the whole
// sandbox there), closes all three public streams and the raw ones, and
// every later Read, Write or Close returns the failure error.
type OwnedStreams struct {
	raw       RawStreams
	limits    StreamLimits
	onFailure func(error)
	broken    bool // rejected at construction; Wait returns the failure

	mu       sync.Mutex
	cond     *sync.Cond // broadcast on every state change
	closed   bool       // after a failure or Close
	failing  bool       // a failure is being reported: onFailure runs once
	closeErr error      // what public streams return once closed
	outBytes int64      // lifetime stdout+stderr bytes

	stdin          *ownedInput
	stdout, stderr *ownedOutput

	pumps          sync.WaitGroup
	rawStdinOnce   sync.Once
	rawStdinErr    error
	rawStdinClosed chan struct{}
	done           chan struct{}

	exitMu sync.Mutex
	exit   *Exit
}

var _ Process = (*OwnedStreams)(nil)

// OwnStreams starts owning raw under limits, which should be a normalized
// policy's StreamLimits. onFailure (may be nil) is called once, from the
// goroutine that detected the first failure, with no lock held; it should
// not block for long. Incomplete or shared raw streams and invalid limits
// make the returned streams failed from the start (a driver_failure
// *OperationError, onFailure called before OwnStreams returns).
//
// OwnStreams starts two pump goroutines (one with Output) and one that
// closes Done; they end once the raw readers have ended (or been closed by a
// failure or Close, or Output returned) and stdin is half-closed or closed.
func OwnStreams(raw RawStreams, limits StreamLimits, onFailure func(error)) *OwnedStreams {
	limits.MaxStdinBytes = clonePtr(limits.MaxStdinBytes)
	limits.MaxOutputBytes = clonePtr(limits.MaxOutputBytes)
	s := &OwnedStreams{
		raw:            raw,
		limits:         limits,
		onFailure:      onFailure,
		rawStdinClosed: make(chan struct{}),
		done:           make(chan struct{}),
	}
	s.cond = sync.NewCond(&s.mu)
	s.stdin = &ownedInput{s: s}
	s.stdout = &ownedOutput{s: s, name: "stdout", raw: raw.Stdout}
	s.stderr = &ownedOutput{s: s, name: "stderr", raw: raw.Stderr}

	var bad error
	switch {
	case raw.Stdin == nil || raw.Wait == nil || (raw.Output == nil && (raw.Stdout == nil || raw.Stderr == nil)):
		bad = NewOperationError(CodeDriverFailure, nil, "the backend must supply stdin, stdout, stderr (or output) and wait")
	case raw.Output != nil && (raw.Stdout != nil || raw.Stderr != nil):
		bad = NewOperationError(CodeDriverFailure, nil, "the backend must supply either output or stdout and stderr, not both")
	case raw.Output == nil && (same(raw.Stdout, raw.Stderr) || same(raw.Stdin, raw.Stdout) || same(raw.Stdin, raw.Stderr)):
		bad = NewOperationError(CodeDriverFailure, nil, "sandbox standard streams must remain separate")
	default:
		if err := limits.Validate(); err != nil {
			bad = NewOperationError(CodeDriverFailure, err, "invalid stream limits")
		}
	}
	if bad != nil {
		s.broken = true
		s.fail(bad)
	} else if raw.Output != nil {
		s.pumps.Add(1)
		go s.pumpOutput()
	} else {
		s.pumps.Add(2)
		go s.pump(s.stdout)
		go s.pump(s.stderr)
	}
	go s.settle()
	return s
}

// same reports whether two interface values hold the same comparable value.
func same(a, b any) bool {
	return reflect.TypeOf(a) == reflect.TypeOf(b) && reflect.TypeOf(a).Comparable() && a == b
}

// Stdin returns the owned stdin; see OwnedStreams.
func (s *OwnedStreams) Stdin() io.WriteCloser { return s.stdin }

// Stdout returns the owned stdout reader; see OwnedStreams.
func (s *OwnedStreams) Stdout() io.ReadCloser { return s.stdout }

// Stderr returns the owned stderr reader; see OwnedStreams.
func (s *OwnedStreams) Stderr() io.ReadCloser { return s.stderr }

// Wait delegates to the raw Wait and validates its receipt (streams
// rejected by OwnStreams return their failure instead). The first
// observed receipt is kept and returned by every later call. An invalid
// receipt or a raw error other than ctx ending is a driver_failure
// *OperationError (a raw *OperationError is kept as is) and a failure of the
// streams; ctx ending returns a cancelled or deadline_exceeded
// *OperationError without failing anything.
func (s *OwnedStreams) Wait(ctx context.Context) (Exit, error) {
	s.exitMu.Lock()
	if s.exit != nil {
		e := *s.exit
		s.exitMu.Unlock()
		return e, nil
	}
	s.exitMu.Unlock()
	if s.broken {
		return Exit{}, s.failure()
	}
	e, err := s.raw.Wait(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return Exit{}, FromContext(ctx.Err(), "waiting for the process exit")
		}
		var op *OperationError
		if !errors.As(err, &op) {
			err = NewOperationError(CodeDriverFailure, err, "process exit observation failed")
		}
		s.fail(err)
		return Exit{}, err
	}
	if verr := e.Validate(); verr != nil {
		err := NewOperationError(CodeDriverFailure, verr, "backend reported an invalid process exit")
		s.fail(err)
		return Exit{}, err
	}
	s.exitMu.Lock()
	defer s.exitMu.Unlock()
	if s.exit == nil {
		s.exit = &e
	}
	return *s.exit, nil
}

// Close closes the three public streams and the raw ones without calling
// onFailure: the owner's shutdown, e.g. when the sandbox stops. Staged
// output is discarded; later Reads that had not yet returned io.EOF, and
// later Writes, return err, or a stream_failure *OperationError when err is
// nil. After a failure, Close does nothing.
func (s *OwnedStreams) Close(err error) {
	if err == nil {
		err = NewOperationError(CodeStreamFailure, nil, "process streams closed")
	}
	s.shutdown(err)
}

// Done is closed once the streams settled: the pump goroutines returned,
// the raw stdin was closed and no Write is still in the raw stdin.
func (s *OwnedStreams) Done() <-chan struct{} { return s.done }

// Err returns the failure or Close error, or nil while the streams are open.
func (s *OwnedStreams) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closeErr
}

func (s *OwnedStreams) failure() error {
	if err := s.Err(); err != nil {
		return err
	}
	return NewOperationError(CodeDriverFailure, nil, "process streams failed")
}

// fail shuts the streams down with err and calls onFailure, once.
func (s *OwnedStreams) fail(err error) {
	// onFailure runs before the streams close, so whoever observes the
	// failure on a stream can rely on the backend having been told (the
	// backend may itself Close the streams from onFailure).
	s.mu.Lock()
	if s.closed || s.failing {
		s.mu.Unlock()
		return
	}
	s.failing = true
	s.mu.Unlock()
	if s.onFailure != nil {
		s.onFailure(err)
	}
	s.shutdown(err)
}

// shutdown reports whether it was the first to close the streams.
func (s *OwnedStreams) shutdown(err error) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	s.closed = true
	s.closeErr = err
	for _, o := range []*ownedOutput{s.stdout, s.stderr} {
		o.discard()
	}
	s.cond.Broadcast()
	s.mu.Unlock()

	_ = s.closeRawStdin()
	for _, r := range []io.Reader{s.raw.Stdout, s.raw.Stderr} {
		if c, ok := r.(io.Closer); ok {
			_ = c.Close()
		}
	}
	return true
}

func (s *OwnedStreams) closeRawStdin() error {
	s.rawStdinOnce.Do(func() {
		if s.raw.Stdin != nil {
			s.rawStdinErr = s.raw.Stdin.Close()
		}
		close(s.rawStdinClosed)
	})
	return s.rawStdinErr
}

func (s *OwnedStreams) settle() {
	s.pumps.Wait()
	<-s.rawStdinClosed
	s.mu.Lock()
	for s.stdin.inflight > 0 {
		s.cond.Wait()
	}
	s.mu.Unlock()
	close(s.done)
}

// ownedInput is the public stdin (docs/contract.md#processes-and-streams).
type ownedInput struct {
	s          *OwnedStreams
	wmu        sync.Mutex // serializes raw writes
	admitted   int64      // lifetime bytes admitted
	pending    int64      // bytes of Write calls not yet returned
	inflight   int        // Write calls admitted and not yet returned
	halfClosed bool
}

func (in *ownedInput) Write(p []byte) (int, error) {
	s := in.s
	n := int64(len(p))
	s.mu.Lock()
	switch {
	case s.closed:
		err := s.closeErr
		s.mu.Unlock()
		return 0, err
	case in.halfClosed:
		s.mu.Unlock()
		return 0, &StateError{Message: "stdin is closed"}
	case n > s.limits.MaxBufferedInputBytes-in.pending:
		s.mu.Unlock()
		err := NewOperationError(CodeInputLimit, nil, "stdin exceeded its buffered limit of %d bytes", s.limits.MaxBufferedInputBytes)
		s.fail(err)
		return 0, err
	case s.limits.MaxStdinBytes != nil && n > *s.limits.MaxStdinBytes-in.admitted:
		s.mu.Unlock()
		err := NewOperationError(CodeInputLimit, nil, "stdin exceeded its lifetime limit of %d bytes", *s.limits.MaxStdinBytes)
		s.fail(err)
		return 0, err
	}
	in.admitted += n
	in.pending += n
	in.inflight++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		in.pending -= n
		in.inflight--
		s.cond.Broadcast()
		s.mu.Unlock()
	}()

	in.wmu.Lock()
	defer in.wmu.Unlock()
	written := 0
	for written < len(p) {
		if err := s.Err(); err != nil {
			return written, err
		}
		size := min(len(p)-written, int(s.limits.HighWaterMarkBytes))
		m, err := s.raw.Stdin.Write(p[written : written+size])
		written += max(0, min(m, size))
		if err == nil && m < size {
			err = io.ErrShortWrite
		}
		if err != nil {
			if cerr := s.Err(); cerr != nil {
				return written, cerr
			}
			ferr := NewOperationError(CodeStreamFailure, err, "stdin write failed")
			s.fail(ferr)
			return written, ferr
		}
	}
	return written, nil
}

// Close half-closes stdin: it waits for Write calls already admitted, then
// closes the raw stdin so the process reads EOF. A second Close returns nil.
func (in *ownedInput) Close() error {
	s := in.s
	s.mu.Lock()
	if in.halfClosed {
		s.mu.Unlock()
		return nil
	}
	in.halfClosed = true
	for in.inflight > 0 && !s.closed {
		s.cond.Wait()
	}
	if s.closed {
		err := s.closeErr
		s.mu.Unlock()
		return err
	}
	s.mu.Unlock()
	if err := s.closeRawStdin(); err != nil {
		if cerr := s.Err(); cerr != nil {
			return cerr
		}
		ferr := NewOperationError(CodeStreamFailure, err, "stdin half-close failed")
		s.fail(ferr)
		return ferr
	}
	return nil
}

// ownedOutput is a public stdout or stderr reader
// (docs/contract.md#processes-and-streams).
type ownedOutput struct {
	s    *OwnedStreams
	name string
	raw  io.Reader
	// ring holds the staged bytes: staged of them from head on, wrapping
	// around. It is allocated with the first byte and dropped at the end.
	ring   []byte
	head   int
	staged int64
	peak   int64 // largest staged, for tests
	ended  bool  // raw EOF is after the staged bytes

	readerEOF    bool // the reader received io.EOF
	readerClosed bool
	// lending is set while WriteTo hands staged bytes to its writer
	// straight from ring, with s.mu released: those bytes stay staged
	// (and their room taken) until the writer returned, and Read or
	// another WriteTo waits.
	lending bool
}

func (o *ownedOutput) Read(p []byte) (int, error) {
	s := o.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		switch {
		case o.readerClosed:
			return 0, &StateError{Message: o.name + " reader is closed"}
		case o.readerEOF:
			return 0, io.EOF
		case s.closed:
			return 0, s.closeErr
		case o.lending:
			// a WriteTo owns the staged bytes until its writer returns
		case o.staged > 0 && len(p) > 0:
			n := o.take(p)
			s.cond.Broadcast()
			return n, nil
		case o.ended:
			o.discard()
			o.readerEOF = true
			return 0, io.EOF
		case len(p) == 0:
			return 0, nil
		}
		s.cond.Wait()
	}
}

// WriteTo writes the output to w until its end, as io.Copy does with Read,
// but hands w the staged bytes straight from the staging buffer: no copy
// into an intermediate buffer, and each Write carries everything staged
// that is contiguous (up to HighWaterMarkBytes), so a fast w costs one
// wake-up per staged batch. The bytes handed to w stay staged, counting
// against HighWaterMarkBytes and MaxBufferedOutputBytes, until w returns;
// w must not retain them. It returns the bytes written and nil at the
// output's end, the failure or Close error as Read would, w's error (which
// fails nothing; closing the reader afterwards is abandonment as usual), or
// io.ErrShortWrite for a short write without error. Read and WriteTo on the
// same reader are serialized.
func (o *ownedOutput) WriteTo(w io.Writer) (int64, error) {
	s := o.s
	s.mu.Lock()
	defer s.mu.Unlock()
	var total int64
	for {
		switch {
		case o.readerClosed:
			return total, &StateError{Message: o.name + " reader is closed"}
		case o.readerEOF:
			return total, nil
		case s.closed:
			return total, s.closeErr
		case o.lending:
		case o.staged > 0:
			ring, head := o.ring, o.head
			n := min(int(o.staged), len(ring)-head)
			o.lending = true
			s.mu.Unlock()
			m, err := w.Write(ring[head : head+n])
			s.mu.Lock()
			o.lending = false
			s.cond.Broadcast()
			m = max(0, min(m, n))
			total += int64(m)
			if err == nil && m < n {
				err = io.ErrShortWrite
			}
			// A Close or failure meanwhile discarded the staging (and a
			// later byte may have started a new one): nothing to consume.
			if len(o.ring) > 0 && &o.ring[0] == &ring[0] && !o.readerClosed && !s.closed {
				o.head = (o.head + m) % len(o.ring)
				o.staged -= int64(m)
				if o.staged == 0 {
					o.head = 0
				}
			}
			if err != nil {
				return total, err
			}
			continue
		case o.ended:
			o.discard()
			o.readerEOF = true
			return total, nil
		}
		s.cond.Wait()
	}
}

// Close closes the reader. Before the raw stream ended this abandons the
// output, a stream_failure failure that stops the sandbox; afterwards it only
// discards staged bytes. It returns nil.
func (o *ownedOutput) Close() error {
	s := o.s
	s.mu.Lock()
	if o.readerClosed {
		s.mu.Unlock()
		return nil
	}
	o.readerClosed = true
	abandoned := !o.ended && !s.closed
	o.discard()
	s.cond.Broadcast()
	s.mu.Unlock()
	if abandoned {
		s.fail(NewOperationError(CodeStreamFailure, nil, "%s reader abandoned before the output ended", o.name))
	}
	return nil
}

// take moves staged bytes into p; the caller holds s.mu.
func (o *ownedOutput) take(p []byte) int {
	n := 0
	for n < len(p) && o.staged > 0 {
		m := copy(p[n:min(len(p), n+int(o.staged))], o.ring[o.head:min(len(o.ring), o.head+int(o.staged))])
		o.head = (o.head + m) % len(o.ring)
		o.staged -= int64(m)
		n += m
	}
	if o.staged == 0 {
		o.head = 0
	}
	return n
}

// put stages as much of p as fits and returns how much; the caller holds
// s.mu and made sure there is room.
func (o *ownedOutput) put(p []byte, hwm int64) int {
	if o.ring == nil {
		o.ring = make([]byte, hwm)
	}
	n := 0
	for n < len(p) && o.staged < int64(len(o.ring)) {
		tail := (o.head + int(o.staged)) % len(o.ring)
		end := len(o.ring)
		if tail < o.head {
			end = o.head
		}
		m := copy(o.ring[tail:end], p[n:])
		o.staged += int64(m)
		n += m
	}
	o.peak = max(o.peak, o.staged)
	return n
}

// discard drops the staged bytes and the buffer; the caller holds s.mu.
func (o *ownedOutput) discard() {
	o.ring, o.head, o.staged = nil, 0, 0
}

// pump moves one raw output into its public reader.
func (s *OwnedStreams) pump(o *ownedOutput) {
	defer s.pumps.Done()
	buf := make([]byte, s.limits.HighWaterMarkBytes)
	for {
		n, err := o.raw.Read(buf)
		if n > 0 && !s.deliver(o, buf[:n]) {
			return
		}
		if err == io.EOF {
			s.end(o)
			return
		}
		if err != nil {
			if s.Err() == nil {
				s.fail(NewOperationError(CodeStreamFailure, err, "%s read failed", o.name))
			}
			return
		}
	}
}

func (s *OwnedStreams) end(o *ownedOutput) {
	s.mu.Lock()
	o.ended = true
	s.cond.Broadcast()
	s.mu.Unlock()
}

// pumpOutput runs the raw Output with one staging writer per stream.
func (s *OwnedStreams) pumpOutput() {
	defer s.pumps.Done()
	err := s.raw.Output(&outputWriter{s: s, o: s.stdout}, &outputWriter{s: s, o: s.stderr})
	if err == nil {
		s.end(s.stdout)
		s.end(s.stderr)
		return
	}
	if s.Err() == nil {
		s.fail(NewOperationError(CodeStreamFailure, err, "output read failed"))
	}
}

// outputWriter is the writer Output gets for one stream.
type outputWriter struct {
	s *OwnedStreams
	o *ownedOutput
}

func (w *outputWriter) Write(p []byte) (int, error) {
	if !w.s.deliver(w.o, p) {
		return 0, w.s.failure()
	}
	return len(p), nil
}

// deliver stages a copy of chunk for o's reader, waiting while o's buffer
// is full. It reports whether pumping should continue.
func (s *OwnedStreams) deliver(o *ownedOutput, chunk []byte) bool {
	n := int64(len(chunk))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if limit := s.limits.MaxOutputBytes; limit != nil && n > *limit-s.outBytes {
		s.mu.Unlock()
		s.fail(NewOperationError(CodeOutputLimit, nil, "output exceeded its combined lifetime limit of %d bytes", *limit))
		s.mu.Lock()
		return false
	}
	s.outBytes += n
	hwm := s.limits.HighWaterMarkBytes
	for len(chunk) > 0 {
		// Wait for room for the whole rest of the chunk, or for half the
		// buffer: a reader taking small pieces then wakes the writer once
		// per half buffer, not once per piece.
		want := min(int64(len(chunk)), max(1, hwm/2))
		for !s.closed && !o.readerClosed && hwm-o.staged < want {
			s.cond.Wait()
		}
		if s.closed || o.readerClosed {
			return false
		}
		room := min(int64(len(chunk)), hwm-o.staged)
		if room+s.stdout.staged+s.stderr.staged > s.limits.MaxBufferedOutputBytes {
			s.mu.Unlock()
			s.fail(NewOperationError(CodeOutputLimit, nil, "output exceeded its combined buffered limit of %d bytes", s.limits.MaxBufferedOutputBytes))
			s.mu.Lock()
			return false
		}
		m := o.put(chunk[:room], hwm)
		chunk = chunk[m:]
		s.cond.Broadcast()
	}
	return true
}
