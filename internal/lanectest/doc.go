// Package lanectest holds the tests of lane C's accelerator choice
// (scripts/lanec.sh accel and probe; docs/lanes.md#accelerator): with the
// real qemu-system-x86_64 and a real Debian kernel where both are present,
// and with a fake qemu (a shell script standing in for QEMU, named as a
// fake) for what no real host here shows: a KVM that boots the kernel and
// one that hangs it. It has no code of its own.
package lanectest
