package driver

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/moby/moby/client"

	"github.com/qualbox/qualbox/profiles"
)

// Engine identity for datasets (docs/contract.md#datasets). Image mounts
// need an Engine that handles them correctly; the reference requirement is
// a stable release at or above the profile's minEngineVersion. Engines
// built from the Moby Go module report a module version instead, often a
// pre-release ("2.0.0-beta.24"), which has no place in the stable release
// order. Two rules, each named in the evidence and in the refusal:
//
//   - stable-release: /version Version is exactly <major>.<minor>.<patch>
//     and at least minEngineVersion, and the Engine component's
//     ModuleVersion, when reported, carries no pre-release. A pre-release
//     is never read as a stable release, whatever Version says.
//   - moby-module-pin: the Engine component reports Module and
//     ModuleVersion equal to one of the profile's datasets.moduleBuilds,
//     and Version is that module version without "v" (the stamp the build
//     carries). Admitted by exact match, never by ordering.

// Rule names of the datasets Engine identity row.
const (
	RuleStableRelease = "stable-release"
	RuleModulePin     = "moby-module-pin"
)

var (
	stableVersionPattern = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$`)
	// semverPreRelease matches a semver (with or without "v") whose
	// version core is followed by a pre-release part.
	semverPreRelease = regexp.MustCompile(`^v?\d+\.\d+\.\d+-[0-9A-Za-z.-]+(\+[0-9A-Za-z.-]+)?$`)
)

// engineModule returns the Engine component's Module and ModuleVersion
// details from /version ("" when absent).
func engineModule(ver client.ServerVersionResult) (module, version string) {
	for _, c := range ver.Components {
		if c.Name == "Engine" {
			return c.Details["Module"], c.Details["ModuleVersion"]
		}
	}
	return "", ""
}

// datasetEngineIdentity is the admission row "datasets: Engine identity":
// want names both rules, got names what the Engine reported and which rule
// admitted it, or why each rule refused it.
func datasetEngineIdentity(prof profiles.Profile, ver client.ServerVersionResult) (want, got string, ok bool) {
	req := prof.Datasets
	pins := make([]string, 0, len(req.ModuleBuilds))
	for _, mb := range req.ModuleBuilds {
		pins = append(pins, mb.Module+"@"+mb.Version)
	}
	want = fmt.Sprintf("%s: stable Engine release >= %s", RuleStableRelease, req.MinEngineVersion)
	if len(pins) > 0 {
		want += fmt.Sprintf(", or %s: Moby module build %s", RuleModulePin, strings.Join(pins, " | "))
	} else {
		want += fmt.Sprintf(" (%s: profile pins no Moby module build)", RuleModulePin)
	}
	module, modVersion := engineModule(ver)
	reported := "Version " + strconv.Quote(ver.Version)
	if module != "" || modVersion != "" {
		reported += fmt.Sprintf(", Module %q, ModuleVersion %q", module, modVersion)
	}

	stableOK, stableWhy := stableRelease(req.MinEngineVersion, ver.Version, modVersion)
	if stableOK {
		return want, reported + "; admitted by " + RuleStableRelease, true
	}
	pinOK, pinWhy := modulePin(prof, module, modVersion, ver.Version)
	if pinOK {
		return want, reported + "; admitted by " + RuleModulePin, true
	}
	return want, fmt.Sprintf("%s; refused by %s: %s; refused by %s: %s", reported, RuleStableRelease, stableWhy, RuleModulePin, pinWhy), false
}

func stableRelease(min, version, modVersion string) (bool, string) {
	m := stableVersionPattern.FindStringSubmatch(version)
	switch {
	case semverPreRelease.MatchString(version):
		return false, strconv.Quote(version) + " is a pre-release, never a stable release"
	case m == nil:
		return false, strconv.Quote(version) + " is not a <major>.<minor>.<patch> release"
	case semverPreRelease.MatchString(modVersion):
		return false, fmt.Sprintf("ModuleVersion %q is a pre-release, so Version %q does not name a stable release", modVersion, version)
	}
	got, _ := engineVersion(version)
	want, _ := engineVersion(min)
	if !versionAtLeast(got, want) {
		return false, fmt.Sprintf("%s is below %s", version, min)
	}
	return true, ""
}

func modulePin(prof profiles.Profile, module, modVersion, version string) (bool, string) {
	if len(prof.Datasets.ModuleBuilds) == 0 {
		return false, "profile " + prof.Name + " pins no Moby module build"
	}
	if module == "" || modVersion == "" {
		return false, "the Engine reports no Module and ModuleVersion"
	}
	for _, mb := range prof.Datasets.ModuleBuilds {
		if mb.Module != module || mb.Version != modVersion {
			continue
		}
		if want := strings.TrimPrefix(mb.Version, "v"); version != want {
			return false, fmt.Sprintf("%s@%s is pinned but Version %q is not its stamp %q", module, modVersion, version, want)
		}
		return true, ""
	}
	return false, fmt.Sprintf("%s@%s is not pinned by profile %s", module, modVersion, prof.Name)
}
