package main

import (
	"context"
	"fmt"
	"io"

	"github.com/qualbox/qualbox/qualify/scenario"
)

// childCmd is the internal `controller-child` subcommand: the child
// controller the controller-death scenario starts and kills with SIGKILL
// (scenario.RunChild). It is not meant to be run by hand and is not listed
// in the usage. It returns only when the checkpoint was never reached or
// on failure.
func childCmd(ctx context.Context, args []string, stderr io.Writer) int {
	cfg, err := scenario.ParseChildArgs(args, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "qualify %s: %v\n", scenario.ChildCommand, err)
		return exitUsage
	}
	if err := scenario.RunChild(ctx, cfg); err != nil {
		fmt.Fprintf(stderr, "qualify %s: %v\n", scenario.ChildCommand, err)
		return exitFailed
	}
	return exitOK
}
