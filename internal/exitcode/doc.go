// Package exitcode is the one exit status table of the qualbox commands
// (cmd/qualify and cmd/observe). Both commands print it in their --help
// and README.md carries the same table; a test keeps the three in step.
// It sits in the command layer (docs/architecture.md) and imports nothing
// of this module.
package exitcode
