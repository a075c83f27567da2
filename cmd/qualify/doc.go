// Command qualify runs qualbox qualification campaigns against a real
// Docker Engine, signs and checks their reports, and manages the guest
// image (docs/qualification.md).
//
// Usage:
//
//	qualify run --manifest FILE [--endpoint URL] [--only NAMES | --skip NAMES] [--output DIR] [--repeat N] [--parallel N] [--scenario-timeout DURATION] [--signing-key FILE] [--probe BINARY | --image-archive FILE] [--engine-build FILE] [--image-inputs FILE] [--json] [--keep-image] [--verbose] [--progress MODE]
//	qualify verify --policy FILE [--key FILE...] | --key FILE [--key FILE...] [--json] DIR...
//	qualify merge --policy FILE [--key FILE...] | --key FILE [--key FILE...] [--require LIST --row SPEC... --manifest FILE...] [--markdown|--json|--junit|--test2json] [--ascii] [--html FILE] [--vsa FILE --vsa-key FILE [--vsa-verifier-id URI] [--vsa-resource-uri URI] [--vsa-policy-uri URI]] DIR...
//	qualify keygen --out DIR
//	qualify image [--endpoint URL] [--probe BINARY] [--arch ARCH] [--busybox FILE] [--remove ID]
//	qualify version [--json]
//	qualify --version
//	qualify help [COMMAND]
//
// Every subcommand prints its help on stdout and exits 0 for -h or
// --help. run executes the manifest's scenarios and writes evidence.json,
// summary.md, junit.xml, report.html and one directory per scenario into a
// fresh output directory (default reports/runs/<UTC timestamp>). When the
// manifest says "image: build" the guest image is built first, or loaded
// from a guest image archive of `make release` with --image-archive, and
// exactly that image is removed at the end, unless --keep-image or the
// Engine already had it.
//
// With --signing-key (an ed25519 PKCS#8 PEM from keygen) run signs the
// complete report: evidence.dsse.json is a DSSE envelope around an in-toto
// Statement whose subjects are every file's SHA-256, test-result.dsse.json
// among them (the in-toto test-result statement of the run). verify checks the
// signature, every subject, that no file was added and the evidence
// schemas, and names each failing file; with --policy it trusts only the
// policy's trust entries, each key bound to rows and a validity window.
// merge verifies several reports the same way and renders one matrix of
// scenarios by row, exiting 1 unless the gate of its policy (or of
// --require, --row and --manifest) is met (docs/qualification.md#gate); it
// prints a table, --markdown, --json, --junit or --test2json, and can also
// write the gate as an HTML page (--html) and as a signed SLSA
// Verification Summary (--vsa).
//
// The Engine is always the one named by the manifest or --endpoint:
// DOCKER_HOST and docker contexts are ignored on purpose.
//
// The internal subcommand `qualify controller-child` is the child
// controller process of the controller-death scenario, which starts it
// with flags derived from the manifest (endpoint, profile, image ID,
// namespace, user, policy, spill directory, record file, marker file,
// checkpoint) and kills it with SIGKILL at the checkpoint; it is not for
// interactive use and not in the usage text.
//
// Exit status is the table of internal/exitcode (also in README.md): 0
// passed, 1 a check failed, 2 usage, 3 no Engine or no guest image, 4
// internal error, 130 interrupted (the running scenario is cleaned up and
// the partial report written first).
package main
