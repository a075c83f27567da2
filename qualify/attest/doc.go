// Package attest signs and verifies qualbox evidence: a DSSE envelope
// (https://github.com/secure-systems-lab/dsse, payload type
// application/vnd.in-toto+json) around an in-toto Statement v1 whose
// subjects are the SHA-256 digests of the evidence files, signed with
// ed25519 (docs/qualification.md#evidence).
//
// The envelope and PAE come from go-securesystemslib/dsse. The report's
// own Statement is a four-field JSON document defined here, read by the
// strict decoder every report file is read with; Verify applies the
// Statement v1 rules itself. The standard statements beside it (test
// result, Verification Summary) are built with the in-toto attestation Go
// bindings and signed with SignPayload (docs/qualification.md#standard-attestations).
//
// Verify reports every problem it finds as one *VerifyError listing each
// with the file it concerns; a strict-JSON failure is a *JSONError naming
// the member and its JSON pointer, and an input beyond a stated limit
// (envelope 4 MiB, parsed files 8 MiB each, JSON depth and values,
// signatures, subjects: limits.go) a *LimitError. Every file is read once,
// and hashed from the bytes that are parsed.
//
// It is part of the harness and imports no other package of this module
// (docs/architecture.md).
package attest
