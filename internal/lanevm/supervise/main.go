package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"syscall"
	"time"

	"github.com/qualbox/qualbox/internal/exitcode"
	"github.com/qualbox/qualbox/internal/lanevm"
)

func main() {
	// SIGHUP too (the terminal that ran lanec.sh went away): each powers
	// the guest down and removes the work directory, which holds the
	// signing key.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func usage(stderr io.Writer, format string, a ...any) int {
	fmt.Fprintf(stderr, "lanec: "+format+"\n", a...)
	fmt.Fprintln(stderr, "usage: supervise budget | supervise run --qemu EXE --image DIR --append ARGS --work DIR [--out DIR] [--record DIR] [--timing 'NAME SECONDS (SAYS)']... [--remove-work] [-- QEMU_ARGS...]")
	return exitcode.Usage
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		return usage(stderr, "no subcommand")
	}
	budget, err := lanevm.BudgetFromEnv(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "lanec: %v\n", err)
		return exitcode.Usage
	}
	switch args[0] {
	case "budget":
		if len(args) > 1 {
			return usage(stderr, "budget takes no arguments")
		}
		fmt.Fprintln(stdout, budget)
		if d := budget.Deadline; !d.IsZero() && !time.Now().Before(d) {
			fmt.Fprintf(stderr, "lanec: LANEC_DEADLINE (%s) has passed\n", d.UTC().Format(time.RFC3339))
			return exitcode.Failed
		}
		return exitcode.OK
	case "run":
		return supervise(ctx, args[1:], budget, stderr)
	}
	return usage(stderr, "unknown subcommand %q", args[0])
}

// timingLine is the form of a --timing value, as DIR.lanec/timings has it.
var timingLine = regexp.MustCompile(`^([a-z][a-z0-9_]*) ([0-9]{1,9}) \((.+)\)$`)

type timings []lanevm.Timing

func (t *timings) String() string { return fmt.Sprint(*t) }

func (t *timings) Set(s string) error {
	m := timingLine.FindStringSubmatch(s)
	if m == nil {
		return fmt.Errorf("want 'NAME SECONDS (SAYS)', got %q", s)
	}
	n, err := strconv.ParseInt(m[2], 10, 64)
	if err != nil {
		return err
	}
	*t = append(*t, lanevm.Timing{Name: m[1], Seconds: n, Says: m[3]})
	return nil
}

func supervise(ctx context.Context, args []string, budget lanevm.Budget, stderr io.Writer) int {
	fs := flag.NewFlagSet("supervise run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg := lanevm.Config{Budget: budget, Log: stderr}
	var ts timings
	var removeWork bool
	fs.StringVar(&cfg.QEMU, "qemu", "", "the emulator")
	fs.StringVar(&cfg.ImageDir, "image", "", "the cached guest image directory")
	fs.StringVar(&cfg.KernelArgs, "append", "", "the kernel command line")
	fs.StringVar(&cfg.Work, "work", "", "the work directory, with share/")
	fs.StringVar(&cfg.Out, "out", "", "the report directory to create")
	fs.StringVar(&cfg.Record, "record", "", "the directory for recorded cgroup trees")
	fs.Var(&ts, "timing", "a host timing line")
	fs.BoolVar(&removeWork, "remove-work", false, "remove the work directory at the end")
	if err := fs.Parse(args); err != nil {
		return usage(stderr, "run: %v", err)
	}
	cfg.QEMUArgs, cfg.Timings = fs.Args(), ts
	// In the usage line's order, so the same flag is named every time.
	for _, req := range []struct{ name, v string }{
		{"--qemu", cfg.QEMU}, {"--image", cfg.ImageDir}, {"--append", cfg.KernelArgs}, {"--work", cfg.Work},
	} {
		if req.v == "" {
			return usage(stderr, "run: %s is required", req.name)
		}
	}
	res, err := lanevm.Supervise(ctx, cfg)
	var ce *lanevm.ConfigError
	// A work directory the supervisor refused is not known to be a run's.
	if removeWork && !errors.As(err, &ce) {
		if rerr := os.RemoveAll(cfg.Work); rerr != nil {
			fmt.Fprintf(stderr, "lanec: removing the work directory: %v\n", rerr)
		}
	}
	switch {
	case errors.As(err, &ce):
		fmt.Fprintf(stderr, "lanec: run: %v\n", err)
		return exitcode.Usage
	case err != nil:
		fmt.Fprintf(stderr, "lanec: run: %v\n", err)
		return exitcode.Internal
	}
	return res.ExitStatus()
}
