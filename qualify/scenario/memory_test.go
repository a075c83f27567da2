package scenario

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"

	"github.com/qualbox/qualbox/qualify/observer"
	"github.com/qualbox/qualbox/sandboxapi"
)

// The control case's oom_kill is read across the stop: a kill counted
// after the "during" snapshot is seen, also when the scope directory is
// removed before the receipt (the last polled value stands).
func TestOOMWatchAcrossStop(t *testing.T) {
	for _, removed := range []bool{false, true} {
		root := t.TempDir()
		dir := "sys/fs/cgroup/memory/docker/x"
		assert.NilError(t, os.MkdirAll(filepath.Join(root, dir), 0o755))
		write := func(n string) {
			tmp := filepath.Join(root, dir, ".tmp")
			assert.NilError(t, os.WriteFile(tmp, []byte("oom_kill_disable 0\nunder_oom 0\noom_kill "+n+"\n"), 0o644))
			assert.NilError(t, os.Rename(tmp, filepath.Join(root, dir, "memory.oom_control")))
		}
		write("0")
		scope := observer.Scope{PID: 1, Version: 1, Dirs: map[string]string{"memory": dir}}
		fsys := os.DirFS(root)
		during, err := scope.OOMKills(fsys)
		assert.NilError(t, err)

		w := watchOOMKills(fsys, scope, time.Millisecond)
		write("1") // the kernel OOM-kills during the stop
		poll.WaitOn(t, func(poll.LogT) poll.Result {
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.last != nil && *w.last == 1 {
				return poll.Success()
			}
			return poll.Continue("not polled yet")
		}, poll.WithDelay(time.Millisecond))
		if removed {
			assert.NilError(t, os.RemoveAll(filepath.Join(root, "sys")))
		}
		got := w.finish()
		assert.Assert(t, got.Value != nil && *got.Value == 1, "%+v", got)
		assert.Equal(t, strings.HasPrefix(got.Source, "last of "), removed, got.Source)
		delta := *got.Value - during
		assert.Equal(t, KillCause(sandboxapi.Exited(137), delta), "oom")
		assert.Equal(t, KillCause(sandboxapi.Exited(137), 0), "killed (not OOM)")
	}
}

func TestOOMWatchNoRead(t *testing.T) {
	scope := observer.Scope{PID: 1, Version: 2, Dirs: map[string]string{"memory": "sys/fs/cgroup/none"}}
	got := watchOOMKills(os.DirFS(t.TempDir()), scope, time.Millisecond).finish()
	assert.Assert(t, got.Value == nil)
	assert.Assert(t, strings.HasPrefix(got.Source, "no successful read"), got.Source)
}
