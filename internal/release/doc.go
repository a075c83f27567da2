// Package release builds what `make release` writes (README.md, Install)
// the way a consumer's `go install github.com/qualbox/qualbox/cmd/qualify@<tag>`
// builds it: the work tree is packed as the module at the release version
// into a file-based module proxy, and the commands are installed from
// that proxy, with dependencies from the local module cache, for every
// release platform (CGO_ENABLED=0, -trimpath); so is the guest probe that
// goes, with a static busybox, into the guest image archives. The version a binary
// prints, and the harness identity it writes into signed evidence, is
// then the module version from its build information, exactly as for a
// consumer's install; such a build carries no VCS stamp.
//
// It is build tooling that no shipped binary links: mkrelease and
// guestarchive run it, and the tests of internal/releasetest and
// cmd/qualify use it. Of this module it imports only the qualify/guest
// instrument, for the image archives (docs/architecture.md).
package release
