package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
)

// Options is one command's flags and positional arguments as a type, in
// the manner of cosign's cli/options: AddFlags binds every flag to a
// field, SetArgs hands over the positional arguments, Validate checks
// them by themselves, and Exec does the command's work. Command.Run calls
// them in that order.
type Options interface {
	// AddFlags declares the command's flags on fs, each bound to a field.
	AddFlags(fs *flag.FlagSet)
	// SetArgs receives the positional arguments left after the flags.
	SetArgs(args []string)
	// Validate checks the flags and arguments before any work: a
	// UsageError naming the flag or argument that is wrong. It may look
	// at files a flag names, never at an Engine.
	Validate() error
	// Exec runs the command and returns its exit status (exitcode), or
	// an error that ends it: a UsageError or an *ExitError.
	Exec(ctx context.Context, stdout, stderr io.Writer) (int, error)
}

// Positional holds a command's positional arguments. An Options type
// embeds it to implement SetArgs.
type Positional struct {
	// Args are the arguments after the flags, in order.
	Args []string
}

// SetArgs stores args in p.Args.
func (p *Positional) SetArgs(args []string) { p.Args = args }

// UsageError is a wrong command line. Run prints it, prefixed with the
// command's name, with the usage line, and exits exitcode.Usage.
type UsageError string

func (e UsageError) Error() string { return string(e) }

// ExitError ends a command with exit status Code after Run prints Text
// (one or more lines, without the final newline) on stderr.
type ExitError struct {
	Code int
	Text string
}

func (e *ExitError) Error() string { return e.Text }

// Exitf returns an *ExitError with exit status code and the text format
// and args make.
func Exitf(code int, format string, args ...any) *ExitError {
	return &ExitError{Code: code, Text: fmt.Sprintf(format, args...)}
}

var (
	_ error = UsageError("")
	_ error = (*ExitError)(nil)
)

// Run runs the command c with o as its options: it declares o's flags,
// parses args (help and flag errors as Parse handles them), validates o
// and executes it. It returns the exit status: Exec's, or that of the
// error Validate or Exec returned, which Fail prints.
func (c *Command) Run(ctx context.Context, o Options, args []string, stdout, stderr io.Writer) int {
	o.AddFlags(c.Flags)
	if code, done := c.Parse(args, stdout, stderr); done {
		return code
	}
	o.SetArgs(c.Flags.Args())
	if err := o.Validate(); err != nil {
		return c.Fail(stderr, err)
	}
	code, err := o.Exec(ctx, stdout, stderr)
	if err != nil {
		return c.Fail(stderr, err)
	}
	return code
}

// Fail prints err on w and returns its exit status: an *ExitError's text
// and code; any other error as a usage error (UsageError), with the usage
// line, exitcode.Usage.
func (c *Command) Fail(w io.Writer, err error) int {
	if ee := (*ExitError)(nil); errors.As(err, &ee) {
		fmt.Fprintln(w, ee.Text)
		return ee.Code
	}
	return c.UsageError(w, err.Error())
}
