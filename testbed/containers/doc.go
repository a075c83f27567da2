// Package containers holds test fixtures started through testcontainers-go:
// containers a test needs beside the thing it tests, such as the plain
// reference container the driver benchmarks measure against. It is
// test-only (internal/depcheck keeps it out of every shipped binary), so
// testcontainers-go never becomes a runtime dependency of the driver or
// the harness; like all of testbed it must not import the driver, qualify
// or cmd (docs/architecture.md).
//
// testcontainers-go is configured through the process environment: the
// fixtures pin DOCKER_HOST to the socket they are given and disable its
// reaper (TESTCONTAINERS_RYUK_DISABLED=true), because the reaper is an image
// it would pull and the project's hosts have no registry. The image is an
// exact local image ID, which testcontainers-go finds with an image inspect
// and therefore never pulls. Cleanup is exact: a fixture removes the one
// container it created, by ID.
package containers
