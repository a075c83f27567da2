// Package archivecorpus holds fixtures for archive validation: crafted
// hostile tar bodies that a workspace export must reject, the tar builder
// they are made with and hand-made header blocks (raw ustar, GNU sparse)
// that archive/tar's writer refuses to produce
// (docs/contract.md#workspace-files).
//
// It is one of the harness's instruments (docs/architecture.md): it imports
// neither package archive nor the driver nor the rest of qualify
// (internal/depcheck.Instruments), so archive's own tests can use it too.
package archivecorpus
