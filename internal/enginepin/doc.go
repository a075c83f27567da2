// Package enginepin connects cmd/qualify and cmd/observe to a Docker
// Engine the way the driver connects: through one Engine API version
// pinned on every request, never negotiated. The pin is the one a profile
// names (its daemon.minAPIVersion, docs/contract.md#profiles-and-admission)
// or, for a command that serves no one profile (`qualify image`,
// `observe --container`), the newest profile pin the Engine serves:
// profiles.DaemonAPIVersionFor the API-Version its /_ping reports. It
// sits with internal/cli in the command layer (docs/architecture.md);
// internal/cli itself stays free of the Engine client.
//
// Connect's errors are typed: *ClientError when no client can be built
// for the endpoint or the pin (nothing was sent), *NoEngineError when
// nothing answers /_ping within PingTimeout, and *UnservedError when,
// without a profile pin, the API version the Engine reports reaches no
// profile's pin.
package enginepin
