// Package dataset builds the data-only images that shared read-only dataset
// scenarios and driver tests attach (docs/contract.md#datasets), without a
// registry: one layer assembled here and loaded through the Engine's
// POST /images/load. A dataset image need not match
// the workload's architecture, so Build takes any GOARCH the Engine accepts
// as an image platform. Images are never tagged; callers hold the exact ID
// and remove it with Remove.
//
// It is one of the harness's instruments (docs/architecture.md): the
// driver's tests use it, so it imports neither the driver nor the rest of
// qualify (internal/depcheck.Instruments).
package dataset
