package evidence_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/platforms"
	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/evidence"
	"github.com/qualbox/qualbox/qualify/manifest"
	"github.com/qualbox/qualbox/qualify/scenario"
)

func TestExamplePolicyLoads(t *testing.T) {
	p, err := evidence.LoadPolicy(filepath.Join("..", "..", "reports", "gate-policy.yaml"), scenario.Default())
	assert.NilError(t, err)
	assert.Equal(t, len(p.Requirement.Rows), len(platforms.RowNames(func(e platforms.Entry) bool { return e.ReleaseGate != platforms.Absent })))
	assert.DeepEqual(t, p.Requirement.Harness, evidence.HarnessRequirement{Module: "github.com/qualbox/qualbox",
		Catalogues: []evidence.Catalogue{{Version: 3, SHA256: "d315d7e1823fae2d0e4a87824f540c59c42411c454ff012b3f06dcf56f474bd6"},
			{Version: 3, SHA256: "bbbba30b7482b69c1ed97dddf1c710daa67f3cce9ec0b38619b8aa3809aa3e79"},
			{Version: 4, SHA256: "0907ad7eb87e98d9341e710d419ace7b64b69df9c77c2c545c344f3f339b5171"},
			{Version: 5, SHA256: "4e3594baa1b8080a9a6efb39b5b2e5e033f971c38e81ffb5700665b0fcb29b5e"},
			{Version: 11, SHA256: "65daf115a59120c77abedba058da7ecd32445d176ec750299248cfe1585cd50d"},
			{Version: 11, SHA256: "dffc02a0cf5e4552eeb7f463b1e9025e21457deb5f319ed9fecf55d3526dafee"}}, CleanRevision: true})
	// lane C on the reference's baseline requires everything but
	// datasets, below 29.1.4; on its dataset composition, everything (of
	// a report of the current manifest: the gate requires of a report
	// only what its own pinned manifest lists).
	for _, r := range p.Requirement.Rows[3:5] {
		assert.Equal(t, r.Profile, "linux-x64")
	}
	assert.Equal(t, p.Requirement.Rows[3].Name, "ref-29.1.3")
	assert.Equal(t, len(p.Requirement.Rows[3].Scenarios), 18)
	assert.Equal(t, p.Requirement.Rows[4].Name, "ref-29.1.4")
	assert.Equal(t, len(p.Requirement.Rows[4].Scenarios), 19)
	// Lane A's committed report ran the current manifest; a tuple row's
	// ran an older one, pinned beside the current one.
	want, err := evidence.FileSHA256(filepath.Join("..", "..", "manifests", "linux-x64-cgroupv1.yaml"))
	assert.NilError(t, err)
	assert.DeepEqual(t, p.Requirement.Rows[0].Manifests, []string{want})
	current, err := evidence.FileSHA256(filepath.Join("..", "..", "manifests", "linux-x64.yaml"))
	assert.NilError(t, err)
	older, err := evidence.FileSHA256(filepath.Join("..", "..", "reports", "manifests", "linux-x64.yaml"))
	assert.NilError(t, err)
	assert.DeepEqual(t, p.Requirement.Rows[3].Manifests, []string{current, older})
	// A row's current manifest lists every scenario the row requires, so
	// a report of it owes them all.
	for _, r := range p.Requirement.Rows {
		for _, name := range r.Scenarios {
			assert.Check(t, slices.ContainsFunc(r.Pinned[0].Scenarios, func(e manifest.Entry) bool { return e.Name == name }),
				"row %s requires %s, which its current manifest %s does not list", r.Name, name, r.Pinned[0].Path)
		}
	}
	// Lane A: the catalogue but datasets and engine-restart; lane B: all.
	assert.Equal(t, len(p.Requirement.Rows[0].Scenarios), 17)
	assert.Equal(t, len(p.Requirement.Rows[1].Scenarios), 19)
	assert.Equal(t, len(p.Trust), 4)
	assert.Equal(t, filepath.Base(p.Trust[1].KeyFile), "qualbox-ed25519-2026-12-01.pub")
	assert.DeepEqual(t, p.Trust[1].Rows, []string{"lane-a", "lane-b", "lane-c"})
	assert.Equal(t, p.Trust[1].NotBefore, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	assert.Equal(t, p.Trust[1].NotAfter, time.Date(2026, 12, 1, 23, 59, 59, 0, time.UTC))
	assert.Equal(t, p.Trust[1].KeyID, attest.KeyID(p.Trust[1].Key))
	sum, err := evidence.FileSHA256(p.Path)
	assert.NilError(t, err)
	assert.Equal(t, p.SHA256, sum)
}

// The CI policy parses too, and its Desktop rows require exactly the
// scenarios their manifests run.
func TestCIPolicyLoads(t *testing.T) {
	p, err := evidence.LoadPolicy(filepath.Join("..", "..", ".github", "gate-policy.yaml"), scenario.Default())
	assert.NilError(t, err)
	assert.Assert(t, p.Requirement.Harness.CleanRevision)
	desktop := []string{"admission", "isolation", "lifecycle", "lost-engine-replies", "unsupported-quota", "datasets", "desktop-admission", "warm-pool"}
	rows := platforms.RowNames(func(e platforms.Entry) bool { return e.Engine.Kind == platforms.Desktop })
	assert.Equal(t, len(rows), 2)
	for _, r := range p.Requirement.Rows {
		if slices.Contains(rows, r.Name) {
			assert.DeepEqual(t, r.Scenarios, desktop)
			rows = slices.DeleteFunc(rows, func(n string) bool { return n == r.Name })
		}
	}
	assert.DeepEqual(t, rows, []string{})
}

const goodPolicy = `schema: qualbox.gate-policy.v2
trust:
  - key: k.pub
    rows: [lane-a]
    notBefore: 2026-12-01T00:00:00Z
    notAfter: 2026-12-01T23:59:59Z
harness:
  module: github.com/qualbox/qualbox
  catalogues: [{version: 3, sha256: ` + "d315d7e1823fae2d0e4a87824f540c59c42411c454ff012b3f06dcf56f474bd6" + `}]
  cleanRevision: true
rows:
  - name: lane-a
    profile: linux-x64-cgroupv1
    required: true
    manifests: [m.yaml]
    scenarios: [admission]
`

func TestPolicyIsStrict(t *testing.T) {
	dir := t.TempDir()
	pinned, err := os.ReadFile(filepath.Join("..", "..", "manifests", "linux-x64-cgroupv1.yaml"))
	assert.NilError(t, err)
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "m.yaml"), pinned, 0o644))
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte("profile: x\n"), 0o644))
	keys := filepath.Join(dir, "keys")
	_, pubPath, err := attest.GenerateKey(keys)
	assert.NilError(t, err)
	assert.NilError(t, os.Rename(pubPath, filepath.Join(dir, "k.pub")))
	load := func(text string) error {
		p := filepath.Join(dir, "policy.yaml")
		assert.NilError(t, os.WriteFile(p, []byte(text), 0o644))
		_, err := evidence.LoadPolicy(p, scenario.Default())
		return err
	}
	assert.NilError(t, load(goodPolicy))
	assert.NilError(t, load(goodPolicy+"maxReportAge: 720h\n"))
	assert.NilError(t, load(goodPolicy+"floors:\n  - {component: runc, minimum: 1.2.8, builds: [1.1.5+ds1-1+deb12u1]}\n  - {component: containerd, minimum: 1.7.0}\n"))
	for want, floors := range map[string]string{
		`floors[0]: component "crun": want one of [runc containerd]`: "  - {component: crun, minimum: 1.0.0}\n",
		`floors[0]: minimum "1.2": want an upstream release`:         "  - {component: runc, minimum: 1.2}\n",
		`floors[0]: minimum "1.2.8+ds1": want an upstream release`:   "  - {component: runc, minimum: 1.2.8+ds1}\n",
		"floors[0]: minimum is required":                             "  - {component: runc}\n",
		`floors[0]: builds[1] "a" is listed twice`:                   "  - {component: runc, minimum: 1.2.8, builds: [a, a]}\n",
		`floors[1]: component "runc" has a floor already`:            "  - {component: runc, minimum: 1.2.8}\n  - {component: runc, minimum: 1.3.3}\n",
		"field ceiling not found":                                    "  - {component: runc, minimum: 1.2.8, ceiling: 2}\n",
	} {
		assert.Check(t, is.ErrorContains(load(goodPolicy+"floors:\n"+floors), want), floors)
	}
	abs := strings.Replace(goodPolicy, "[m.yaml]", "["+filepath.Join(dir, "m.yaml")+"]", 1)
	assert.NilError(t, load(abs), "an absolute manifest path")
	r := strings.NewReplacer
	for want, text := range map[string]string{
		"field typo not found":                strings.Replace(goodPolicy, "rows:\n", "typo: 1\nrows:\n", 1),
		`mapping key "trust" already defined`: goodPolicy + "trust: []\n",
		`profile "linux-arm"`:                 strings.Replace(goodPolicy, "profile: linux-x64-cgroupv1", "profile: linux-arm", 1),
		"rows[0] (lane-a).manifests":          strings.Replace(goodPolicy, "[m.yaml]", "[missing.yaml]", 1),
		"at least one pinned manifest":        strings.Replace(goodPolicy, "[m.yaml]", "[]", 1),
		"rows: at least one required row":     r("rows:\n  - name: lane-a\n    profile: linux-x64-cgroupv1\n    required: true\n    manifests: [m.yaml]\n    scenarios: [admission]\n", "rows: []\n").Replace(goodPolicy),
		`rows[1].name "lane-a" is used twice`: goodPolicy + "  - {name: lane-a, profile: linux-x64, required: true, manifests: [m.yaml], scenarios: [admission]}\n",
		"more than one YAML document":         goodPolicy + "---\nschema: x\n",
		`schema "qualbox.gate-policy.v0"`:     strings.Replace(goodPolicy, "v2", "v0", 1),
		// A v1 file is named as such, not as its first unknown field.
		`schema "qualbox.gate-policy.v1" is no longer accepted: qualbox.gate-policy.v2 replaces keys with trust entries`: "schema: qualbox.gate-policy.v1\nkeys: [k.pub]\nharness: {minimumCatalogueVersion: 3}\nscenarios: [admission]\n",
		"rows[0] (lane-a).scenarios: at least one required scenario":                                                     strings.Replace(goodPolicy, "[admission]", "[]", 1),
		`rows[0] (lane-a).scenarios[1] "admission" is listed twice`:                                                      strings.Replace(goodPolicy, "[admission]", "[admission, admission]", 1),
		"trust: at least one trusted key entry":                                                                          r("trust:\n  - key: k.pub\n    rows: [lane-a]\n    notBefore: 2026-12-01T00:00:00Z\n    notAfter: 2026-12-01T23:59:59Z\n", "trust: []\n").Replace(goodPolicy),
		"trust[0].key: ":                                                                                                 strings.Replace(goodPolicy, "key: k.pub", "key: missing.pub", 1),
		`trust[0] (k.pub).rows[0] "lane-z" is not a row of this policy`:                                                  strings.Replace(goodPolicy, "rows: [lane-a]", "rows: [lane-z]", 1),
		"trust[0] (k.pub).rows: at least one row":                                                                        strings.Replace(goodPolicy, "rows: [lane-a]", "rows: []", 1),
		`trust[0] (k.pub).notAfter "2026-12-01": want an RFC 3339 time`:                                                  strings.Replace(goodPolicy, "notAfter: 2026-12-01T23:59:59Z", "notAfter: 2026-12-01", 1),
		"trust[0] (k.pub).notBefore is required":                                                                         strings.Replace(goodPolicy, "    notBefore: 2026-12-01T00:00:00Z\n", "", 1),
		"trust[0] (k.pub): notBefore 2026-12-02T00:00:00Z is not before notAfter 2026-12-01T23:59:59Z":                   strings.Replace(goodPolicy, "notBefore: 2026-12-01T00:00:00Z", "notBefore: 2026-12-02T00:00:00Z", 1),
		"trust[1].key k.pub: key ID ":                                                                                    goodPolicy[:strings.Index(goodPolicy, "harness:")] + "  - {key: k.pub, rows: [lane-a], notBefore: 2026-12-01T00:00:00Z, notAfter: 2026-12-02T00:00:00Z}\n" + goodPolicy[strings.Index(goodPolicy, "harness:"):],
		"rows[1] (lane-b): no trust entry may sign for it":                                                               goodPolicy + "  - {name: lane-b, profile: linux-x64, required: true, manifests: [m.yaml], scenarios: [admission]}\n",
		"rows[0] (lane-a).required is required (true: the row gates the release; false: informational":                   strings.Replace(goodPolicy, "    required: true\n", "", 1),
		"harness.module is required":                                                                                     strings.Replace(goodPolicy, "  module: github.com/qualbox/qualbox\n", "", 1),
		"harness.catalogues: at least one":                                                                               strings.Replace(goodPolicy, "[{version: 3, sha256: d315d7e1823fae2d0e4a87824f540c59c42411c454ff012b3f06dcf56f474bd6}]", "[]", 1),
		`harness.catalogues[0].sha256 "abc": want 64 lowercase`:                                                          strings.Replace(goodPolicy, "sha256: d315d7e1823fae2d0e4a87824f540c59c42411c454ff012b3f06dcf56f474bd6", "sha256: abc", 1),
		"harness.catalogues[0].version: want >= 1":                                                                       strings.Replace(goodPolicy, "version: 3", "version: 0", 1),
		"harness.cleanRevision is required":                                                                              strings.Replace(goodPolicy, "  cleanRevision: true\n", "", 1),
		`rows[0] (lane-a).manifests[0]: `:                                                                                strings.Replace(goodPolicy, "[m.yaml]", "[bad.yaml]", 1),
		"unknown profile":                                                                                                strings.Replace(goodPolicy, "[m.yaml]", "[bad.yaml]", 1),
		"maxReportAge -1h0m0s: want a positive duration":                                                                 goodPolicy + "maxReportAge: -1h\n",
		// The gate requires of a report only what its own pinned manifest
		// lists, so a scenario none lists would be required of no report.
		`rows[0] (lane-a).scenarios: "warm-up" is listed by none of the row's pinned manifests`: strings.Replace(goodPolicy, "[admission]", "[admission, warm-up]", 1),
	} {
		err := load(text)
		assert.ErrorContains(t, err, want)
		assert.ErrorContains(t, err, "policy.yaml")
	}
	big := strings.Repeat("# padding\n", evidence.MaxPolicyBytes/10+1)
	assert.ErrorContains(t, load(goodPolicy+big), "MaxPolicyBytes")
}
