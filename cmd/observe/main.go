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

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/qualbox/qualbox/internal/cli"
	"github.com/qualbox/qualbox/internal/enginepin"
	"github.com/qualbox/qualbox/internal/exitcode"
	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/evidence"
	"github.com/qualbox/qualbox/qualify/observer"
)

// defaultEngine is the Engine socket --container uses without --endpoint.
const defaultEngine = "unix:///var/run/docker.sock"

const observeSynopsis = "(--pid PID | --container ID [--endpoint URL]) [--interval DURATION] [--duration DURATION] [--until-gone] [--timeout DURATION] [--out DIR [--signing-key FILE]] [--json] [--root DIR]"

// observeCommands is the command list of observe's help.
const observeCommands = `Commands:
  (none)   observe a sandbox's cgroup scope, as the flags above say
  verify   verify a signed observation directory: observe verify --key FILE DIR
  version  print the version, VCS revision and Go version of this binary
  help     print this help, or a command's help: observe help COMMAND

Run 'observe COMMAND --help' for a command's flags.`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch {
		case args[0] == "verify":
			return verify(ctx, args[1:], stdout, stderr)
		case args[0] == "version":
			return cli.VersionCommand("observe", args[1:], stdout, stderr)
		case args[0] == "help" && len(args) > 1 && !cli.IsHelp(args[1]):
			switch args[1] {
			case "verify", "version":
				return run(ctx, []string{args[1], "--help"}, stdout, stderr)
			}
			fmt.Fprintf(stderr, "observe help: unknown command %q\n", args[1])
			return exitcode.Usage
		case args[0] == "help":
			args = []string{"--help"}
		}
	}
	c := cli.New("observe", observeSynopsis, `Observe a sandbox keeper's cgroup scope from the host: limits, failures,
OOM kills and pids from /proc and the cgroup files only, before, during and
(with --until-gone) after cleanup.`)
	c.Details = `With --out the observation is written as observation.json and
observation.txt into a fresh DIR, and with --signing-key signed as a DSSE
envelope, evidence.dsse.json. --endpoint is used as given: DOCKER_HOST and
docker contexts are ignored on purpose.

` + observeCommands
	fl := c.Flags
	pid := fl.Int("pid", 0, "keeper host `PID`")
	container := fl.String("container", "", "container `ID` whose keeper PID is resolved once through the Engine")
	endpoint := fl.String("endpoint", defaultEngine, "for --container: "+cli.EndpointNote)
	interval := fl.Duration("interval", time.Second, "`DURATION` between snapshots while the keeper lives")
	duration := fl.Duration("duration", 0, "stop snapshotting after this `DURATION` (0: one snapshot, or until the keeper exits with --until-gone)")
	untilGone := fl.Bool("until-gone", false, "snapshot until the keeper exits, then wait for the scope to be gone or empty")
	timeout := fl.Duration("timeout", 60*time.Second, "with --until-gone: how long (`DURATION`) to wait for the keeper to exit and the scope to empty")
	out := fl.String("out", "", "fresh `DIR` for observation.json, observation.txt and the envelope")
	signingKey := fl.String("signing-key", "", "ed25519 private key `FILE` (PEM PKCS#8) to sign --out with")
	asJSON := fl.Bool("json", false, "print the observation as JSON instead of the table")
	root := fl.String("root", "/", "host filesystem root `DIR` holding proc/ and sys/fs/cgroup/ (recorded trees in tests)")
	if code, done := c.Parse(args, stdout, stderr); done {
		return code
	}
	if fl.NArg() > 0 || (*pid == 0) == (*container == "") || (*signingKey != "" && *out == "") {
		return c.UsageError(stderr, "exactly one of --pid or --container is required; --signing-key needs --out; no positional arguments")
	}
	if err := observer.Supported(*root); err != nil {
		fmt.Fprintf(stderr, "observe: %v\n", err)
		return exitcode.Unavailable
	}
	var key ed25519.PrivateKey
	if *signingKey != "" {
		var err error
		if key, err = attest.LoadPrivateKey(*signingKey); err != nil {
			fmt.Fprintf(stderr, "observe: %v\n", err)
			return exitcode.Usage
		}
	}
	if *out != "" {
		if entries, err := os.ReadDir(*out); err == nil && len(entries) > 0 {
			fmt.Fprintf(stderr, "observe: output directory %s is not empty\n", *out)
			return exitcode.Usage
		}
	}
	fsys := os.DirFS(*root)
	if *container != "" {
		p, err := keeper(ctx, *endpoint, *container)
		if err != nil {
			fmt.Fprintf(stderr, "observe: %v\n", err)
			return exitcode.Unavailable
		}
		*pid = p
	}
	scope, err := observer.Resolve(fsys, *pid)
	if err != nil {
		fmt.Fprintf(stderr, "observe: %v\n", err)
		return exitcode.Unavailable
	}
	o := &observer.Observation{Schema: observer.Schema, Container: *container, Scope: scope}
	start := time.Now()
	o.Snapshots = append(o.Snapshots, scope.Read(fsys, "before"))
	fmt.Fprintf(stderr, "observing pid %d (cgroup v%d, %s)\n", *pid, scope.Version, scope.Dirs["memory"])
	limit := *duration
	if *untilGone && limit == 0 {
		limit = *timeout
	}
	code := exitcode.OK
