// Package qualify runs qualification campaigns: it executes the scenarios a
// manifest selects, each in its own child of a fresh output directory with
// its own namespace, and writes the evidence (per-scenario and run-level
// JSON, a human table, summary.md, junit.xml and report.html, and when
// given a key the signed statements). See docs/qualification.md#scenarios
// and docs/qualification.md#evidence.
//
// Run returns a Result and reports progress as ProgressEvents (the plain
// lines of PlainProgress, or any other observer); it prints no table and
// knows nothing of terminals. A scenario past its time limit is cancelled
// with a *TimeLimitError as cause; a refused --engine-build file is an
// *EngineBuildError naming it.
//
// The harness sits above the driver, which it drives through its exported
// API as a user would, and below cmd: it must not import cmd,
// internal/termprogress or a terminal library (docs/architecture.md;
// internal/depcheck).
package qualify
