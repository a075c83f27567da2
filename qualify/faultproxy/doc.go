// Package faultproxy is a Unix socket HTTP/1.1 proxy owned by a test or a
// qualification scenario. It sits between a controller and the Engine socket
// and injects faults into chosen Engine API calls: it can forward a request
// and drop the Engine's reply (the effect happened, the controller never
// learns), delay a request, cut a hijacked stream after some bytes, or
// replace or fake a reply. Every request it sees is recorded as evidence
// (docs/qualification.md#scenarios).
//
// Requests are matched by method and by the path without its "/v1.xx"
// version prefix and without the query, for example
// Request("DELETE", `/containers/[^/]+`). Connection upgrades (101, exec
// start and attach), keep-alive and chunked bodies pass through unchanged.
//
// It is one of the harness's instruments (docs/architecture.md): the
// driver's tests use it, so it imports neither the driver nor the rest of
// qualify (internal/depcheck.Instruments).
package faultproxy
