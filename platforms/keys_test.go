package platforms

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// The registry's keys are consistent with its rows.
func TestKeysAreValid(t *testing.T) {
	assert.NilError(t, CheckKeys(Keys(), All()))
}

// A retired key is trusted for the rows it lists only; the newest key of
// a signer also for the signer's rows no key lists, never for another
// signer's.
func TestTrustedRows(t *testing.T) {
	keys := Keys()
	rows := Rows()
	of := func(file string) []string {
		i := slices.IndexFunc(keys, func(k Key) bool { return k.File == file })
		assert.Assert(t, i >= 0, file)
		return TrustedRows(keys, keys[i], rows)
	}
	assert.Check(t, is.DeepEqual(of("qualbox-ed25519.pub"), []string{"lane-a", "lane-b"}))
	assert.Check(t, is.DeepEqual(of("qualbox-ed25519-2026-12-06.pub"), []string{"lane-a", "lane-b", "lane-c", "lane-d", "lane-d-emulated-amd64", "lane-d-cgroupfs"}))
	assert.Check(t, is.DeepEqual(of("qualbox-ci-ed25519.pub"), []string{"hosted-ubuntu", "hosted-ubuntu-arm", "desktop-native-arm64", "desktop-rosetta-amd64"}))

	rows = append(rows, Entry{Row: Row{Name: "lane-e", Engine: LaneD("ref-29.1.4", "")}})
	assert.Check(t, is.DeepEqual(of("qualbox-ed25519-2026-12-02.pub"), []string{"lane-a", "lane-b", "lane-c", "ref-29.1.3", "ref-29.1.4", "current-29.7.2", "lane-d", "lane-d-emulated-amd64"}))
	assert.Check(t, is.DeepEqual(of("qualbox-ed25519-2026-12-06.pub"), []string{"lane-a", "lane-b", "lane-c", "lane-d", "lane-d-emulated-amd64", "lane-d-cgroupfs", "lane-e"}))
}

// Each inconsistency of the keys with the registry is named.
func TestCheckKeysCatchesEachInconsistency(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func([]Key) []Key
		want string
	}{
		{"no signer", func(k []Key) []Key { k[0].Signer = ""; return k }, "key qualbox-ed25519.pub (): no signer"},
		{"a directory", func(k []Key) []Key { k[0].File = "keys/a.pub"; return k }, "key keys/a.pub (lane-host): the file name must be NAME.pub"},
		{"not .pub", func(k []Key) []Key { k[0].File = "a.pem"; return k }, "key a.pem (lane-host): the file name must be NAME.pub"},
		{"twice", func(k []Key) []Key { k[1].File = k[0].File; return k }, "key qualbox-ed25519.pub (lane-host): given twice"},
		{"a retired key without rows", func(k []Key) []Key { k[2].Rows = nil; return k },
			"key qualbox-ed25519-2026-12-02.pub (lane-host): a retired key is trusted for the rows it signed, and none are listed"},
		{"an unknown row", func(k []Key) []Key { k[3].Rows = append(k[3].Rows, "lane-z"); return k },
			`key qualbox-ed25519-2026-12-06.pub (lane-host): row "lane-z" is not a row of the registry`},
		{"another signer's row", func(k []Key) []Key { k[3].Rows = append(k[3].Rows, "hosted-ubuntu"); return k },
			`key qualbox-ed25519-2026-12-06.pub (lane-host): row "hosted-ubuntu" is signed by ci`},
		{"a row twice", func(k []Key) []Key { k[3].Rows = append(k[3].Rows, "lane-a"); return k },
			`key qualbox-ed25519-2026-12-06.pub (lane-host): row "lane-a" is given twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckKeys(tc.edit(Keys()), All())
			var e *Error
			assert.Assert(t, errors.As(err, &e), "no error")
			assert.Check(t, slices.ContainsFunc(e.Problems, func(p string) bool { return strings.Contains(p, tc.want) }), "want %q in:\n%s", tc.want, err)
		})
	}
}
