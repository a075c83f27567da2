package evidence_test

import (
	"context"
	"path/filepath"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/qualify/evidence"
	"github.com/qualbox/qualbox/qualify/scenario"
)

// Forgeries of lane D's row (docs/lanes.md#lane-d) by a holder of the
// lane key, which signs lane C's amd64 reports and lane D's arm64 ones.

// Lane C's amd64 report on 29.1.4's tuple relabelled linux-arm64 with an
// arm64 controller (qualify for arm64 through qemu-user on the amd64
// guest) has every field the lane-d row pins: Engine version and commit,
// containerd and runc, storage driver, Debian, linux/arm64. Only the
// Engine facts, re-evaluated against linux-arm64, refuse it.
func TestAmd64ReportRelabelledAsLaneDIsRefused(t *testing.T) {
	p, err := evidence.LoadPolicy(filepath.Join("..", "..", "reports", "gate-policy.yaml"), scenario.Default())
	assert.NilError(t, err)
	var laneD *evidence.Row
	for i, r := range p.Requirement.Rows {
		if r.Name == "lane-d" {
			laneD = &p.Requirement.Rows[i]
		}
	}
	assert.Assert(t, laneD != nil, "reports/gate-policy.yaml has no lane-d row")
	for _, want := range []string{`/version Arch: want "arm64", got "amd64"`, `/info Architecture: want one of arm64, aarch64, got "x86_64"`} {
		dir, keys := committedCopy(t, "linux-x64-ref-29.1.4/20261203T094113Z")
		editRun(t, dir, func(r *evidence.Run) {
			r.Profile, r.Controller.Arch = "linux-arm64", "arm64"
			r.Tuple = evidence.TupleOf(r)
			assert.Assert(t, laneD.Matches(r.Tuple), "the relabelled tuple %s matches %s", r.Tuple.Label(), laneD)
		})
		refused(t, dir, keys, "evidence.json", "Engine facts contradict profile linux-arm64, which its admission does not record: "+want)
	}
}

// isolation's "uname machine" check of lane D's report, edited: the
// verdict follows from ok alone, so verification re-derives the check
// from the profile and the probe facts the scenario observed.
func TestForgedUnameMachineIsRefused(t *testing.T) {
	const file = "02-isolation/evidence.json"
	for _, tc := range []struct {
		name, want   string
		check        func(c map[string]any)
		factsMachine string // "" keeps the observed facts
		run          func(r *evidence.Run)
	}{
		{"x86_64 workload recorded ok", `check "uname machine" is ok true with want aarch64 and got x86_64`,
			func(c map[string]any) { c["got"] = "x86_64" }, "x86_64", nil},
		{"want rewritten to the workload's machine", `check "uname machine" wants x86_64, but profile linux-arm64's image architecture arm64 is aarch64`,
			func(c map[string]any) { c["want"], c["got"] = "x86_64", "x86_64" }, "x86_64", nil},
		{"got apart from the observed facts", `check "uname machine" got aarch64, but the probe facts it observed say machine "x86_64"`,
			func(map[string]any) {}, "x86_64", nil},
		{"check renamed away", `isolation passed without its "uname machine" check, which profile linux-arm64 (images arm64, daemon arm64) requires`,
			func(c map[string]any) { c["name"] = "machine" }, "", nil},
		// Catalogue version 4, which the policy also accepts, had no such
		// check: the claim (the signer's own) does not exempt the report.
		{"check renamed away under catalogue v4's identity", `isolation passed without its "uname machine" check, which profile linux-arm64 (images arm64, daemon arm64) requires`,
			func(c map[string]any) { c["name"] = "machine" }, "", func(r *evidence.Run) {
				r.Harness.CatalogueVersion, r.Harness.CatalogueSHA256 = 4, "0907ad7eb87e98d9341e710d419ace7b64b69df9c77c2c545c344f3f339b5171"
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, keys := committedCopy(t, "linux-arm64/20261203T125319Z")
			editJSON(t, filepath.Join(dir, filepath.FromSlash(file)), func(s *map[string]any) {
				found := false
				for _, c := range (*s)["checks"].([]any) {
					if c := c.(map[string]any); c["name"] == "uname machine" {
						tc.check(c)
						found = true
					}
				}
				assert.Assert(t, found, "%s has no uname machine check", file)
				if tc.factsMachine != "" {
					(*s)["observed"].(map[string]any)["facts"].(map[string]any)["machine"] = tc.factsMachine
				}
			})
			if tc.run != nil {
				editRun(t, dir, tc.run)
			}
			refused(t, dir, keys, file, tc.want)
		})
	}
}

