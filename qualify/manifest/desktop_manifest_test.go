package manifest_test

import (
	"testing"

	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/platforms"
	"github.com/qualbox/qualbox/qualify/manifest"
	"github.com/qualbox/qualbox/qualify/scenario"
)

// The Mac handoff manifests (the Desktop rows of platforms/) load, name
// their Desktop profile and select desktop-admission like every manifest.
func TestDesktopManifests(t *testing.T) {
	n := 0
	for _, e := range platforms.Rows() {
		if e.Engine.Kind != platforms.Desktop {
			continue
		}
		n++
		m, err := manifest.Load("../../manifests/"+e.Manifest, scenario.Default())
		assert.NilError(t, err)
		assert.Equal(t, m.Profile, e.Profile)
		var names []string
		for _, s := range m.Scenarios {
			names = append(names, s.Name)
		}
		assert.DeepEqual(t, names, []string{"admission", "isolation", "lifecycle", "lost-engine-replies", "unsupported-quota", "datasets", "desktop-admission", "warm-pool"})
	}
	assert.Equal(t, n, 2)
}
