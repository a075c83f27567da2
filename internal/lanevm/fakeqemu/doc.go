// Package fakeqemu is a FAKE qemu-system for the tests of internal/lanevm:
// not QEMU. A test binary that calls Main from its TestMain when Enabled
// can stand in for qemu: it parses the arguments the supervisor gives
// qemu (the -virtfs shared folder, the -serial console file, the monitor
// on stdin) and plays the guest's side of scripts/lanec-job.sh on the
// shared folder: the booted and started marks, progress in qualify.log,
// a report under out/report, the step exit statuses (conformance.rc when
// the folder has params/conformance-profile) and the job's status, in the
// way its Mode says (and, when the shared folder has record.sh, a
// recorded tree under out/record). FAKE_QEMU_PLANT then puts a hostile
// guest's leavings in place: symlinks to host files, FIFOs, sockets,
// devices, oversized (sparse) files, or removes what the job wrote. It
// writes its PID to FAKE_QEMU_STATE/pid, its process group to
// FAKE_QEMU_STATE/pgid and its arguments to FAKE_QEMU_STATE/args.
//
// Only tests import it; it imports no package of this module.
package fakeqemu
