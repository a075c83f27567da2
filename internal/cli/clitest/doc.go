// Package clitest checks a command's --help text against the conventions
// of internal/cli: CheckHelp returns every way a help text breaks them (a
// long flag spelled with one dash, a stray backquote, a flag line that is
// not "--name VALUE", a usage line naming flags the help does not list).
// Only tests import it.
package clitest
