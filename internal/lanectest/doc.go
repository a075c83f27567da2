// Package lanectest holds the tests of scripts/lanec.sh itself: lane C's
// accelerator choice (scripts/lanec.sh accel and probe;
// docs/lanes.md#accelerator), with the real qemu-system-x86_64 and a real
// Debian kernel where both are present, and with a fake qemu (a shell
// script standing in for QEMU, named as a fake) for what no real host here
// shows: a KVM that boots the kernel and one that hangs it; and the guest
// image's cache key (scripts/lanec.sh key), which must cover the
// checked-in guest files. The supervision of a run is tested in
// internal/lanevm. It has no code of its own.
package lanectest
