package driver

import (
	"testing"

	"github.com/moby/moby/api/types/system"
	"github.com/moby/moby/client"
	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/profiles"
)

func versionReply(version, module, moduleVersion string) client.ServerVersionResult {
	details := map[string]string{"GitCommit": "x"}
	if module != "" {
		details["Module"] = module
	}
	if moduleVersion != "" {
		details["ModuleVersion"] = moduleVersion
	}
	return client.ServerVersionResult{Version: version, Components: []system.ComponentVersion{{Name: "Engine", Version: version, Details: details}}}
}

// How Engines built from the Moby module are identified for datasets: by
// exact module pin, never by reading a pre-release as a stable release, and
// the refusal names the rule that refused (docs/contract.md#datasets).
func TestDatasetEngineIdentity(t *testing.T) {
	cgv1, err := profiles.Load("linux-x64-cgroupv1")
	assert.NilError(t, err)
	desktop, err := profiles.Load("desktop-apple-virtualization-native-arm64")
	assert.NilError(t, err)
	const moby = "github.com/moby/moby/v2"
	for _, tc := range []struct {
		name string
		prof profiles.Profile
		ver  client.ServerVersionResult
		got  string
		ok   bool
	}{
		{"stable release at the minimum", cgv1, versionReply("29.1.4", "", ""),
			`Version "29.1.4"; admitted by stable-release`, true},
		{"stable release with unstamped module metadata", desktop, versionReply("29.2.0", moby, "v2.0.0+unknown"),
			`Version "29.2.0", Module "github.com/moby/moby/v2", ModuleVersion "v2.0.0+unknown"; admitted by stable-release`, true},
		{"lane B: pinned module pre-release", cgv1, versionReply("2.0.0-beta.24", moby, "v2.0.0-beta.24"),
			`Version "2.0.0-beta.24", Module "github.com/moby/moby/v2", ModuleVersion "v2.0.0-beta.24"; admitted by moby-module-pin`, true},
		{"stable release below the minimum", cgv1, versionReply("29.1.3", "", ""),
			`Version "29.1.3"; refused by stable-release: 29.1.3 is below 29.1.4; refused by moby-module-pin: the Engine reports no Module and ModuleVersion`, false},
		{"release candidate", cgv1, versionReply("29.1.4-rc.1", "", ""),
			`Version "29.1.4-rc.1"; refused by stable-release: "29.1.4-rc.1" is a pre-release, never a stable release; refused by moby-module-pin: the Engine reports no Module and ModuleVersion`, false},
		{"lane B's build on a profile without pins", desktop, versionReply("2.0.0-beta.24", moby, "v2.0.0-beta.24"),
			`Version "2.0.0-beta.24", Module "github.com/moby/moby/v2", ModuleVersion "v2.0.0-beta.24"; refused by stable-release: "2.0.0-beta.24" is a pre-release, never a stable release; refused by moby-module-pin: profile desktop-apple-virtualization-native-arm64 pins no Moby module build`, false},
		{"another beta", cgv1, versionReply("2.0.0-beta.25", moby, "v2.0.0-beta.25"),
			`Version "2.0.0-beta.25", Module "github.com/moby/moby/v2", ModuleVersion "v2.0.0-beta.25"; refused by stable-release: "2.0.0-beta.25" is a pre-release, never a stable release; refused by moby-module-pin: github.com/moby/moby/v2@v2.0.0-beta.25 is not pinned by profile linux-x64-cgroupv1`, false},
		{"unstamped pinned build", cgv1, versionReply("library-import", moby, "v2.0.0-beta.24"),
			`Version "library-import", Module "github.com/moby/moby/v2", ModuleVersion "v2.0.0-beta.24"; refused by stable-release: "library-import" is not a <major>.<minor>.<patch> release; refused by moby-module-pin: github.com/moby/moby/v2@v2.0.0-beta.24 is pinned but Version "library-import" is not its stamp "2.0.0-beta.24"`, false},
		{"pre-release module stamped as a stable release", cgv1, versionReply("29.1.4", moby, "v2.0.0-beta.24"),
			`Version "29.1.4", Module "github.com/moby/moby/v2", ModuleVersion "v2.0.0-beta.24"; refused by stable-release: ModuleVersion "v2.0.0-beta.24" is a pre-release, so Version "29.1.4" does not name a stable release; refused by moby-module-pin: github.com/moby/moby/v2@v2.0.0-beta.24 is pinned but Version "29.1.4" is not its stamp "2.0.0-beta.24"`, false},
		{"module release below the Engine minimum", cgv1, versionReply("2.0.0", moby, "v2.0.0"),
			`Version "2.0.0", Module "github.com/moby/moby/v2", ModuleVersion "v2.0.0"; refused by stable-release: 2.0.0 is below 29.1.4; refused by moby-module-pin: github.com/moby/moby/v2@v2.0.0 is not pinned by profile linux-x64-cgroupv1`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, got, ok := datasetEngineIdentity(tc.prof, tc.ver)
			assert.Equal(t, got, tc.got)
			assert.Equal(t, ok, tc.ok)
		})
	}
	want, _, _ := datasetEngineIdentity(cgv1, versionReply("29.1.4", "", ""))
	assert.Equal(t, want, "stable-release: stable Engine release >= 29.1.4, or moby-module-pin: Moby module build github.com/moby/moby/v2@v2.0.0-beta.24")
	want, _, _ = datasetEngineIdentity(desktop, versionReply("29.1.4", "", ""))
	assert.Equal(t, want, "stable-release: stable Engine release >= 29.1.4 (moby-module-pin: profile pins no Moby module build)")
}
