// Command supervise runs one lane C or lane D guest for scripts/lanec.sh
// (docs/lanes.md#running-lane-c): lanec.sh assembles the image, chooses
// the accelerator and fills the work directory's shared folder, then
// hands the run to this command, which boots, bounds, stops and collects
// it (internal/lanevm) and exits with the result's status.
//
//	supervise budget
//	supervise run --qemu EXE --image DIR --append ARGS --work DIR
//	              [--out DIR] [--record DIR] [--timing 'NAME SECONDS (SAYS)']...
//	              [--remove-work] [-- QEMU_ARGS...]
//
// budget prints the run's bounds from the LANEC_* variables and exits 2
// when one is unusable, 1 when LANEC_DEADLINE has passed. run exits 0
// when the guest passed, 1 when it did not (failed, hung, crashed, slow
// to power down, past the deadline, garbage status, a passed status
// without what a passed job leaves), 2 on a bad command line or setting
// (nothing started), 4 when the results could not be copied out (among
// them a symlink, FIFO, device or oversized file the guest left), 130 on
// SIGINT, SIGTERM or SIGHUP (the guest powered down first, and the work
// directory removed with --remove-work).
package main
