// Command mkrelease is `make release` (README.md, Install): it builds
// cmd/qualify and cmd/observe for every release platform from the work
// tree packed as github.com/qualbox/qualbox at -version, the way
// `go install github.com/qualbox/qualbox/cmd/qualify@<version>` builds
// them, into -out, with SHA256SUMS over them; with -busybox-amd64 or
// -busybox-arm64 (a static busybox FILE) also that architecture's guest
// image archive (internal/release).
//
// Usage:
//
//	go run ./internal/release/mkrelease -version "$(git describe --tags --always --dirty)" [-out DIR] [-root DIR] [-busybox-amd64 FILE] [-busybox-arm64 FILE]
//
// It exits 2 for a bad flag or version and 1 when a build step fails.
package main
