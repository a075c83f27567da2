package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/qualbox/qualbox/internal/exitcode"
)

// EndpointNote is the help text every --endpoint flag carries.
const EndpointNote = "Engine socket `URL` (unix:///abs/path); DOCKER_HOST and docker contexts are ignored on purpose, so the Engine under test is always the one named here"

// Command is one subcommand: its flag set and the text of its --help.
type Command struct {
	// Name is the full command, e.g. "qualify run".
	Name string
	// Synopsis is the argument part of the usage line, e.g.
	// "--manifest FILE [--json]".
	Synopsis string
	// Summary is the one-line description the command list shows.
	Summary string
	// Details, when set, is printed after the flags.
	Details string
	// Flags is the subcommand's flag set. Value names are given in
	// backquotes in upper case (flag.UnquoteUsage): "manifest `FILE`".
	Flags *flag.FlagSet
}

// New returns a Command with an empty flag set. Parse reports its errors
// on the stderr it is given.
func New(name, synopsis, summary string) *Command {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// The flag package would print its errors and its own defaults with
	// one dash; Parse prints both with the two dashes used everywhere
	// else.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &Command{Name: name, Synopsis: synopsis, Summary: summary, Flags: fs}
}

// Parse parses args. When done is true the caller returns code at once:
// exitcode.OK after printing the help on stdout for -h or --help, or
// exitcode.Usage after a flag error, reported on stderr with the usage
// line.
func (c *Command) Parse(args []string, stdout, stderr io.Writer) (code int, done bool) {
	err := c.Flags.Parse(args)
	switch {
	case err == nil:
		return exitcode.OK, false
	case errors.Is(err, flag.ErrHelp):
		c.Help(stdout)
		return exitcode.OK, true
	}
	c.UsageError(stderr, dashes(err.Error()))
	return exitcode.Usage, true
}

// UsageError writes msg (when not empty), the usage line and where the
// full help is on w, and returns exitcode.Usage.
func (c *Command) UsageError(w io.Writer, msg string) int {
	if msg != "" {
		fmt.Fprintf(w, "%s: %s\n", c.Name, msg)
	}
	fmt.Fprintf(w, "usage: %s\nRun '%s --help' for details.\n", c.usageLine(), c.Name)
	return exitcode.Usage
}

// Help writes the full help: usage line, summary, flags, details and the
// exit status table.
func (c *Command) Help(w io.Writer) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n", c.usageLine(), c.Summary)
	if HasFlags(c.Flags) {
		fmt.Fprintln(w, "\nFlags:")
		PrintFlags(w, c.Flags)
	}
	if c.Details != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.Details))
	}
	fmt.Fprintln(w)
	exitcode.Help(w)
}

func (c *Command) usageLine() string {
	if c.Synopsis == "" {
		return c.Name
	}
	return c.Name + " " + c.Synopsis
}

// HasFlags reports whether fs defines any flag.
func HasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// PrintFlags lists fs's flags as "--name VALUE" lines, each followed by
// its indented usage and a non-zero default.
func PrintFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if name != "" {
			line += " " + name
		}
		fmt.Fprintln(w, line)
		if !zero(f.DefValue) {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "        %s\n", usage)
	})
}

// dashes respells the flag package's "-name" in an error message as
// "--name".
func dashes(msg string) string {
	for _, p := range []string{"not defined: -", "needs an argument: -", "for flag -"} {
		if i := strings.Index(msg, p); i >= 0 && !strings.HasPrefix(msg[i+len(p):], "-") {
			return msg[:i+len(p)] + "-" + msg[i+len(p):]
		}
	}
	return msg
}

func zero(v string) bool {
	switch v {
	case "", "0", "false", "0s", "[]":
		return true
	}
	return false
}

// IsHelp reports whether args ask for help before any flag parsing: the
// first argument is -h, -help, --help or help.
func IsHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

// Version writes name's version, VCS revision (with "+dirty" for a tree
// with uncommitted changes) and Go version from the build information
// the Go toolchain stamps into the binary. info is usually from
// debug.ReadBuildInfo; nil means none was available.
func Version(w io.Writer, name string, info *debug.BuildInfo) {
	version, revision, modified, when, goVersion := "unknown", "", false, "", "unknown"
	if info != nil {
		goVersion = info.GoVersion
		if info.Main.Version != "" {
			version = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			case "vcs.time":
				when = s.Value
			}
		}
	}
	switch {
	case revision == "":
		revision = "unknown (built without VCS stamping, e.g. by go test or -buildvcs=false)"
	case modified:
		revision += "+dirty"
	}
	fmt.Fprintf(w, "%s version %s\nrevision: %s\n", name, version, revision)
	if when != "" {
		fmt.Fprintf(w, "commit time: %s\n", when)
	}
	fmt.Fprintf(w, "go: %s\n", goVersion)
}

// VersionCommand runs the `version` subcommand of the command named
// prog: it takes no flags or arguments.
func VersionCommand(prog string, args []string, stdout, stderr io.Writer) int {
	c := New(prog+" version", "", "Print the version, VCS revision and Go version this binary was built from.")
	if code, done := c.Parse(args, stdout, stderr); done {
		return code
	}
	if c.Flags.NArg() > 0 {
		return c.UsageError(stderr, "no arguments are allowed")
	}
	info, _ := debug.ReadBuildInfo()
	Version(stdout, prog, info)
	return exitcode.OK
}
