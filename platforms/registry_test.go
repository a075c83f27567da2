package platforms

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/profiles"
)

// The registry is consistent, and every embedded profile has a platform.
func TestRegistryIsValid(t *testing.T) {
	assert.NilError(t, Validate())
	rows := Rows()
	assert.Check(t, len(rows) >= len(profiles.Names()))
	for _, p := range All() {
		assert.Check(t, slices.Contains(profiles.Names(), p.Profile), p.Profile)
	}
}

// A profile without a platform is named, with where to add it.
func TestValidateNamesAProfileWithoutPlatform(t *testing.T) {
	names := append(profiles.Names(), "linux-riscv64")
	err := validate(All(), names, func(string) error { return nil })
	var e *Error
	assert.Assert(t, errors.As(err, &e), "%v", err)
	assert.DeepEqual(t, e.Problems, []string{`profile linux-riscv64 has no platform: add one (README.md "Adding a host row")`})
}

// A platform whose profile does not load is named with the profile's
// error.
func TestValidateNamesAProfileThatDoesNotLoad(t *testing.T) {
	err := validate(All(), profiles.Names(), func(name string) error {
		if name == "linux-arm64" {
			return errors.New("profiles: linux-arm64.yaml: qualification.status: \"unqualified\", want one of [\"pending\" \"qualified\"]")
		}
		return nil
	})
	var e *Error
	assert.Assert(t, errors.As(err, &e), "%v", err)
	assert.DeepEqual(t, e.Problems, []string{`platform linux-arm64: profiles: linux-arm64.yaml: qualification.status: "unqualified", want one of ["pending" "qualified"]`})
}

