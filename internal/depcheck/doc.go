// Package depcheck keeps the package layering of docs/architecture.md:
// the contract (sandboxapi), the profile data (profiles) and the platform
// registry over it (platforms), the harness's
// instruments (Instruments: the guest image, the fault proxy, the synthetic
// Engine, the dataset fixture, the archive corpus) and the test support
// (testbed) at the bottom, the driver above them, the rest of the harness
// (qualify) above the driver, and the commands (cmd) on top. It checks package
// imports, test imports included; that the shipped binaries link no
// test-only package and no package of a test-only module; and that the
// repository stays one module, github.com/qualbox/qualbox, without
// replace or exclude directives, sub-modules or a go.work file, so that
// `go install github.com/qualbox/qualbox/cmd/qualify@<tag>` works outside
// a checkout (README.md, Install).
//
// The rules are data (Layering, TestOnly); each check returns one message
// per broken rule, naming the package, what it reaches and the rule. Its
// own tests run them over this module (`go test ./internal/depcheck/`).
package depcheck
