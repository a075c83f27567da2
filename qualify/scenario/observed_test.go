package scenario

import (
	"context"
	"os"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/qualify/observer"
	"github.com/qualbox/qualbox/sandboxapi"
)

// A "before" snapshot with read errors fails the scenario instead of
// letting unreadable limits pass as unlimited.
func TestCheckReadable(t *testing.T) {
	scope := observer.Scope{PID: 1, Version: 2, Dirs: map[string]string{"memory": "x", "pids": "x", "cpu": "x"}}
	rec := NewRecord()
	assert.Assert(t, !checkReadable(rec, "a: before", scope.Read(os.DirFS(t.TempDir()), "before")))
	c := rec.Snapshot().Checks[0]
	assert.Assert(t, !c.OK && c.Name == "a: before read every file", "%+v", c)
}

// The death case's tracked owner reports the latest record set.
func TestTrackedOwner(t *testing.T) {
	var o trackedOwner
	assert.Equal(t, len(o.RecoveryRecord().Resources), 0)
	r1 := sandboxapi.RecoveryRecord{SandboxID: "one"}
	o.set(recordOwner{r: r1})
	assert.Equal(t, o.RecoveryRecord().SandboxID, sandboxapi.SandboxID("one"))
	o.set(recordOwner{r: sandboxapi.RecoveryRecord{SandboxID: "two"}})
	assert.Equal(t, o.RecoveryRecord().SandboxID, sandboxapi.SandboxID("two"))
	assert.ErrorContains(t, o.Destroy(context.Background()), "record only")
}
