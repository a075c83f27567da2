// Package platforms is the one home of each platform qualbox qualifies: a
// profile (profiles/profiles/<name>.yaml), the manifests that qualify it
// and the rows of the release matrix that run them, each with its Engine
// bring-up, runner, tuple pins, gate requirement and its differences from
// the scenario catalogue (docs/qualification.md#rows).
//
// The package is data: internal/platformgen renders from it the files the
// harness and CI read, and they are committed (manifests/*.yaml, the rows
// and trust row lists of .github/gate-policy.yaml and
// reports/gate-policy.yaml, the row matrices of
// .github/workflows/qualify.yml and the runner labels of
// .github/actionlint.yaml). A test of internal/platformgen fails when a
// committed file differs from what the registry generates.
//
// A new scenario is one entry of Catalogue, run by every manifest that
// does not narrow its selection, plus an Override only where a manifest
// differs; a new row is one Row of its platform; a new platform is a
// profile document, one file declaring its Platform and one line in the
// registry's list (README.md "Adding a host row"). Keys lists each
// signer's keys and the rows each is trusted for (the policies' trust row
// lists): a retired key's are frozen at the rows it signed.
//
// Check, CheckKeys and Validate return *Error, one problem per line
// naming the platform and the row or manifest, or the key. The package is data above the
// profiles (docs/architecture.md): it must not import the Engine client,
// sandboxapi, the driver, qualify, testbed, cmd or internal
// (internal/depcheck).
package platforms
