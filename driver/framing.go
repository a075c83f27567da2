package driver

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/qualbox/qualbox/sandboxapi"
)

// Bounds of the Engine's multiplexed exec stream
// (docs/contract.md#processes-and-streams). moby's stdcopy grows its buffer to
// whatever a frame header declares; a sandbox controller must not let the
// guest's stream decide its memory, so the decoder is ours.
const (
	// FrameLimit is the largest frame payload a header may declare, in bytes.
	FrameLimit = 1 << 20
	// ReceiveChunkBytes is the largest read from the hijacked connection.
	ReceiveChunkBytes = 64 << 10
	frameHeaderBytes  = 8
)

// FrameError reports malformed multiplexed framing: an invalid stream ID or
// reserved bytes, an oversize declaration, or a stream ending inside a frame.
type FrameError struct {
	Message string
}

func (e *FrameError) Error() string { return "driver: exec stream framing: " + e.Message }

// Unwrap classifies the error: oversize declarations are output_limit, the
// rest stream_failure.
func (e *FrameError) Unwrap() error {
	if e.Message == oversizeFrame {
		return sandboxapi.ErrOutputLimit
	}
	return sandboxapi.ErrStreamFailure
}

const oversizeFrame = "frame declares more than 1 MiB"

// frameDecoder demultiplexes the Engine's 8-byte-header framing
// ([stream, 0, 0, 0, size uint32 BE] payload) incrementally: it stages at
// most one partial header and never allocates from a declared size.
type frameDecoder struct {
	header    [frameHeaderBytes]byte
	have      int
	remaining uint32
	stream    byte
}

// accept decodes p, calling deliver for each payload piece in order. deliver
// may block (backpressure); p is not retained after it returns.
func (d *frameDecoder) accept(p []byte, deliver func(stream byte, payload []byte) error) error {
	for len(p) > 0 {
		if d.remaining == 0 {
			n := copy(d.header[d.have:], p)
			d.have += n
			p = p[n:]
			if d.have < frameHeaderBytes {
				return nil
			}
			d.have = 0
			stream := d.header[0]
			if (stream != 1 && stream != 2) || d.header[1] != 0 || d.header[2] != 0 || d.header[3] != 0 {
				return &FrameError{Message: fmt.Sprintf("invalid header % x", d.header[:4])}
			}
			size := binary.BigEndian.Uint32(d.header[4:])
			if size > FrameLimit {
				return &FrameError{Message: oversizeFrame}
			}
			d.stream, d.remaining = stream, size
			continue
		}
		n := min(uint32(len(p)), d.remaining)
		if err := deliver(d.stream, p[:n]); err != nil {
			return err
		}
		d.remaining -= n
		p = p[n:]
	}
	return nil
}

// finish reports whether the stream ended on a frame boundary.
func (d *frameDecoder) finish() error {
	if d.have != 0 || d.remaining != 0 {
		return &FrameError{Message: "stream ended inside a frame"}
	}
	return nil
}

// demux reads r in chunks of at most ReceiveChunkBytes and writes payloads to
// stdout or stderr. It returns nil at a clean EOF.
func demux(r io.Reader, stdout, stderr io.Writer) error {
	var d frameDecoder
	buf := make([]byte, ReceiveChunkBytes)
	deliver := func(stream byte, payload []byte) error {
		w := stdout
		if stream == 2 {
			w = stderr
		}
		_, err := w.Write(payload)
		return err
	}
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if derr := d.accept(buf[:n], deliver); derr != nil {
				return derr
			}
		}
		if err == io.EOF {
			return d.finish()
		}
		if err != nil {
			return err
		}
	}
}
