package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/internal/exitcode"
)

// greetOptions is a command's options for the tests of Run: --name is
// required, and Exec fails as --fail says.
type greetOptions struct {
	Positional
	name, fail string
	execs      int
}

func (o *greetOptions) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.name, "name", "", "`NAME` to greet")
	fs.StringVar(&o.fail, "fail", "", "fail Exec as `HOW`: usage or exit")
}

func (o *greetOptions) Validate() error {
	if o.name == "" || len(o.Args) > 1 {
		return UsageError("--name NAME is required and at most one argument is allowed")
	}
	return nil
}

func (o *greetOptions) Exec(_ context.Context, stdout, _ io.Writer) (int, error) {
	o.execs++
	switch o.fail {
	case "usage":
		return 0, UsageError("--fail usage: as asked")
	case "exit":
		return 0, Exitf(exitcode.Unavailable, "tool greet: nothing answered\ntool greet: second line")
	}
	fmt.Fprintf(stdout, "hello %s %v\n", o.name, o.Args)
	return exitcode.OK, nil
}

// Run parses, validates and executes in that order, and prints an error
// of Validate or Exec as its type says: a UsageError with the usage line
// and exit status 2, an *ExitError as its text with its code.
func TestRunParsesValidatesAndExecutes(t *testing.T) {
	const usage = "usage: tool greet --name NAME [ARG]\nRun 'tool greet --help' for details.\n"
	for _, tc := range []struct {
		args           []string
		code, execs    int
		stdout, stderr string
	}{
		{args: []string{"--name", "x", "a"}, code: exitcode.OK, execs: 1, stdout: "hello x [a]\n"},
		{args: []string{"--help"}, code: exitcode.OK, stdout: "usage: tool greet --name NAME [ARG]\n"},
		{args: []string{"--bogus"}, code: exitcode.Usage, stderr: "tool greet: flag provided but not defined: --bogus\n" + usage},
		{args: []string{"a"}, code: exitcode.Usage, stderr: "tool greet: --name NAME is required and at most one argument is allowed\n" + usage},
		{args: []string{"--name", "x", "a", "b"}, code: exitcode.Usage, stderr: "tool greet: --name NAME is required and at most one argument is allowed\n" + usage},
		{args: []string{"--name", "x", "--fail", "usage"}, code: exitcode.Usage, execs: 1, stderr: "tool greet: --fail usage: as asked\n" + usage},
		{args: []string{"--name", "x", "--fail", "exit"}, code: exitcode.Unavailable, execs: 1, stderr: "tool greet: nothing answered\ntool greet: second line\n"},
	} {
		var stdout, stderr bytes.Buffer
		o := new(greetOptions)
		code := New("tool greet", "--name NAME [ARG]", "Greet.").Run(context.Background(), o, tc.args, &stdout, &stderr)
		assert.Check(t, is.Equal(code, tc.code), "%q", tc.args)
		assert.Check(t, is.Equal(o.execs, tc.execs), "%q: Exec runs only after a valid command line", tc.args)
		if tc.args[0] == "--help" {
			assert.Check(t, is.Contains(stdout.String(), tc.stdout))
		} else {
			assert.Check(t, is.Equal(stdout.String(), tc.stdout), "%q", tc.args)
		}
		assert.Check(t, is.Equal(stderr.String(), tc.stderr), "%q", tc.args)
	}
}
