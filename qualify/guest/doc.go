// Package guest assembles the qualification guest image without a registry (an
// empty base, Debian's static busybox and the project's static probe, imported
// through the Engine API; docs/architecture.md) and removes it by its exact ID.
// The image satisfies what admission requires of a workload image
// (docs/contract.md#profiles-and-admission): it contains /bin/sh and sleep,
// declares no volumes, and its only environment entry is the fixed PATH.
//
// It also reads and loads the guest image archives of `make release`
// (ReadArchive, Load): an archive that is not exactly one untagged guest
// image, or whose loaded image differs from it, is an *ArchiveError naming
// the file and the kind of problem (ArchiveProblem).
//
// It is one of the harness's instruments (docs/architecture.md): the
// driver's tests use the image, so this package and the probe's
// (guest/facts, guest/probe) import neither the driver nor the rest of
// qualify (internal/depcheck.Instruments).
package guest
