package scenario

import (
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/driver"
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
