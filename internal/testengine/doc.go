// Package testengine decides, for every test that needs a real Docker
// Engine, whether it runs, skips or fails. It keeps the hermetic tests and
// the Engine tests of one `go test ./...` apart (docs/lanes.md#engine-tests):
//
//   - no switch set: an Engine test runs when an Engine answers at Socket and
//     skips, naming the socket and `make engine`, when none does;
//   - QUALBOX_REQUIRE_ENGINE=1 (set by `make test`, `make test-lane-b` and
//     lane C's guest): an absent Engine fails the test, so a lane cannot pass
//     by skipping;
//   - QUALBOX_NO_ENGINE=1 (set by `make test-hermetic`): every Engine test
//     skips without dialing any socket, even where one answers (a hosted CI
//     runner has its own Docker Engine, which is no lane).
//
// Both switches at once is a contradiction and fails every Engine test.
// The package is test-only (internal/depcheck.TestOnly) and sits below
// every layer, so the instruments' tests can use it as well as the
// driver's: it imports no package of this module.
package testengine
