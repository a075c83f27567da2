package scenario

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/internal/testengine"
	"github.com/qualbox/qualbox/profiles"
	"github.com/qualbox/qualbox/qualify/evidence"
)

func TestAdmissionParamsRejectEmpty(t *testing.T) {
	for _, tc := range []struct {
		params map[string]any
		err    string
	}{
		{map[string]any{"reject": []any{}}, "params.reject: want at least one profile"},
		{map[string]any{"mustFail": []any{}}, "params.mustFail: want at least one check name"},
		{map[string]any{"mustFail": []any{" "}}, "params.mustFail[0]: want a check name"},
	} {
		assert.Check(t, is.ErrorContains(Admission{}.Validate(tc.params), tc.err), "%v", tc.params)
	}
	assert.NilError(t, Admission{}.Validate(nil))
}

// matchingFacts returns driver-reported and independent facts that agree
// with each other and with prof.
func matchingFacts(prof profiles.Profile) (*driver.Admission, independentFacts) {
	eng := driver.EngineFacts{
		DaemonID: "ABCD:EFGH", APIVersion: "1.41", MinAPIVersion: "1.12", Os: "linux", Arch: prof.Daemon.Architecture,
		CgroupVersion: "1", CgroupDriver: prof.Cgroup.Driver, SecurityOptions: []string{"name=seccomp,profile=default"},
	}
	img := driver.ImageFacts{ID: "sha256:1111", Os: "linux", Architecture: prof.Image.Architecture}
	return &driver.Admission{Profile: prof.Name, Engine: eng, Image: img}, independentFacts{Engine: eng, Image: img}
}

func failed(checks []evidence.Check) []string {
	var out []string
	for _, c := range checks {
		if !c.OK {
			out = append(out, c.Name)
		}
	}
	return out
}

func TestAdmissionCrossCheck(t *testing.T) {
	prof, err := profiles.Load("linux-x64-cgroupv1")
	assert.NilError(t, err)
	adm, ind := matchingFacts(prof)
	assert.DeepEqual(t, failed(crossCheck(adm, ind, prof, "sha256:1111")), []string(nil))

	// The driver reports what the profile wants, the Engine says otherwise:
	// both the mismatch and the independent expectation fail.
	adm, ind = matchingFacts(prof)
	ind.Engine.CgroupDriver = "systemd"
	ind.Engine.DaemonID = "OTHER"
	adm.Image.ID = "sha256:2222"
	got := failed(crossCheck(adm, ind, prof, "sha256:1111"))
	assert.DeepEqual(t, got, []string{
		"cross-check: daemon ID (driver == independent)",
		"cross-check: /info CgroupDriver (driver == independent)",
		"cross-check: image Id (driver == independent)",
		"independent: /info CgroupDriver",
	})

	adm, ind = matchingFacts(prof)
	ind.Engine.SecurityOptions = []string{"name=apparmor", "name=seccomp,profile=default"}
	ind.Engine.APIVersion = "1.20"
	got = failed(crossCheck(adm, ind, prof, "sha256:1111"))
	assert.Assert(t, len(got) == 4 && strings.Contains(strings.Join(got, "|"), "independent: SecurityOptions AppArmor"), "%q", got)
}

// asController decides what refuses a profile of another controller
// platform: without it the controller row alone (admission stops there),
// with it the Engine's own facts. Against the real Engine at
// $QUALBOX_ENGINE_SOCKET (default /var/run/docker.sock; lane A): an amd64
// Engine refuses the arm64 Desktop profile for its architecture.
func TestAdmitAsControllerReachesTheEngineFacts(t *testing.T) {
	sock := testengine.Require(t)
	// No such image: admission reads it last and refuses it too.
	env := &Env{Endpoint: "unix://" + sock, Namespace: "qualbox-admit-as", Dir: t.TempDir(), User: driver.User{UID: 65534, GID: 65534},
		ImageID: "sha256:" + strings.Repeat("0", 64)}
	prof, err := profiles.Load("desktop-apple-virtualization-native-arm64")
	assert.NilError(t, err)
	names := func(adm *driver.Admission) []string {
		var out []string
		for _, c := range adm.Failed() {
			out = append(out, c.Name)
		}
		return out
	}
	ctx := context.Background()
	adm, err := admitAs(ctx, env, prof.Name, nil)
	var admErr *driver.AdmissionError
	assert.Assert(t, errors.As(err, &admErr), "%v", err)
	assert.DeepEqual(t, names(adm), []string{"controller"})

	adm, err = admitAs(ctx, env, prof.Name, &prof.Controller)
	assert.Assert(t, errors.As(err, &admErr), "%v", err)
	got := names(adm)
	assert.Check(t, !slices.Contains(got, "controller"), "%v", got)
	for _, want := range []string{"/version Arch", "/info Architecture"} {
		assert.Check(t, slices.Contains(got, want), "%s not in %v", want, got)
	}
}
