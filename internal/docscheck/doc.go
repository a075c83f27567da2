// Package docscheck holds a test that keeps the repository's citations of
// docs/ resolvable: every "docs/<file>.md#<section>" cited in code, scripts
// or Markdown names an existing file and heading, and the docs that
// comments cite keep their agreed sections.
package docscheck
