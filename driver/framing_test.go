package driver

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/sandboxapi"
)

func frame(stream byte, payload string) []byte {
	h := make([]byte, 8, 8+len(payload))
	h[0] = stream
	binary.BigEndian.PutUint32(h[4:], uint32(len(payload)))
	return append(h, payload...)
}

// oneByteReader delivers its input a byte at a time, splitting every header.
type oneByteReader struct{ r io.Reader }

func (o oneByteReader) Read(p []byte) (int, error) { return o.r.Read(p[:1]) }

func TestDemux(t *testing.T) {
	var in []byte
	in = append(in, frame(1, "hello ")...)
	in = append(in, frame(2, "oops")...)
	in = append(in, frame(1, "")...)
	in = append(in, frame(1, "world")...)
	for name, r := range map[string]io.Reader{"whole": bytes.NewReader(in), "bytewise": oneByteReader{bytes.NewReader(in)}} {
		t.Run(name, func(t *testing.T) {
			var out, errb bytes.Buffer
			assert.NilError(t, demux(r, &out, &errb))
			assert.Check(t, is.Equal(out.String(), "hello world"))
			assert.Check(t, is.Equal(errb.String(), "oops"))
		})
	}
}

func TestDemuxRejectsMalformedFraming(t *testing.T) {
	big := make([]byte, 8)
	big[0] = 1
	binary.BigEndian.PutUint32(big[4:], FrameLimit+1)
	for _, tc := range []struct {
		name  string
		input []byte
		code  error
		msg   string
	}{
		{"stdin stream id", frame(0, "x"), sandboxapi.ErrStreamFailure, "invalid header"},
		{"stream id 3", frame(3, "x"), sandboxapi.ErrStreamFailure, "invalid header"},
		{"reserved byte", append([]byte{1, 0, 1, 0}, frame(1, "x")[4:]...), sandboxapi.ErrStreamFailure, "invalid header"},
		{"oversize declaration", big, sandboxapi.ErrOutputLimit, "1 MiB"},
		{"ends inside header", frame(1, "abc")[:5], sandboxapi.ErrStreamFailure, "inside a frame"},
		{"ends inside payload", frame(1, "abcdef")[:10], sandboxapi.ErrStreamFailure, "inside a frame"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := demux(bytes.NewReader(tc.input), io.Discard, io.Discard)
			var fe *FrameError
			assert.Assert(t, errors.As(err, &fe), "got %v", err)
			assert.Check(t, errors.Is(err, tc.code))
			assert.Check(t, strings.Contains(err.Error(), tc.msg), err.Error())
		})
	}
}

// A declared 1 MiB frame is accepted without allocating from the
// declaration: payload flows in receive-sized pieces.
func TestDemuxDeliversLargeFramesInPieces(t *testing.T) {
	payload := strings.Repeat("x", FrameLimit)
	var pieces, largest int
	w := writerFunc(func(p []byte) (int, error) {
		pieces++
		largest = max(largest, len(p))
		return len(p), nil
	})
	assert.NilError(t, demux(bytes.NewReader(frame(1, payload)), w, io.Discard))
	assert.Check(t, largest <= ReceiveChunkBytes, "largest piece %d", largest)
	assert.Check(t, pieces >= FrameLimit/ReceiveChunkBytes)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
