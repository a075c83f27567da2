package scenario

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

func TestEngineRestartParams(t *testing.T) {
	p, err := EngineRestart{}.params(nil)
	assert.NilError(t, err)
	assert.Check(t, p.Restart == nil, "no command: not applicable at run time, not invalid")
	assert.Check(t, is.Equal(p.restartTimeout(), defaultRestartTimeout))
	assert.Check(t, is.Equal(p.readyTimeout(), defaultReadyTimeout))
	p, err = EngineRestart{}.params(map[string]any{
		"restart": []any{"systemctl", "restart", "docker"}, "liveRestoreRestart": []any{"scripts/engine.sh", "restart-b", "--live-restore"},
		"restartTimeoutSeconds": 60, "readyTimeoutSeconds": 30,
	})
	assert.NilError(t, err)
	assert.Check(t, is.DeepEqual(p.Restart, []string{"systemctl", "restart", "docker"}))
	assert.Check(t, is.Equal(p.restartTimeout(), time.Minute))
	assert.Check(t, is.Equal(p.readyTimeout(), 30*time.Second))
	for _, tc := range []struct {
		params map[string]any
		err    string
	}{
		{map[string]any{"restart": "systemctl restart docker"}, "params.restart: want []string"},
		{map[string]any{"restart": []any{}}, "params.restart: want a command as a list"},
		{map[string]any{"restart": []any{"systemctl", ""}}, "params.restart[1]: empty word"},
		{map[string]any{"restart": []any{"a\x00b"}}, "params.restart[0]: contains NUL"},
		{map[string]any{"restart": []any{"true", 1}}, "params.restart: want string"},
		{map[string]any{"restart": make([]any, 65)}, "params.restart: at most 64 words"},
		{map[string]any{"liveRestoreRestart": []any{"true"}}, "params.liveRestoreRestart: needs params.restart"},
		{map[string]any{"restart": []any{"true"}, "restartTimeoutSeconds": 3601}, "params.restartTimeoutSeconds: want 1..3600 seconds"},
		{map[string]any{"restart": []any{"true"}, "readyTimeoutSeconds": -1}, "params.readyTimeoutSeconds: want 1..3600 seconds"},
		{map[string]any{"command": []any{"true"}}, "params.command: unknown parameter"},
	} {
		assert.Check(t, is.ErrorContains(EngineRestart{}.Validate(tc.params), tc.err), "%v", tc.params)
	}
}

// The restart command runs as an argv, never through a shell, and a
// command that fails, cannot start or outlives its bound is an error with
// its exit status; at the bound its whole process group is killed.
func TestRunRestartCommand(t *testing.T) {
	ctx := context.Background()
	status, _, err := runRestartCommand(ctx, []string{"true"}, time.Minute)
	assert.NilError(t, err)
	assert.Check(t, is.Equal(status, "exit status 0"))

	status, out, err := runRestartCommand(ctx, []string{"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, time.Minute)
	assert.Check(t, is.ErrorContains(err, "exit status 3"))
	assert.Check(t, is.Equal(status, "exit status 3"))
	assert.Check(t, is.Equal(out, "out\nerr\n"))

	// An argv is not a command line: one word with a space is a program
	// name that does not exist.
	status, _, err = runRestartCommand(ctx, []string{"true false"}, time.Minute)
	assert.Check(t, is.ErrorContains(err, "start true false"))
	assert.Check(t, is.Equal(status, "not started"))

	// A command that outlives its bound is killed with its children (the
	// grandchild would hold the output pipe open otherwise).
	marker := filepath.Join(t.TempDir(), "child")
	start := time.Now()
	status, _, err = runRestartCommand(ctx, []string{"/bin/sh", "-c", "sleep 60 & echo $! > " + marker + "; wait"}, 500*time.Millisecond)
	assert.Check(t, is.ErrorContains(err, "ran longer than 500ms"))
	assert.Check(t, strings.HasPrefix(status, "killed after the 500ms bound"), status)
	assert.Check(t, time.Since(start) < 5*time.Second, "took %s", time.Since(start))
	data, rerr := os.ReadFile(marker)
	assert.NilError(t, rerr)
	if pid := strings.TrimSpace(string(data)); runtime.GOOS == "linux" {
		assert.Check(t, pathGone("/proc/"+pid, 5*time.Second), "grandchild %s still runs", pid)
	}

	status, out, err = runRestartCommand(ctx, []string{"/bin/sh", "-c", "head -c 10000 /dev/zero | tr '\\0' x"}, time.Minute)
	assert.NilError(t, err, status)
	assert.Check(t, is.Equal(len(out), maxRestartOutput+len("\n[output cut at 4 KiB]")))
}

func pathGone(path string, d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); os.IsNotExist(err) {
			return true
		}
	}
	return false
}

