package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/qualbox/qualbox/internal/cli"
	"github.com/qualbox/qualbox/internal/exitcode"
	"github.com/qualbox/qualbox/qualify"
)

// versionInfo is what `qualify version --json` prints: one JSON object on
// one line. Its keys are those of the run evidence's harness
// (docs/qualification.md#evidence), which a gate policy's harness pins,
// plus the Go toolchain version. Every key is always present: a binary
// built without VCS stamping (go test, -buildvcs=false) has an empty
// vcsRevision and vcsTime.
type versionInfo struct {
	// Module is the main module path, "unknown" without build info.
	Module string `json:"module"`
	// Version is the main module version, "(devel)" for a source build.
	Version string `json:"version"`
	// VCSRevision is the commit the binary was built from (40 hex) or "".
	VCSRevision string `json:"vcsRevision"`
	// VCSTime is that commit's time, RFC 3339, or "".
	VCSTime string `json:"vcsTime"`
	// VCSModified is set when the tree had uncommitted changes.
	VCSModified bool `json:"vcsModified"`
	// GoVersion is the toolchain that built the binary, e.g. "go1.26.8".
	GoVersion string `json:"goVersion"`
	// CatalogueVersion and CatalogueSHA256 identify the scenario
	// catalogue compiled in (the hex SHA-256 of its source).
	CatalogueVersion int    `json:"catalogueVersion"`
	CatalogueSHA256  string `json:"catalogueSha256"`
}

// currentVersion describes this binary.
func currentVersion() versionInfo {
	h := qualify.HarnessIdentity()
	v := versionInfo{
		Module: h.Module, Version: h.Version, VCSRevision: h.VCSRevision, VCSTime: h.VCSTime, VCSModified: h.VCSModified,
		GoVersion: "unknown", CatalogueVersion: h.CatalogueVersion, CatalogueSHA256: h.CatalogueSHA256,
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		v.GoVersion = bi.GoVersion
	}
	return v
}

// versionCommand is qualify version's help and flag set; its options
// are versionOptions.
func versionCommand() *cli.Command {
	c := cli.New("qualify version", "[--json]", "Print the version, VCS revision and Go version this binary was built from, and its scenario catalogue.")
	c.Details = `--json prints one JSON object: module, version, vcsRevision, vcsTime,
vcsModified, goVersion, catalogueVersion and catalogueSha256 (the harness
identity a run records in evidence.json and a gate policy pins).`
	return c
}

// versionOptions are the flags of qualify version; it takes no positional
// arguments.
type versionOptions struct {
	cli.Positional
	asJSON bool
}

// AddFlags declares o's flags on fs.
func (o *versionOptions) AddFlags(fs *flag.FlagSet) {
	fs.BoolVar(&o.asJSON, "json", false, "print one JSON object instead of text")
}

// Validate refuses positional arguments.
func (o *versionOptions) Validate() error {
	if len(o.Args) > 0 {
		return cli.UsageError("no arguments are allowed")
	}
	return nil
}

// Exec prints this binary's version: with --json one versionInfo object
// on one line, else the text of cli.Version followed by the catalogue
// line.
func (o *versionOptions) Exec(_ context.Context, stdout, _ io.Writer) (int, error) {
	v := currentVersion()
	if o.asJSON {
		data, err := json.Marshal(v)
		if err != nil {
			return 0, failed(exitcode.Internal, err)
		}
		fmt.Fprintf(stdout, "%s\n", data)
		return exitcode.OK, nil
	}
	info, _ := debug.ReadBuildInfo()
	cli.Version(stdout, "qualify", info)
	fmt.Fprintf(stdout, "catalogue: v%d (sha256 %s)\n", v.CatalogueVersion, v.CatalogueSHA256)
	return exitcode.OK, nil
}
