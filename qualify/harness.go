package qualify

import (
	"runtime/debug"

	"github.com/qualbox/qualbox/qualify/evidence"
	"github.com/qualbox/qualbox/qualify/scenario"
)

// HarnessIdentity describes this build of the harness for the signed run
// evidence (docs/qualification.md#evidence): the main module, its version
// and VCS stamp from runtime/debug build info, and the scenario
// catalogue's version and source digest.
func HarnessIdentity() *evidence.Harness {
	h := &evidence.Harness{
		Module: "unknown", Version: "unknown",
		CatalogueVersion: scenario.CatalogueVersion, CatalogueSHA256: scenario.CatalogueSHA256,
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return h
	}
	h.Module, h.Version = bi.Main.Path, bi.Main.Version
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			h.VCSRevision = s.Value
		case "vcs.time":
			h.VCSTime = s.Value
		case "vcs.modified":
			h.VCSModified = s.Value == "true"
		}
	}
	return h
}
