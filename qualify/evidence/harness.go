package evidence

import (
	"fmt"
	"slices"
	"strings"

	"golang.org/x/mod/semver"
)

// Harness identifies the qualify build that produced a report, inside the
// signed statement (docs/qualification.md#evidence). A gate needs it: two
// builds with different scenario code can run the same manifest, and a
// weaker older catalogue must not meet a gate set for the current one.
//
// Two independent parts identify the code:
//   - the build: main module path and version, VCS revision and dirty flag
//     from runtime/debug build info; empty revision when the build carried
//     none (GOFLAGS=-buildvcs=false, a source tarball);
//   - the scenario catalogue: CatalogueVersion, an integer the project bumps
//     whenever a scenario's checks change meaning, and CatalogueSHA256, a
//     digest of the catalogue's Go sources embedded at build time, which
//     needs no VCS and changes with any edit. A gate pins both as an exact
//     pair (HarnessRequirement): both are claims of whoever signed.
type Harness struct {
	Module           string `json:"module"`
	Version          string `json:"version"`
	VCSRevision      string `json:"vcsRevision,omitempty"`
	VCSTime          string `json:"vcsTime,omitempty"`
	VCSModified      bool   `json:"vcsModified"`
	CatalogueVersion int    `json:"catalogueVersion"`
	CatalogueSHA256  string `json:"catalogueSha256"`
}

// String is a one-line rendering, e.g.
// "catalogue v2 (sha256 1a2b3c4d5e6f) github.com/qualbox/qualbox (devel) rev 0435368 dirty".
func (h *Harness) String() string {
	if h == nil {
		return "none"
	}
	s := fmt.Sprintf("catalogue v%d (sha256 %s) %s %s", h.CatalogueVersion, short(h.CatalogueSHA256), h.Module, h.Version)
	if h.VCSRevision != "" {
		s += " rev " + short(h.VCSRevision)
		if h.VCSModified {
			s += " dirty"
		}
	} else {
		s += " (no VCS revision)"
	}
	return s
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// Catalogue is one scenario catalogue a gate accepts: an exact pair of
// CatalogueVersion and CatalogueSHA256 (64 lowercase hex digits).
type Catalogue struct {
	Version int    `yaml:"version" json:"version"`
	SHA256  string `yaml:"sha256" json:"sha256"`
}

func (c Catalogue) String() string { return fmt.Sprintf("v%d sha256 %s", c.Version, c.SHA256) }

// HarnessRequirement is the exact harness identity a gate accepts
// (docs/qualification.md#gate): not a minimum, since a higher version
// number or any digest is only a claim of the signer.
type HarnessRequirement struct {
	// Module is the required main module path, e.g. "github.com/qualbox/qualbox".
	Module string `yaml:"module" json:"module"`
	// Catalogues are the only accepted (version, sha256) pairs; a
	// report's pair must equal one of them.
	Catalogues []Catalogue `yaml:"catalogues" json:"catalogues"`
	// CleanRevision requires a build of committed source: a VCS revision
	// without local modifications, or, for a build without VCS stamp, a
	// module version (go install ...@v1.2.3 from a module proxy, whose zip
	// the checksum database pins) rather than "(devel)".
	CleanRevision bool `yaml:"cleanRevision" json:"cleanRevision"`
}

// Check returns every way h does not meet the requirement, nil when it
// meets it. Each line names the harness identity and what is wrong.
func (r HarnessRequirement) Check(h *Harness) []string {
	if h == nil {
		return []string{"no harness identity in its signed statement: it was made by a qualify build that did not record which scenario code ran, so the gate cannot tell it from a weaker, older catalogue"}
	}
	var out []string
	if h.Module != r.Module {
		out = append(out, fmt.Sprintf("harness identity %s: module %q is not the required %q", h, h.Module, r.Module))
	}
	got := Catalogue{Version: h.CatalogueVersion, SHA256: h.CatalogueSHA256}
	if !slices.Contains(r.Catalogues, got) {
		accepted := make([]string, len(r.Catalogues))
		for i, c := range r.Catalogues {
			accepted[i] = c.String()
		}
		if slices.ContainsFunc(r.Catalogues, func(c Catalogue) bool { return c.Version == got.Version }) {
			out = append(out, fmt.Sprintf("harness identity %s: catalogue sha256 %s is not an accepted digest of catalogue version %d (accepted: %s)", h, got.SHA256, got.Version, strings.Join(accepted, ", ")))
		} else {
			out = append(out, fmt.Sprintf("harness identity %s: catalogue version %d is not an accepted catalogue (accepted: %s)", h, got.Version, strings.Join(accepted, ", ")))
		}
	}
	if r.CleanRevision {
		switch {
		case semver.Build(h.Version) != "":
			// Go marks a build of modified source "+dirty" in the version.
			out = append(out, fmt.Sprintf("harness identity %s: version %s carries build metadata %s, and a clean VCS revision is required", h, h.Version, semver.Build(h.Version)))
		case h.VCSRevision == "" && semver.IsValid(h.Version):
			// A module build of a released or pseudo version.
		case h.VCSRevision == "":
			out = append(out, fmt.Sprintf("harness identity %s: the build carries no VCS revision and no module version, and a clean VCS revision is required", h))
		case h.VCSModified:
			out = append(out, fmt.Sprintf("harness identity %s: the build of VCS revision %s has local modifications, and a clean VCS revision is required", h, h.VCSRevision))
		}
	}
	return out
}

// scenariosAdded are the catalogue versions that added the scenarios
// added after version 2 (scenario.CatalogueVersion's comment); every
// other scenario is in every catalogue.
var scenariosAdded = map[string]int{"datasets": 3, "desktop-admission": 3, "warm-pool": 10, "engine-restart": 11}

// ScenarioAddedIn returns the catalogue version that added the named
// scenario, e.g. 10 for "warm-pool"; 1 (every catalogue) for a scenario
// of the first catalogue or one it does not know. The gate excuses a
// report of an older pinned manifest from a row scenario that manifest
// does not list only when the report's catalogue version is below this
// (docs/qualification.md#gate): a catalogue that has the scenario could
// have run it, so running the older manifest skips nothing.
func ScenarioAddedIn(name string) int {
	if v, ok := scenariosAdded[name]; ok {
		return v
	}
	return 1
}