// Each inconsistency Check exists for is caught, naming the platform and
// the row or manifest.
func TestCheckCatchesEachInconsistency(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(all []Platform) []Platform
		want string
	}{
		{"unknown profile", func(a []Platform) []Platform { a[0].Profile = "linux-x86"; return a }, "platform linux-x86: no profile profiles/profiles/linux-x86.yaml"},
		{"profile twice", func(a []Platform) []Platform { a[1].Profile = a[0].Profile; return a }, "platform linux-x64-cgroupv1: a second platform of the profile"},
		{"row name twice", func(a []Platform) []Platform { a[1].Rows[0].Name = "lane-a"; return a }, "row lane-a: the name is also a row of platform linux-x64-cgroupv1"},
		{"manifest file twice", func(a []Platform) []Platform { a[1].Manifests[0].File = "linux-x64-cgroupv1.yaml"; return a },
			"manifest linux-x64-cgroupv1.yaml: also a manifest of platform linux-x64-cgroupv1"},
		{"manifest path", func(a []Platform) []Platform {
			a[0].Manifests[0].File = "../x.yaml"
			a[0].Rows[0].Manifest = "../x.yaml"
			return a
		}, "manifest ../x.yaml: the file name must be NAME.yaml, in manifests/"},
		{"manifest no row runs", func(a []Platform) []Platform { a[0].Rows[1].Manifest = a[0].Rows[0].Manifest; return a },
			"manifest linux-x64-cgroupv1-lane-b.yaml: no row runs it"},
		{"row of another platform's manifest", func(a []Platform) []Platform { a[1].Rows[0].Manifest = "linux-x64-cgroupv1.yaml"; return a },
			`row lane-c: manifest "linux-x64-cgroupv1.yaml" is not one of the platform's`},
		{"unknown scenario in only", func(a []Platform) []Platform {
			a[4].Manifests[0].Only = append(a[4].Manifests[0].Only, "warm-up")
			return a
		},
			`only: "warm-up" is not a scenario of the catalogue`},
		{"unknown override", func(a []Platform) []Platform {
			a[1].Manifests[0].Overrides = append(a[1].Manifests[0].Overrides, Override{Scenario: "engine-reboot"})
			return a
		}, `overrides[2]: "engine-reboot" is not a scenario of the catalogue`},
		{"override twice", func(a []Platform) []Platform {
			a[1].Manifests[0].Overrides = append(a[1].Manifests[0].Overrides, Override{Scenario: "admission"})
			return a
		}, `overrides[2]: "admission" is overridden twice`},
		{"override of a scenario not run", func(a []Platform) []Platform {
			a[4].Manifests[0].Overrides = append(a[4].Manifests[0].Overrides, Override{Scenario: "transfer"})
			return a
		}, `overrides[3]: "transfer" is not one of the scenarios the manifest runs`},
		{"note and unnoted", func(a []Platform) []Platform {
			a[4].Manifests[0].Overrides[1].Note = "x"
			return a
		}, "overrides[1] (datasets): a note and unnoted"},
		{"waived scenario not run", func(a []Platform) []Platform { a[4].Rows[0].Waived = []string{"transfer"}; return a },
			`row desktop-native-arm64: waived scenario "transfer" is not one manifest desktop-apple-virtualization-native-arm64.yaml runs`},
		{"everything waived", func(a []Platform) []Platform { a[4].Rows[0].Waived = slices.Clone(desktopScenarios); return a },
			"row desktop-native-arm64: every scenario is waived"},
		{"no runner", func(a []Platform) []Platform { a[0].Rows[0].Runner = nil; return a }, "row lane-a: runner labels []: want at least one"},
		{"empty runner label", func(a []Platform) []Platform { a[0].Rows[0].Runner = []string{"self-hosted", ""}; return a },
			`row lane-a: runner labels ["self-hosted" ""]: want at least one, none empty`},
		{"runner label with a space", func(a []Platform) []Platform { a[0].Rows[0].Runner = []string{"self-hosted", "lane a"}; return a },
			`row lane-a: runner label "lane a": want one matching`},
		{"runner label in YAML syntax", func(a []Platform) []Platform { a[0].Rows[0].Runner = []string{"x]", "#y"}; return a },
			`row lane-a: runner label "x]": want one matching`},
		{"runner label twice", func(a []Platform) []Platform { a[0].Rows[0].Runner = []string{"self-hosted", "self-hosted"}; return a },
			`row lane-a: runner label "self-hosted" is given twice`},
		{"row name with a comma", func(a []Platform) []Platform { a[0].Rows[0].Name = "lane-a, lane-b"; return a },
			`row lane-a, lane-b: the name must match`},
		{"row name upper case", func(a []Platform) []Platform { a[0].Rows[0].Name = "Lane-A"; return a }, `row Lane-A: the name must match`},
		{"row name ending in a dash", func(a []Platform) []Platform { a[0].Rows[0].Name = "lane-"; return a }, `row lane-: the name must match`},
		{"row name empty", func(a []Platform) []Platform { a[0].Rows[0].Name = ""; return a }, `platform linux-x64-cgroupv1: a row has no name`},
		{"row name twice", func(a []Platform) []Platform { a[1].Rows[1].Name = "lane-a"; return a },
			`platform linux-x64, row lane-a: the name is also a row of platform linux-x64-cgroupv1`},
		{"no CI gate", func(a []Platform) []Platform { a[0].Rows[0].CIGate = Absent; return a }, "row lane-a: CIGate must be Informational or Required"},
		{"required but dispatch-only", func(a []Platform) []Platform { a[1].Rows[1].CIGate = Required; return a },
			"row ref-29.1.3: the CI gate requires it, but the workflow runs it only when dispatched"},
		{"CI stricter than the release gate", func(a []Platform) []Platform { a[0].Rows[0].ReleaseGate = Informational; return a },
			"row lane-a: the CI gate requires it, the release gate does not"},
		{"dispatch-only outside a guest", func(a []Platform) []Platform {
			a[0].Rows[0].DispatchOnly, a[0].Rows[0].CIGate = true, Informational
			return a
		},
			"row lane-a: dispatch-only: only a guest row's job"},
		{"no bring-up", func(a []Platform) []Platform { a[0].Rows[0].Engine = BringUp{}; return a }, "row lane-a: no Engine bring-up"},
		{"lane A with a tuple", func(a []Platform) []Platform { a[0].Rows[0].Engine.Tuple = "ref-29.1.4"; return a },
			"row lane-a: bring-up lane A (scripts/engine.sh up) takes no tuple"},
		{"guest without tuple", func(a []Platform) []Platform { a[1].Rows[0].Engine = LaneC(""); return a }, "row lane-c: a guest needs a tuple"},
		{"guest of another arch", func(a []Platform) []Platform { a[1].Rows[0].Engine.Arch = "riscv64"; return a }, "row lane-c: a guest needs a tuple and arch amd64"},
		{"hosted without version", func(a []Platform) []Platform { a[1].Rows[4].Engine = HostedDockerCE(""); return a },
			"row hosted-ubuntu: a hosted row needs the docker-ce version"},
		{"hosted on two labels", func(a []Platform) []Platform { a[1].Rows[4].Runner = []string{"ubuntu-24.04", "large"}; return a },
			"row hosted-ubuntu: a hosted row runs on one GitHub-hosted runner label"},
		{"equal tuples", func(a []Platform) []Platform { a[1].Rows[2].Tuple = a[1].Rows[3].Tuple; return a },
			"rows ref-29.1.4 and current-29.7.2 pin the same tuple"},
		{"no rows", func(a []Platform) []Platform { a[4].Rows = nil; a[4].Manifests = nil; return a }, "platform desktop-apple-virtualization-native-arm64: no rows"},
		{"release-ran lacks a scenario the manifest does not run", func(a []Platform) []Platform {
			a[0].Rows[0].ReleaseRan = &Ran{File: "x.yaml", Lacks: []string{"warm-up"}}
			return a
		}, `row lane-a: release-ran x.yaml lacks "warm-up", which manifest linux-x64-cgroupv1.yaml does not run either`},
		{"release-ran lacking nothing", func(a []Platform) []Platform { a[0].Rows[0].ReleaseRan = &Ran{File: "x.yaml"}; return a },
			"row lane-a: release-ran x.yaml: it lacks no scenario"},
		{"release-ran path", func(a []Platform) []Platform {
			a[0].Rows[0].ReleaseRan = &Ran{File: "../x.yaml", Lacks: []string{"warm-pool"}}
			return a
		},
			"row lane-a: release-ran: the file name must be NAME.yaml, in reports/manifests/"},
		{"release-ran without a release gate", func(a []Platform) []Platform {
			a[1].Rows[4].ReleaseRan = &Ran{File: "linux-x64.yaml", Lacks: []string{"engine-restart"}}
			return a
		}, "row hosted-ubuntu: release-ran linux-x64.yaml: the release gate does not hold the row"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.edit(All()), profiles.Names())
			var e *Error
			assert.Assert(t, errors.As(err, &e), "no error")
			assert.Check(t, slices.ContainsFunc(e.Problems, func(p string) bool { return strings.Contains(p, tc.want) }), "want %q in:\n%s", tc.want, err)
		})
	}
}

