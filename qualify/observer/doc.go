// Package observer reads a sandbox's cgroup from the host, independently of
// the Engine (docs/qualification.md#evidence): given the keeper's PID it reads
// /proc/<pid>/cgroup once to find the scope, then the scope's cgroup v1 or
// v2 interface files (memory and memory+swap limits, OOM and oom_kill
// events, failcnt, pids max/current/events, CPU quota/period) as often as
// asked, and after cleanup proves the scope is gone or empty. A series
// (Scope.Sample) reads the workload on the monotonic clock every interval,
// DefaultSeriesInterval (50 ms) in the scenarios, keeping at most
// DefaultMaxSamples (1,200) samples. Memory values are bytes.
//
// Every read goes through an fs.FS rooted at the host's "/" so that cgroup
// v2 is tested from recorded directory trees; the only Engine call is the
// optional KeeperPID resolution of a container ID. A host it cannot
// observe is an *UnsupportedPlatformError (Supported).
//
// It is part of the harness, shared with cmd/observe; of this module it
// imports only qualify/attest and qualify/guest/facts, and it must not
// import cmd (docs/architecture.md; internal/depcheck).
package observer
