// Package spill sorts byte records externally: records are gathered into
// batches of a bounded byte size, each batch is sorted and written as a run
// file in the caller's spill directory, and runs are merged k ways with a
// bounded fan-in (policy transfers.metadataBatchBytes and
// metadataMergeFanIn; docs/contract.md#workspace-files). Memory stays below
// the batch bound in bytes plus one read buffer and one record per run
// merged, whatever the number of records; it writes nothing outside the
// directory it is given, and Sorter.Close removes every run file it created.
//
// It is our own small code rather than a library: no maintained external
// sort module on the Go proxy bounds both the in-memory batch in bytes and
// the merge fan-in while writing only inside a given directory, and those
// two bounds are the point. It imports nothing of this module
// (docs/architecture.md).
package spill
