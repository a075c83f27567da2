// Package lanevm supervises one run of a lane's virtual machine (lanes C
// and D, docs/lanes.md#running-lane-c): it boots the guest under QEMU with
// the work directory's shared folder, bounds each phase of the run by one
// Budget, shows the job's progress as the guest writes it, powers the guest
// down (ACPI, then SIGTERM and SIGKILL to qemu's PID), copies the results
// out and maps what happened to a typed Result and one exit status.
//
// The shared folder is the guest's, mounted with security_model=none
// (docs/lanes.md#running-lane-c): the supervisor, root on the host, looks
// every name in it up as an O_PATH descriptor beneath the folder
// (openat2, no symlinks) and opens for reading only an inode it has
// checked is a regular file or a directory, so a device or FIFO the guest
// races in is never opened (sharefs.go); it takes regular files and
// directories only, within size bounds (MaxGuestFileBytes,
// MaxGuestTreeBytes, MaxGuestEntries), refuses anything else with an
// *UnsafeFileError or *TooLargeError, keeps the guest's files apart from
// its own in the copy, shows the guest's text on the host's log only
// escaped and within bounds (MaxShownBytes, MaxShownLines), and believes
// a passed status only with everything a passed job leaves
// (GuestIncomplete). The
// guest's side is scripts/lanec-job.sh; assembling the image and choosing
// the accelerator stay in scripts/lanec.sh, which runs this package's
// command (lanevm/supervise).
//
// It sits with the commands (docs/architecture.md): it imports no package
// of the driver or the harness, only internal/exitcode for the statuses,
// and runs nothing but the qemu it is given.
package lanevm
