// Package driver is qualbox's Docker Engine sandbox backend: it runs one
// untrusted process per sandbox under an explicit isolation policy, reads
// every resource back and compares it with the request, and cleans up exactly
// the resources it created (docs/contract.md#workspace-files).
//
// Construction and Reserve are synchronous and inert; Engine effects start at
// Reservation.Start, after admission of the selected profile. The endpoint is
// an explicit Unix socket: no DOCKER_HOST, no Docker context, no credentials,
// no pulls, no builds.
//
// A bad configuration is a *sandboxapi.ValidationError with one issue per
// field; what only this backend can see has its own types: *AdmissionError
// (every failed admission check, with want and got), *ReadbackError (every
// field where the Engine's state differs from the request), *FrameError (a
// malformed exec stream), *ResponseLimitError (an Engine reply above its
// bound) and *UncertainError (a create whose outcome is unknown)
// (docs/contract.md#errors). Sizes are bytes and deadlines milliseconds, as
// the policy names them (docs/contract.md#policy).
//
// The driver sits above sandboxapi and profiles and below the harness: it
// must not import qualify or cmd, tests included, except the instruments
// that live under qualify/ and import neither (docs/architecture.md;
// internal/depcheck).
package driver
