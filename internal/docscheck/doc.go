// Package docscheck holds tests that keep the repository's documents true
// to the code: every "docs/<file>.md#<section>" cited in code, scripts or
// Markdown names an existing file and heading, the docs that comments cite
// keep their agreed sections, and README.md's first screen (host table,
// prerequisites, quick start, the sample of a run's output), its make
// target table and docs/qualification.md's profile statuses agree with
// go.mod, the Makefile, manifests/, profiles/ and the scenario catalogue.
package docscheck
