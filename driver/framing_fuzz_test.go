package driver

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"
	"unsafe"

	"github.com/qualbox/qualbox/sandboxapi"
)

// referenceDemux is the exec stream framing written as plainly as possible
// over a whole buffer (docs/untrusted-inputs.md): it returns the payload
// bytes each stream carries up to the first problem, and the error class
// of that problem (nil, ErrOutputLimit or ErrStreamFailure). A frame cut
// short by the end of the stream still yields the payload bytes present.
func referenceDemux(data []byte) (stdout, stderr []byte, class error) {
	for len(data) > 0 {
		if len(data) < 8 {
			return stdout, stderr, sandboxapi.ErrStreamFailure
		}
		h := data[:8]
		if (h[0] != 1 && h[0] != 2) || h[1] != 0 || h[2] != 0 || h[3] != 0 {
			return stdout, stderr, sandboxapi.ErrStreamFailure
		}
		size := binary.BigEndian.Uint32(h[4:])
		if size > FrameLimit {
			return stdout, stderr, sandboxapi.ErrOutputLimit
		}
		data = data[8:]
		payload := data[:min(int(size), len(data))]
		if h[0] == 1 {
			stdout = append(stdout, payload...)
		} else {
			stderr = append(stderr, payload...)
		}
		data = data[len(payload):]
		if len(payload) < int(size) {
			return stdout, stderr, sandboxapi.ErrStreamFailure
		}
	}
	return stdout, stderr, nil
}

// splitReader returns data in reads whose sizes cycle through sizes (each
// 0..255 bytes), so headers and payloads split at arbitrary points. A zero
// size is a zero-length read, which io.Reader allows, never twice in a row.
type splitReader struct {
	data     []byte
	sizes    []byte
	i        int
	wasEmpty bool
}

func (r *splitReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := len(r.data)
	if len(r.sizes) > 0 {
		n = int(r.sizes[r.i%len(r.sizes)])
		r.i++
		if n == 0 && !r.wasEmpty {
			r.wasEmpty = true
			return 0, nil
		}
		n = max(n, 1)
	}
	r.wasEmpty = false
	n = min(n, len(p), len(r.data))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

// within reports whether sub lies inside buf's memory: the decoder hands
// out views of what it was given and never a buffer of its own.
func within(sub, buf []byte) bool {
	if len(sub) == 0 {
		return true
	}
	s, b := uintptr(unsafe.Pointer(unsafe.SliceData(sub))), uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	return s >= b && s+uintptr(len(sub)) <= b+uintptr(len(buf))
}

// FuzzFrameDecoder feeds arbitrary byte streams, split at arbitrary points,
// to the exec stream decoder. Invariants: stdout and stderr receive exactly
// the bytes referenceDemux finds; every error is a *FrameError classified
// as output_limit for an oversize declaration and stream_failure otherwise;
// every delivered piece is a view of the caller's read buffer, so no frame
// (above the bound or not) is ever allocated from its declared size.
func FuzzFrameDecoder(f *testing.F) {
	f.Fuzz(func(t *testing.T, data, sizes []byte) {
		wantOut, wantErr, wantClass := referenceDemux(data)

		check := func(how string, out, errb []byte, err error) {
			t.Helper()
			if !bytes.Equal(out, wantOut) || !bytes.Equal(errb, wantErr) {
				t.Fatalf("%s: stdout %q stderr %q, reference %q %q", how, out, errb, wantOut, wantErr)
			}
			if wantClass == nil {
				if err != nil {
					t.Fatalf("%s: %v, reference decodes cleanly", how, err)
				}
				return
			}
			var fe *FrameError
			if !errors.As(err, &fe) {
				t.Fatalf("%s: error %T %v, want *FrameError", how, err, err)
			}
			if !errors.Is(err, wantClass) {
				t.Fatalf("%s: error %v is not %v", how, err, wantClass)
			}
		}

		// demux over a reader that splits the stream.
		var out, errb bytes.Buffer
		err := demux(&splitReader{data: data, sizes: sizes}, &out, &errb)
		check("demux", out.Bytes(), errb.Bytes(), err)

		// accept/finish directly, checking each piece is a view of its input.
		var d frameDecoder
		var gotOut, gotErr []byte
		rest, i := data, 0
		err = nil
		for len(rest) > 0 && err == nil {
			n := len(rest)
			if len(sizes) > 0 {
				n = min(n, max(1, int(sizes[i%len(sizes)])))
				i++
			}
			chunk := rest[:n]
			rest = rest[n:]
			err = d.accept(chunk, func(stream byte, payload []byte) error {
				if !within(payload, chunk) {
					t.Fatalf("payload piece of %d bytes is not a view of the %d-byte input", len(payload), len(chunk))
				}
				switch stream {
				case 1:
					gotOut = append(gotOut, payload...)
				case 2:
					gotErr = append(gotErr, payload...)
				default:
					t.Fatalf("delivered stream %d", stream)
				}
				return nil
			})
		}
		if err == nil {
			err = d.finish()
		}
		check("accept", gotOut, gotErr, err)
		if d.remaining > FrameLimit {
			t.Fatalf("decoder holds a %d-byte frame, bound %d", d.remaining, FrameLimit)
		}
	})
}

// An oversize declaration is refused without allocating from it: the
// bytes allocated per refused 4 GiB header stay those of the error value.
func TestFrameDecoderOversizeAllocatesNothing(t *testing.T) {
	h := frame(1, "")
	binary.BigEndian.PutUint32(h[4:], 1<<32-1)
	const runs = 1000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range runs {
		var d frameDecoder
		if err := d.accept(h, func(byte, []byte) error { return nil }); !errors.Is(err, sandboxapi.ErrOutputLimit) {
			t.Fatalf("4 GiB frame declaration: %v, want output_limit", err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > 256 {
		t.Fatalf("%d bytes allocated per oversize header, want at most 256", per)
	}
}
