package manifest_test

import (
	"testing"

	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/qualify/manifest"
	"github.com/qualbox/qualbox/qualify/scenario"
)

// The Mac handoff manifests load, name their Desktop profile and select
// desktop-admission like every manifest.
func TestDesktopManifests(t *testing.T) {
	for _, name := range []string{"desktop-apple-virtualization-native-arm64", "desktop-apple-virtualization-rosetta-amd64"} {
		m, err := manifest.Load("../../manifests/"+name+".yaml", scenario.Default())
		assert.NilError(t, err)
		assert.Equal(t, m.Profile, name)
		var names []string
		for _, s := range m.Scenarios {
			names = append(names, s.Name)
		}
		assert.DeepEqual(t, names, []string{"admission", "isolation", "lifecycle", "lost-engine-replies", "unsupported-quota", "datasets", "desktop-admission"})
	}
}
