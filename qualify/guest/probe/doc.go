// Command qualbox-probe runs inside a qualbox sandbox and reports, as JSON on
// stdout, the isolation the kernel applies to it (package
// github.com/qualbox/qualbox/qualify/guest/facts defines the schema), or
// performs one workload action for a qualification scenario.
//
// It is built static (CGO_ENABLED=0) and installed in the guest image at
// /usr/local/bin/qualbox-probe. It imports only qualify/guest/facts of this
// module (docs/architecture.md).
//
// Usage:
//
//	qualbox-probe [facts]
//	qualbox-probe alloc <MiB> [holdSeconds]
//	qualbox-probe fork <N> [seconds]
//	qualbox-probe write <stdout|stderr> <bytes>
//	qualbox-probe echo
//	qualbox-probe spawn <N> <seconds>
//	qualbox-probe sleep <seconds>
//	qualbox-probe fill <path> <bytes>
//	qualbox-probe connect <host:port> [timeoutSeconds]
//	qualbox-probe http <url> [timeoutSeconds]
//	qualbox-probe tree <dir>
//
// facts prints one facts.Facts object. Every action prints one facts.Result
// line to stdout when it completes (after any bytes it writes to stdout
// itself); alloc also prints facts.Progress lines to stderr. The exit status
// is 0 when a result was printed, even when the result records a failure the
// scenario expected (ENOSPC, EAGAIN, ...), and 2 for a usage error.
package main
