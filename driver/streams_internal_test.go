package driver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/driver/internal/enginetest"
	"github.com/qualbox/qualbox/sandboxapi"
)

// These tests exercise the exec stream path many times against one real
// sandbox. The contract allows one process per sandbox; being inside the
// package, the tests release the reservation between execs instead of
// paying a sandbox start for each of thousands of execs.

func startInternal(t *testing.T) *sandbox {
	t.Helper()
	b, err := New(Config{
		Profile: "linux-x64-cgroupv1", Endpoint: "unix://" + enginetest.Socket(), Namespace: "qualbox-streams",
		SpillDirectory: t.TempDir(), ImageID: enginetest.Image(t), User: User{UID: 65534, GID: 65534},
	})
	assert.NilError(t, err)
	t.Cleanup(func() { b.Close() })
	res, err := b.Reserve(sandboxapi.Request{Policy: enginetest.Policy()}, sandboxapi.InProcess())
	assert.NilError(t, err)
	s := res.(*sandbox)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		assert.Check(t, s.Destroy(ctx))
		eng, err := b.engine()
		assert.NilError(t, err)
		for _, r := range s.RecoveryRecord().Resources {
			in, err := inspectResource(ctx, eng, r.Role, r.Identity.ID)
			assert.Check(t, err == nil && in == nil, "%s resource %s remains (%v)", r.Role, r.Identity.ID, err)
		}
	})
	_, err = s.Start(context.Background())
	assert.NilError(t, err)
	return s
}

// execOnce runs one exec in s and releases the process reservation.
func execOnce(t *testing.T, s *sandbox, slowReader bool, args ...string) (stdout, stderr []byte, exit sandboxapi.Exit) {
	t.Helper()
	pr, err := s.ReserveProcess(sandboxapi.ProcessSpec{Executable: args[0], Args: args[1:], Cwd: "/"})
	assert.NilError(t, err)
	p, err := pr.Start(context.Background())
	assert.NilError(t, err)
	assert.NilError(t, p.Stdin().Close())
	var wg sync.WaitGroup
	var errOut, errErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		if !slowReader {
			stdout, errOut = io.ReadAll(p.Stdout())
			return
		}
		var buf bytes.Buffer
		chunk := make([]byte, 7919)
		for i := 0; ; i++ {
			n, err := p.Stdout().Read(chunk)
			buf.Write(chunk[:n])
			if err == io.EOF {
				break
			}
			if err != nil {
				errOut = err
				break
			}
			if i%64 == 0 {
				time.Sleep(2 * time.Millisecond)
			}
		}
		stdout = buf.Bytes()
	}()
	go func() { defer wg.Done(); stderr, errErr = io.ReadAll(p.Stderr()) }()
	wg.Wait()
	assert.NilError(t, errOut)
	assert.NilError(t, errErr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	exit, err = p.Wait(ctx)
	assert.NilError(t, err)
	s.mu.Lock()
	s.proc = nil
	s.mu.Unlock()
	return stdout, stderr, exit
}

func TestSequentialEchoExecsAreComplete(t *testing.T) {
	s := startInternal(t)
	n := 2000
	if testing.Short() {
		n = 200
	}
	for i := 0; i < n; i++ {
		line := fmt.Sprintf("line %d", i)
		out, errb, exit := execOnce(t, s, false, "/bin/echo", line)
		if string(out) != line+"\n" || len(errb) != 0 || exit != sandboxapi.Exited(0) {
			t.Fatalf("exec %d: stdout %q stderr %q exit %v", i, out, errb, exit)
		}
	}
}

func TestOutputSizesArriveWhole(t *testing.T) {
	s := startInternal(t)
	pattern := "abcdefghijklmnopqrstuvwxyz0123456789\n"
	for k := 16; k <= 24; k++ {
		for _, size := range []int{1<<k - 1, 1 << k, 1<<k + 1} {
			for _, slow := range []bool{false, true} {
				out, _, exit := execOnce(t, s, slow, "/bin/sh", "-c", fmt.Sprintf("yes %s | tr -d '\\n' | head -c %d", strings.TrimSuffix(pattern, "\n"), size))
				assert.Check(t, is.Equal(exit, sandboxapi.Exited(0)))
				if len(out) != size {
					t.Errorf("size %d slow=%v: got %d bytes", size, slow, len(out))
					continue
				}
				body := strings.TrimSuffix(pattern, "\n")
				for i := 0; i < len(out); i += len(body) {
					end := min(i+len(body), len(out))
					if string(out[i:end]) != body[:end-i] {
						t.Errorf("size %d slow=%v: corrupt at byte %d", size, slow, i)
						break
					}
				}
			}
		}
	}
}

func TestInterleavedStreamsAreByteExact(t *testing.T) {
	s := startInternal(t)
	out, errb, exit := execOnce(t, s, false, "/bin/sh", "-c", "i=0; while [ $i -lt 3000 ]; do echo out$i; echo err$i >&2; i=$((i+1)); done")
	assert.Check(t, is.Equal(exit, sandboxapi.Exited(0)))
	var wantOut, wantErr strings.Builder
	for i := 0; i < 3000; i++ {
		fmt.Fprintf(&wantOut, "out%d\n", i)
		fmt.Fprintf(&wantErr, "err%d\n", i)
	}
	assert.Check(t, string(out) == wantOut.String(), "stdout differs (%d bytes)", len(out))
	assert.Check(t, string(errb) == wantErr.String(), "stderr differs (%d bytes)", len(errb))
}