loop:
	for time.Since(start) < limit {
		select {
		case <-ctx.Done():
			break loop
		case <-time.After(*interval):
		}
		if !alive(fsys, *pid) {
			o.Snapshots = append(o.Snapshots, scope.Read(fsys, "after"))
			break
		}
		o.Snapshots = append(o.Snapshots, scope.Read(fsys, fmt.Sprintf("during +%.1fs", time.Since(start).Seconds())))
	}
	if *untilGone {
		wctx, cancel := context.WithTimeout(ctx, max(*timeout-time.Since(start), *interval))
		a := scope.WaitAbsent(wctx, fsys, 100*time.Millisecond)
		cancel()
		o.Absence = &a
		if !a.OK() {
			fmt.Fprintf(stderr, "observe: scope still occupied: %v\n", a.Dirs)
			code = exitcode.Failed
		}
	}
	if err := emit(ctx, o, stdout, *asJSON, *out, key); err != nil {
		fmt.Fprintf(stderr, "observe: %v\n", err)
		return exitcode.Internal
	}
	return code
}

// keeper resolves a container's keeper PID with one inspect, then closes
// the Engine connection: everything after is /proc and /sys only. The
// inspect goes through the newest profile pin the Engine serves, pinned
// as the driver pins its own: never negotiated (enginepin.Connect).
func keeper(ctx context.Context, endpoint, id string) (int, error) {
	eng, _, err := enginepin.Connect(ctx, endpoint, "qualbox-observe", "")
	if err != nil {
		return 0, err
	}
	defer eng.Close()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return observer.KeeperPID(cctx, eng, id)
}

func alive(fsys fs.FS, pid int) bool {
	_, err := fs.Stat(fsys, fmt.Sprintf("proc/%d", pid))
	return err == nil
}

func emit(ctx context.Context, o *observer.Observation, stdout io.Writer, asJSON bool, out string, key ed25519.PrivateKey) error {
	data, err := evidence.MarshalJSON(o)
	if err != nil {
		return err
	}
	if asJSON {
		if _, err := stdout.Write(data); err != nil {
			return err
		}
	} else if err := observer.Table(stdout, o); err != nil {
		return err
	}
	if out == "" {
		return nil
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := evidence.WriteFile(filepath.Join(out, observer.ObservationFile), data); err != nil {
		return err
	}
	var table bytesWriter
	if err := observer.Table(&table, o); err != nil {
		return err
	}
	if err := evidence.WriteFile(filepath.Join(out, observer.TableFile), table); err != nil {
		return err
	}
	if key != nil {
		return observer.Sign(ctx, out, key, o)
	}
	return nil
}

type bytesWriter []byte

func (b *bytesWriter) Write(p []byte) (int, error) {
	*b = append(*b, p...)
	return len(p), nil
}

func verify(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := cli.New("observe verify", "--key FILE DIR", "Verify a signed observation directory written by observe --out --signing-key.")
	c.Details = `Checks the DSSE signature, both files' SHA-256 and the observation schema.
OK and the signed summary go to stdout; FAILED and each problem to stderr.`
	keyPath := c.Flags.String("key", "", "ed25519 public key `FILE` (PEM PKIX)")
	if code, done := c.Parse(args, stdout, stderr); done {
		return code
	}
	if *keyPath == "" || c.Flags.NArg() != 1 {
		return c.UsageError(stderr, "--key FILE and exactly one DIR are required")
	}
	key, err := attest.LoadPublicKey(*keyPath)
	if err != nil {
		fmt.Fprintf(stderr, "observe: %v\n", err)
		return exitcode.Usage
	}
	dir := c.Flags.Arg(0)
	o, err := observer.Verify(ctx, dir, key)
	if err != nil {
		var ve *attest.VerifyError
		if errors.As(err, &ve) {
			fmt.Fprintf(stderr, "%s: FAILED\n", dir)
			for _, p := range ve.Problems {
				fmt.Fprintf(stderr, "  %s: %s\n", p.File, p.Problem)
			}
		} else {
			fmt.Fprintf(stderr, "observe: %s: FAILED: %v\n", dir, err)
		}
		return exitcode.Failed
	}
	summary, _ := json.Marshal(observer.PredicateOf(o))
	fmt.Fprintf(stdout, "%s: OK: %s\n", dir, summary)
	return exitcode.OK
}
