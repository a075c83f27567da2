package exitcode

import (
	"fmt"
	"io"
	"strings"
)

// Exit statuses. A status says which kind of thing went wrong, so a CI
// step can tell a failed check (1) from a mistyped command line (2), a
// missing Engine (3) and a defect of the tool itself (4).
const (
	// OK: the command did what it was asked and everything it checked
	// passed (scenarios skipped or not applicable count as passed).
	OK = 0
	// Failed: the command ran, and what it checked did not pass: a
	// scenario failed, a report did not verify, a gate was not met, a
	// scope stayed occupied, or a cleanup the command owned failed.
	Failed = 1
	// Usage: the command line, a manifest or a key file given on it is
	// wrong; nothing was run. The message names what was wrong.
	Usage = 2
	// Unavailable: what the command needs from the host is not there: no
	// Engine answers at the endpoint, the guest image cannot be built, or
	// the PID or container to observe cannot be resolved.
	Unavailable = 3
	// Internal: the command itself failed at its own work (an I/O error
	// writing a report or a key, an encoding failure). The message says
	// what; nothing half-written is presented as complete.
	Internal = 4
	// Interrupted: SIGINT or SIGTERM stopped the command after it cleaned
	// up what it had created and wrote what it had (128 + SIGINT).
	Interrupted = 130
)

// Code is one row of the table.
type Code struct {
	Code    int
	Name    string
	Meaning string
}

// Table lists every status the commands return, in ascending order.
var Table = []Code{
	{OK, "ok", "everything checked passed (skipped and not-applicable scenarios included)"},
	{Failed, "failed", "a check did not pass: scenario failed, report did not verify, gate not met, scope still occupied, owned cleanup failed"},
	{Usage, "usage", "bad flags, arguments, manifest or key file; nothing was run"},
	{Unavailable, "unavailable", "no Engine answers, the guest image cannot be built, or the PID or container cannot be resolved"},
	{Internal, "internal", "the command failed at its own work (writing a report or key, encoding); not a usage error"},
	{Interrupted, "interrupted", "SIGINT or SIGTERM; what the command created was cleaned up first"},
}

// Help writes the table for a command's --help text.
func Help(w io.Writer) {
	fmt.Fprintln(w, "Exit status:")
	for _, c := range Table {
		fmt.Fprintf(w, "  %3d  %-12s %s\n", c.Code, c.Name, c.Meaning)
	}
}

// Markdown returns the table as the Markdown README.md carries.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| status | name | meaning |\n| --- | --- | --- |\n")
	for _, c := range Table {
		fmt.Fprintf(&b, "| %d | `%s` | %s |\n", c.Code, c.Name, c.Meaning)
	}
	return b.String()
}
