package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/qualbox/qualbox/internal/exitcode"
	"github.com/qualbox/qualbox/qualify/scenario"
)

// childHelp is the --help of the internal controller-child subcommand.
const childHelp = `usage: qualify controller-child --profile NAME --endpoint URL --image ID --namespace NAME
       --uid N --gid N --policy JSON --spill DIR --marker FILE --record FILE --checkpoint N|exec
       qualify controller-child ... --marker FILE --records DIR --pool N

Internal: the child controller process the controller-death scenario starts
with flags derived from its manifest and kills with SIGKILL at the
checkpoint; with --pool, the warm-pool scenario's, killed once its pool of
N sandboxes is full. Not for interactive use.
`

// childCmd is the internal `controller-child` subcommand: the child
// controller the controller-death scenario starts and kills with SIGKILL
// (scenario.RunChild). It is not meant to be run by hand and is not listed
// in the usage. It returns only when the checkpoint was never reached or
// on failure.
func childCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := scenario.ParseChildArgs(args, io.Discard)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, childHelp)
		return exitcode.OK
	}
	if err != nil {
		fmt.Fprintf(stderr, "qualify %s: %v\n", scenario.ChildCommand, err)
		return exitcode.Usage
	}
	if err := scenario.RunChild(ctx, cfg); err != nil {
		fmt.Fprintf(stderr, "qualify %s: %v\n", scenario.ChildCommand, err)
		return exitcode.Failed
	}
	return exitcode.OK
}
