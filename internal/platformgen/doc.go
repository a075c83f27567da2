// Command platformgen writes the files the platform registry (platforms/)
// generates: manifests/*.yaml, the rows of .github/gate-policy.yaml and
// reports/gate-policy.yaml (their generated regions and each trust
// entry's row list, from platforms.Keys; the rest of each policy is
// hand-written), the row matrices of
// .github/workflows/qualify.yml and .github/actionlint.yaml. Run it from
// the repository root after editing platforms/ or profiles/profiles/, and
// commit what it writes:
//
//	go run ./internal/platformgen          (make generate)
//	go run ./internal/platformgen -check   exit 1 naming each file that differs
//
// It refuses an inconsistent registry, a manifest the harness would
// refuse and a file whose generated region markers are missing, naming
// them; it writes only files whose content changes, each replaced whole
// (a temporary file renamed into place). The test
// TestCommittedFilesAreGenerated fails when a committed file differs.
//
// A registry problem is a *platforms.Error, a missing or doubled marker a
// *RegionError naming the file and the region, a trust entry whose key
// the registry does not have, whose key path is not that key's file under
// its signer's directory (platforms.Key.Path), or whose row list is not
// directly below its key or, read as the gate reads it, is not the key's
// (a block list, a flow mapping) a *TrustError naming the file and the
// line. Exit status 0 when every
// file is as generated (-check) or was written, 1 on a problem or a
// difference (-check), 2 on a usage error.
package main
