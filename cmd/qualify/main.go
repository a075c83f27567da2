package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/moby/moby/client"

	"github.com/qualbox/qualbox/internal/cli"
	"github.com/qualbox/qualbox/internal/enginepin"
	"github.com/qualbox/qualbox/internal/exitcode"
	"github.com/qualbox/qualbox/qualify/scenario"
)

// command is one listed subcommand: its help and flag set (newCommand)
// and its options (newOptions), which cli.Command.Run parses, validates
// and executes.
type command struct {
	name, summary string
	newCommand    func() *cli.Command
	newOptions    func() cli.Options
}

// commands is the subcommand list, in the order the help shows it.
var commands = []command{
	{"run", "run a manifest's scenarios against an Engine and write (and sign) the report",
		runCommand, func() cli.Options { return new(runOptions) }},
	{"verify", "verify signed reports against a gate policy's trust or named public keys, naming each failing file",
		verifyCommand, func() cli.Options { return new(verifyOptions) }},
	{"merge", "verify several signed reports and print one matrix of scenarios by tuple",
		mergeCommand, func() cli.Options { return new(mergeOptions) }},
	{"keygen", "generate the ed25519 key pair that signs reports",
		keygenCommand, func() cli.Options { return new(keygenOptions) }},
	{"image", "build the guest image, or remove exactly one image by ID",
		imageCommand, func() cli.Options { return new(imageOptions) }},
	{"version", "print the version, VCS revision, Go version and scenario catalogue of this binary (--json: one object; qualify --version is the same as qualify version)",
		versionCommand, func() cli.Options { return new(versionOptions) }},
}

// run runs the subcommand with args (its flags and arguments) and returns
// its exit status.
func (c *command) run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return c.newCommand().Run(ctx, c.newOptions(), args, stdout, stderr)
}

func main() {
	ctx, stop := context.Background(), func() {}
	// Only the commands that own Engine resources turn SIGINT/SIGTERM into
	// a cancellation they clean up after; verify, merge and keygen keep the
	// default, so Ctrl-C always stops them.
	if len(os.Args) > 1 && (os.Args[1] == "run" || os.Args[1] == "image" || os.Args[1] == scenario.ChildCommand) {
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	}
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitcode.Usage
	}
	if args[0] == "--version" || args[0] == "-version" {
		// `qualify --version` is `qualify version`.
		if len(args) > 1 {
			fmt.Fprintf(stderr, "qualify: %s takes no arguments\n", args[0])
			return exitcode.Usage
		}
		return lookup("version").run(ctx, nil, stdout, stderr)
	}
	if args[0] == scenario.ChildCommand {
		return childCmd(ctx, args[1:], stdout, stderr)
	}
	if cli.IsHelp(args[0]) {
		// `qualify help run` is `qualify run --help`.
		if args[0] == "help" && len(args) > 1 && !cli.IsHelp(args[1]) {
			if c := lookup(args[1]); c != nil {
				return c.run(ctx, []string{"--help"}, stdout, stderr)
			}
			fmt.Fprintf(stderr, "qualify help: unknown command %q\n", args[1])
			usage(stderr)
			return exitcode.Usage
		}
		usage(stdout)
		return exitcode.OK
	}
	if c := lookup(args[0]); c != nil {
		return c.run(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "qualify: unknown command %q\n", args[0])
	usage(stderr)
	return exitcode.Usage
}

func lookup(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: qualify COMMAND [flags] [arguments]

qualify runs qualbox qualification scenarios against a real Docker Engine,
signs their reports (DSSE + in-toto) and verifies and merges signed reports.

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "  %-8s %s\n", "help", "print this help, or a command's help: qualify help COMMAND")
	fmt.Fprint(w, `
Run 'qualify COMMAND --help' for a command's flags.
The Engine is always the one a manifest's endpoint or --endpoint names:
DOCKER_HOST and docker contexts are ignored on purpose.

`)
	exitcode.Help(w)
}

// failed is a *cli.ExitError whose text is "qualify: " and err.
func failed(code int, err error) *cli.ExitError {
	return cli.Exitf(code, "qualify: %v", err)
}

// connect returns a client of the Engine at endpoint that speaks exactly
// apiVersion ("1.<minor>") on every request, as the driver's client does:
// no negotiation, so the harness reads and builds through the API the
// profile was qualified against. An empty apiVersion, for a command that
// serves no one profile, pins the newest profile pin the Engine serves
// (enginepin.Connect). It pings first: when nothing answers, the error is
// one line naming the socket and how to start an Engine. It then reads
// /version through the pinned API: an Engine that does not serve it is
// refused with an error naming the endpoint, the version and the one the
// Engine reports.
func connect(ctx context.Context, endpoint, apiVersion string) (*client.Client, error) {
	eng, served, err := enginepin.Connect(ctx, endpoint, "qualbox-qualify", apiVersion)
	// Wrapped with %w, so that callers (and their tests) can still tell
	// enginepin's typed errors apart. Start-an-Engine advice only when
	// nothing answered, not when the caller gave up first.
	if noEngine := (*enginepin.NoEngineError)(nil); errors.As(err, &noEngine) && ctx.Err() == nil {
		return nil, fmt.Errorf("qualify: %w; start one with `make engine` or `dockerd --host %s`", err, endpoint)
	}
	if err != nil {
		return nil, fmt.Errorf("qualify: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := eng.ServerVersion(pctx, client.ServerVersionOptions{}); err != nil {
		eng.Close()
		return nil, fmt.Errorf("qualify: the Engine at %s does not serve Engine API %s (it reports API %s): %s", endpoint, eng.ClientVersion(), served, oneLine(err.Error()))
	}
	return eng, nil
}

func oneLine(s string) string {
	for i, r := range s {
		if r == '\n' || r == '\r' {
			return s[:i]
		}
	}
	return s
}
