package driver

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/sandboxapi"
)

// A non-running exec whose exit code is still null is pending, not a
// successful exit (moby's ExecInspect would report 0). Shown with a fake
// Engine because a real one holds that state only for an instant.
func TestMonitorTreatsNullExitCodeAsPending(t *testing.T) {
	var calls atomic.Int32
	sock := fakeEngine(t, func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/exec/e1/json") {
			http.NotFound(w, r)
			return
		}
		code := "null"
		if calls.Add(1) > 3 {
			code = "4"
		}
		fmt.Fprintf(w, `{"ID":"e1","ContainerID":"c1","Running":false,"ExitCode":%s}`, code)
	})
	eng, err := newEngine(sock, "1.41")
	assert.NilError(t, err)
	defer eng.close()
	s := &sandbox{b: &Backend{}, policy: sandboxapi.Policy{Deadlines: sandboxapi.Deadlines{StartupMs: 5000, CleanupMs: 5000}}}
	p := &process{s: s, stopping: make(chan struct{}), exitCh: make(chan struct{}), streamEnded: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() { p.monitor(eng, "e1", "c1"); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("monitor did not settle")
	}
	assert.Check(t, is.Equal(p.exit, sandboxapi.Exited(4)))
	assert.Check(t, calls.Load() >= 4, "polled %d times", calls.Load())
}
