package scenario

import (
	"context"
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/driver"
)

func desktopEnv(t *testing.T) *Env {
	return &Env{Namespace: "desktop-test", Dir: t.TempDir(), User: driver.User{UID: 65534, GID: 65534}}
}

// The whole synthetic matrix passes with no real Engine at all.
func TestDesktopAdmissionNeedsNoEngine(t *testing.T) {
	rec := NewRecord()
	assert.NilError(t, DesktopAdmission{}.Run(context.Background(), desktopEnv(t), nil, rec))
	snap := rec.Snapshot()
	assert.Equal(t, len(snap.Checks), 2*(len(desktopRejections)+1)+1+2)
	for _, c := range snap.Checks {
		assert.Check(t, c.OK, "%s: want %s, got %s", c.Name, c.Want, c.Got)
	}
	assert.Equal(t, snap.Observed["synthetic"], "synthetic: no Docker Desktop ran")
	assert.DeepEqual(t, snap.CleanupErrors, []string(nil))
}

// A shape's check fails when admission's answer differs from the exact
// expected error: here the expectation for AppArmor is made wrong.
func TestDesktopAdmissionCheckFailsOnAnotherError(t *testing.T) {
	saved := desktopRejections["apparmor"]
	desktopRejections["apparmor"] = `AppArmor: want absent, got name=apparmor absent`
	defer func() { desktopRejections["apparmor"] = saved }()
	rec := NewRecord()
	assert.NilError(t, DesktopAdmission{}.Run(context.Background(), desktopEnv(t), nil, rec))
	var failed []string
	for _, c := range rec.Snapshot().Checks {
		if !c.OK {
			failed = append(failed, c.Name)
		}
	}
	assert.DeepEqual(t, failed, []string{"synthetic: native-arm64 on apparmor", "synthetic: rosetta-amd64 on apparmor"})
}

func TestAdmissionReadsOnly(t *testing.T) {
	for _, r := range []string{"GET /_ping", "HEAD /_ping", "GET /v1.52/version", "GET /v1.52/info", "GET /v1.52/images/sha256:" + strings.Repeat("a", 64) + "/json"} {
		assert.Check(t, admissionReads.MatchString(r), r)
	}
	for _, r := range []string{"POST /v1.52/containers/create", "DELETE /v1.52/images/sha256:" + strings.Repeat("a", 64), "GET /v1.52/containers/json", "POST /v1.52/volumes/create"} {
		assert.Check(t, !admissionReads.MatchString(r), r)
	}
}
