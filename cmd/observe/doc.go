// Command observe is qualbox's independent cgroup observer
// (docs/qualification.md#evidence). Given a sandbox keeper's host PID, or
// a container ID that it resolves to the keeper PID with one Engine
// inspect, it reads only /proc/<pid>/cgroup and the matching cgroup v1 or
// v2 files: memory and memory+swap limits, failcnt or max events, OOM
// kills, pids max/current/events and CPU quota/period. It takes a
// "before" snapshot, then one per --interval while the keeper lives (for
// at most --duration), and with --until-gone waits up to --timeout for the
// scope to be gone or empty after cleanup.
//
// Usage:
//
//	observe (--pid PID | --container ID [--endpoint URL])
//	        [--interval DURATION] [--duration DURATION] [--until-gone] [--timeout DURATION]
//	        [--out DIR [--signing-key FILE]] [--json] [--root DIR]
//	observe verify --key FILE DIR
//	observe version
//	observe help [COMMAND]
//
// It prints a table (or the observation as JSON); with --out it writes
// observation.json and observation.txt into a fresh DIR and, with
// --signing-key, a DSSE envelope evidence.dsse.json over both (verify it
// with `observe verify --key PUB DIR`). --help on any subcommand prints
// to stdout and exits 0. --endpoint is used as given: DOCKER_HOST and
// docker contexts are ignored on purpose.
//
// Exit status is the table of internal/exitcode (also in README.md): 0
// observed (and, with --until-gone, the scope ended gone or empty); 1 the
// scope is still occupied at the timeout or a verification failed; 2
// usage; 3 the PID or container cannot be resolved; 4 internal error.
package main
