// Package enginetest holds the real-Engine fixtures driver tests share: the
// Engine socket, the guest image and a default policy. Whether a test that
// needs an Engine runs, skips or fails when none answers is
// internal/testengine's decision (docs/lanes.md#engine-tests): it skips under
// a plain `go test ./...` and fails under `make test`, which requires one.
//
// It is test-only (internal/depcheck.TestOnly): no shipped binary links it.
// Held to the driver's layering, it builds the guest image with the
// qualify/guest instrument and imports nothing else of qualify, nor cmd
// (docs/architecture.md).
package enginetest
