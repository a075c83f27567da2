// Package cli holds the command-line conventions cmd/qualify and
// cmd/observe share: --help and -h print to stdout and exit 0, flags are
// listed with two dashes as they are spelled everywhere else, failures go
// to stderr, and `version` reads the binary's build information.
//
// A subcommand is a Command (its name, synopsis and help text) run with an
// Options type, in the manner of cosign's cli/options: AddFlags binds every
// flag to a field, Validate refuses a bad command line with a UsageError
// naming the flag, and Exec does the work and returns the exit status, or
// an *ExitError with its own. Command.Run calls them in that order, so no
// command contacts an Engine before its flags are checked.
// Exit statuses are those of internal/exitcode.
//
// It sits in the command layer (docs/architecture.md) and stays free of
// the Engine client; internal/enginepin connects.
package cli
