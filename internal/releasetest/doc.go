// Package releasetest holds a test that installs cmd/qualify the way a
// consumer outside a checkout does (README.md, Install):
//
//	go install github.com/qualbox/qualbox/cmd/qualify@<tag>
//
// It packs the current work tree as module github.com/qualbox/qualbox at
// a test version into a file-based module proxy (internal/release: the
// GOPROXY file layout, the zip made with golang.org/x/mod/zip), serves
// every dependency from the local module cache's cache/download directory
// (itself a valid file proxy), and runs go install in an empty directory
// with workspace mode off and no network. A replace or exclude directive
// in go.mod, a file a module zip cannot hold (a name reserved on Windows)
// or a sub-module (cut out of the zip, with the packages cmd/qualify
// imports from it) makes it fail, as it would for a consumer.
package releasetest
