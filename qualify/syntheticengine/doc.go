// Package syntheticengine is a synthetic Docker Engine API server on a Unix
// socket: it replays recorded reply shapes of /_ping, /version, /info and
// image inspect and nothing else. It exists for what no real Engine on a
// Linux host can show (docs/lanes.md#desktop-synthetic): Docker Desktop
// daemons on Apple Silicon, native arm64 and Rosetta amd64, and the
// negative shapes admission must refuse. No Docker Desktop runs behind it,
// and every report that uses it says so ("synthetic: no Docker Desktop
// ran").
//
// Every other request (creates, starts, deletes, ...) is answered with
// HTTP 501 and recorded, so a test can tell that nothing but admission
// reached it, or that nothing reached it at all.
//
// It is one of the harness's instruments (docs/architecture.md): the
// driver's tests use it, so it imports neither the driver nor the rest of
// qualify (internal/depcheck.Instruments).
package syntheticengine
