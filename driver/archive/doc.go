// Package archive validates the tar streams a workspace export reads from the
// Engine, incrementally and block by block (docs/contract.md#workspace-files).
// It is deliberately our own code rather than archive/tar's reader: archive/tar
// accepts base-256 and PAX size overrides, GNU sparse maps, link and special
// records, truncation at an entry boundary and missing end blocks, while an
// export must bound every entry and reject all of those with an error naming the
// entry. The bound and the checks are the point.
//
// A Reader checks header checksums, ustar magic, the octal size field (at
// most 8 GiB - 1), local PAX records, body length and zero padding, complete
// termination (two zero blocks, nothing but zeros after them), entry types
// (regular files and directories only), canonical relative names, and a
// pre-order tree: every entry's parent is a directory that precedes it and
// whose subtree is still open. Whole-archive properties that need every name
// (no duplicates, no file used as a directory) are checked over sorted keys
// by CheckSorted, so the caller can sort externally with bounded memory.
// Every rejection is an *Error naming the entry and the stream offset of its
// header (Limit set for a size beyond the supported representation).
//
// It is part of the driver and held to the driver's layering: no qualify,
// no cmd (docs/architecture.md; internal/depcheck).
package archive