// All returns a copy: editing it leaves the registry alone.
func TestAllIsACopy(t *testing.T) {
	a := All()
	a[0].Rows[0].Name = "changed"
	a[0].Rows[0].Runner[0] = "changed"
	a[4].Manifests[0].Overrides[0].Params[0].YAML = "[changed]"
	assert.Check(t, is.Equal(All()[0].Rows[0].Name, "lane-a"))
	assert.Check(t, is.Equal(All()[0].Rows[0].Runner[0], "self-hosted"))
	assert.Check(t, is.Equal(All()[4].Manifests[0].Overrides[0].Params[0].YAML, "[linux-x64]"))
}

// A manifest's scenarios are the catalogue, narrowed to Only in
// catalogue order, with each override's params and note: the Desktop
// manifests run eight scenarios, admission with their own params and
// datasets without the catalogue's note; the rest keep the catalogue's.
func TestManifestScenariosApplyTheOverrides(t *testing.T) {
	got, err := All()[4].Manifests[0].Scenarios()
	assert.NilError(t, err)
	var names []string
	for _, s := range got {
		names = append(names, s.Name)
	}
	assert.DeepEqual(t, names, []string{"admission", "isolation", "lifecycle", "lost-engine-replies", "unsupported-quota", "datasets", "desktop-admission", "warm-pool"})
	assert.DeepEqual(t, got[0].Params[0], Param{Key: "reject", YAML: "[linux-x64]"})
	assert.DeepEqual(t, got[2], Catalogue[2])
	assert.Check(t, is.Equal(got[5].Note, ""))
	assert.Check(t, Catalogue[15].Name == "datasets" && Catalogue[15].Note != "")

	full, err := All()[1].Manifests[0].Scenarios()
	assert.NilError(t, err)
	assert.Equal(t, len(full), len(Catalogue))
	// linux-x64 overrides admission and, under TCG, warm-pool's maxIdle.
	for i, s := range full {
		switch s.Name {
		case "admission":
		case "warm-pool":
			assert.Check(t, is.DeepEqual(s.Params, EmulatedCPUWarmPool.Params))
		default:
			assert.Check(t, is.DeepEqual(s, Catalogue[i]))
		}
	}
}

// A row requires its manifest's scenarios less the waived ones, in run
// order, in both gates.
func TestEntryRequiredLeavesOutTheWaived(t *testing.T) {
	rows := Rows()
	i := slices.IndexFunc(rows, func(e Entry) bool { return e.Name == "lane-a" })
	assert.Assert(t, i >= 0)
	req := rows[i].Required()
	assert.Equal(t, len(req), len(Catalogue)-2)
	assert.Check(t, !slices.Contains(req, "datasets"))
	assert.Check(t, !slices.Contains(req, "engine-restart"))
	assert.Check(t, is.Equal(req[0], "admission"))

	i = slices.IndexFunc(rows, func(e Entry) bool { return e.Name == "lane-b" })
	assert.Assert(t, i >= 0)
	assert.Check(t, is.DeepEqual(rows[i].Required(), names(Catalogue)))

	i = slices.IndexFunc(rows, func(e Entry) bool { return e.Name == "ref-29.1.4" })
	assert.Assert(t, i >= 0)
	assert.Check(t, is.DeepEqual(rows[i].Required(), names(Catalogue)))
}

func names(s []Scenario) []string {
	out := make([]string, len(s))
	for i, e := range s {
		out[i] = e.Name
	}
	return out
}

// Every manifest whose Engine runs under QEMU's TCG (EmulatedCPUDeadlines)
// and runs warm-pool gives it EmulatedCPUWarmPool's maxIdle: the
// catalogue's 5 s is shorter than a pool's fill under TCG.
func TestEmulatedCPUManifestsOverrideWarmPool(t *testing.T) {
	n := 0
	for _, p := range All() {
		for _, m := range p.Manifests {
			if m.Deadlines != EmulatedCPUDeadlines {
				continue
			}
			got, err := m.Scenarios()
			assert.NilError(t, err)
			i := slices.IndexFunc(got, func(s Scenario) bool { return s.Name == "warm-pool" })
			if i < 0 {
				continue
			}
			n++
			assert.Check(t, is.DeepEqual(got[i].Params, EmulatedCPUWarmPool.Params), m.File)
		}
	}
	assert.Check(t, n >= 4, "the TCG manifests running warm-pool: lane C's and lane D's")
}