// qemu-user through binfmt_misc tells uname(2) the emulated machine, so
// lane D's report, every check passing, would read the same on an x86-64
// kernel running the arm64 Engine, controller and workload through
// qemu-aarch64. The report's host facts then list that handler: with it
// (and binfmt_misc enabled, or its state not recorded as in reports made
// before it was), the native row's report is refused. The same holds for
// an amd64 row's report listing qemu-x86_64. With binfmt_misc disabled as
// a whole no handler runs, and the report verifies.
func TestNativeReportWithItsOwnArchitectureEmulatedIsRefused(t *testing.T) {
	handler := map[string]evidence.BinfmtHandler{
		"arm64": {Name: "qemu-aarch64", Interpreter: "/usr/libexec/qemu-binfmt/aarch64-binfmt-P", Flags: "PF",
			Magic: "7f454c460201010000000000000000000200b700", Mask: "ffffffffffffff00fffffffffffffffffeffffff"},
		"amd64": {Name: "qemu-x86_64", Interpreter: "/usr/bin/qemu-x86_64-static", Flags: "F",
			Magic: "7f454c4602010100000000000000000002003e00", Mask: "fffffffffffefe00fffffffffffffffffeffffff"},
	}
	emulated := func(arch, state string) func(r *evidence.Run) {
		return func(r *evidence.Run) {
			h := handler[arch]
			r.Host.BinfmtMisc, r.Host.BinfmtHandlers, r.Host.Binfmt = state, []evidence.BinfmtHandler{h}, []string{h.String()}
		}
	}
	for _, tc := range []struct{ name, report, arch, state string }{
		{"lane D, binfmt_misc enabled", "linux-arm64/20261203T125319Z", "arm64", "enabled"},
		{"lane D, binfmt_misc state not recorded", "linux-arm64/20261203T125319Z", "arm64", ""},
		{"lane C on 29.1.4, binfmt_misc enabled", "linux-x64-ref-29.1.4/20261203T094113Z", "amd64", "enabled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, keys := committedCopy(t, tc.report)
			editRun(t, dir, emulated(tc.arch, tc.state))
			refused(t, dir, keys, "evidence.json", "handler "+handler[tc.arch].Name+" runs "+tc.arch+" executables, the daemon's own architecture")
		})
	}
	t.Run("binfmt_misc disabled", func(t *testing.T) {
		dir, keys := committedCopy(t, "linux-arm64/20261203T125319Z")
		editRun(t, dir, emulated("arm64", "disabled"))
		resign(t, dir, keys)
		_, err := evidence.VerifyRun(context.Background(), dir, pub(t, keys))
		assert.NilError(t, err)
	})
	// The handler kept from the lines a reader sees.
	t.Run("handler left out of the lines", func(t *testing.T) {
		dir, keys := committedCopy(t, "linux-arm64/20261203T125319Z")
		editRun(t, dir, func(r *evidence.Run) {
			emulated("arm64", "disabled")(r)
			r.Host.Binfmt = nil
		})
		refused(t, dir, keys, "evidence.json", `host binfmt [], but its binfmtHandlers read ["qemu-aarch64 /usr/libexec/qemu-binfmt/aarch64-binfmt-P flags PF"]`)
	})
}
