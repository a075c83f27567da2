// Package sandboxtest is a backend-neutral conformance suite for
// sandboxapi.Backend implementations, in the manner of testing/fstest: a
// driver's own tests call Run against a real engine. It uses only the
// sandboxapi contract (docs/contract.md): like sandboxapi, it imports no
// Engine client and nothing of driver, qualify or cmd
// (docs/architecture.md; internal/depcheck).
package sandboxtest