// scriptedEngine serves /_ping and a GET /events stream on a Unix socket:
// a scripted server, not an Engine, for the two ways a stream opened
// before a restart can go (the real-Engine tests in package qualify show
// both on lanes A and B). close ends every open stream, as a daemon that
// exits does.
func scriptedEngine(t *testing.T) (cli *client.Client, closeStreams func()) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "engine.sock")
	l, err := net.Listen("unix", sock)
	assert.NilError(t, err)
	end := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/_ping"):
			w.Write([]byte("OK"))
		case strings.HasSuffix(r.URL.Path, "/events"):
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"Type":"container","Action":"die","Actor":{"ID":"0123456789abcdef0123"}}` + "\n"))
			w.(http.Flusher).Flush()
			select {
			case <-end:
			case <-r.Context().Done():
			}
		default:
			http.NotFound(w, r)
		}
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	cli, err = client.New(client.WithHost("unix://"+sock), client.WithAPIVersion("1.41"))
	assert.NilError(t, err)
	t.Cleanup(func() { cli.Close() })
	closed := false
	return cli, func() {
		if !closed {
			close(end)
			closed = true
		}
	}
}

func TestEventWatchTellsARestartFromNone(t *testing.T) {
	cli, closeStreams := scriptedEngine(t)
	w := watchEvents(context.Background(), cli)
	got, ok := w.ended(200 * time.Millisecond)
	assert.Check(t, !ok, "a stream that stays open is no restart")
	assert.Check(t, is.Contains(got, "still open 200ms after"))
	closeStreams()
	got, ok = w.ended(5 * time.Second)
	assert.Check(t, ok, got)
	assert.Check(t, is.Contains(got, "ended "))
	events, n := w.seen()
	assert.Check(t, is.DeepEqual(events, []string{"container die 0123456789ab"}))
	assert.Check(t, is.Equal(n, 1))
	w.stop()

	// The watcher's own cancel is not an end.
	w = watchEvents(context.Background(), cli)
	w.stop()
	got, ok = w.ended(0)
	assert.Check(t, !ok, got)
}

func TestWaitReady(t *testing.T) {
	cli, _ := scriptedEngine(t)
	_, err := waitReady(context.Background(), cli, time.Second)
	assert.NilError(t, err)

	// Nothing listens: the wait ends at its bound with the last error.
	none, err := client.New(client.WithHost("unix://"+filepath.Join(t.TempDir(), "none.sock")), client.WithAPIVersion("1.41"))
	assert.NilError(t, err)
	defer none.Close()
	start := time.Now()
	_, err = waitReady(context.Background(), none, 700*time.Millisecond)
	assert.Check(t, is.ErrorContains(err, "no answer to /_ping within 700ms"))
	assert.Check(t, time.Since(start) < 5*time.Second, "took %s", time.Since(start))
}

// Without a restart command the scenario touches nothing and says why.
func TestEngineRestartWithoutCommandIsNotApplicable(t *testing.T) {
	rec := NewRecord()
	err := EngineRestart{}.Run(context.Background(), &Env{Endpoint: "unix:///nonexistent.sock"}, nil, rec)
	assert.NilError(t, err)
	snap := rec.Snapshot()
	assert.Assert(t, snap.Verdict != nil)
	assert.Check(t, is.Equal(snap.Verdict.Reason, NoRestartCommand))
	assert.Check(t, is.Len(snap.Checks, 0))
}
