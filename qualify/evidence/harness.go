package evidence

import (
	"fmt"
	"slices"
	"strings"
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
//     whenever a scenario's checks change meaning, so a gate can demand "at
//     least N"; and CatalogueSHA256, a digest of the catalogue's Go sources
//     embedded at build time, which needs no VCS and changes with any
//     edit, so a gate can also pin exact catalogue code.
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

// HarnessRequirement is the minimum harness identity a gate accepts.
type HarnessRequirement struct {
	// MinimumCatalogueVersion is the lowest CatalogueVersion accepted (>= 1).
	MinimumCatalogueVersion int `yaml:"minimumCatalogueVersion" json:"minimumCatalogueVersion"`
	// CatalogueSHA256, when not empty, lists the only catalogue digests
	// accepted (exact scenario code).
	CatalogueSHA256 []string `yaml:"catalogueSha256,omitempty" json:"catalogueSha256,omitempty"`
	// CleanRevision requires a VCS revision without local modifications.
	CleanRevision bool `yaml:"cleanRevision,omitempty" json:"cleanRevision,omitempty"`
}

// Check returns why h does not meet the requirement, or "".
func (r HarnessRequirement) Check(h *Harness) string {
	switch {
	case h == nil:
		return "no harness identity in its signed statement: it was made by a qualify build that did not record which scenario code ran, so the gate cannot tell it from a weaker, older catalogue"
	case h.CatalogueVersion < r.MinimumCatalogueVersion:
		return fmt.Sprintf("harness identity %s: catalogue version %d is below the required minimum %d", h, h.CatalogueVersion, r.MinimumCatalogueVersion)
	case len(r.CatalogueSHA256) > 0 && !slices.Contains(r.CatalogueSHA256, h.CatalogueSHA256):
		return fmt.Sprintf("harness identity %s: catalogue sha256 %s is not one of %s", h, h.CatalogueSHA256, strings.Join(r.CatalogueSHA256, ", "))
	case r.CleanRevision && (h.VCSRevision == "" || h.VCSModified):
		return fmt.Sprintf("harness identity %s: a clean VCS revision is required", h)
	}
	return ""
}
