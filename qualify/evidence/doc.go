// Package evidence holds qualbox qualification evidence: the per-scenario and
// run-level JSON documents (schema [Schema]), and the renderings a campaign
// emits from them: a human table, a Markdown summary, JUnit XML and the
// report.html page. Layout is the report's file set: WriteReport writes
// from it, and VerifyRun takes from it the files a report must hold, their
// schemas and cross-checks (docs/qualification.md#evidence).
//
// It also judges signed reports: VerifyRun and VerifyTrusted (a gate
// policy's trust entries; a refusal is a *TrustError listing its
// problems), the claims a report makes against their sources
// (claims.go), the runtime posture and its floors, and the gate
// (LoadPolicy, Judge) with its renderings and Verification Summary
// (docs/qualification.md#gate).
//
// Files are written atomically (temporary file, fsync, rename) so that a
// reader never sees a partial document under its final name. Times are
// RFC 3339 with durations in whole milliseconds (durationMs).
//
// It is part of the harness, above the driver: it must not import cmd or
// a terminal library (docs/architecture.md; internal/depcheck).
package evidence
