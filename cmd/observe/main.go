// Command observe is qualbox's independent cgroup observer (DESIGN.md
// "Observer"). Given a sandbox keeper's host PID, or a container ID that it
// resolves to the keeper PID with one Engine inspect, it reads only
// /proc/<pid>/cgroup and the matching cgroup v1 or v2 files: memory and
// memory+swap limits, failcnt or max events, OOM kills, pids
// max/current/events and CPU quota/period. It takes a "before" snapshot,
// then one per --interval while the keeper lives (for at most --duration),
// and with --until-gone waits up to --timeout for the scope to be gone or
// empty after cleanup.
//
// Usage:
//
//	observe (--pid N | --container ID [--endpoint unix:///var/run/docker.sock])
//	        [--interval 1s] [--duration 0] [--until-gone] [--timeout 60s]
//	        [--out DIR [--signing-key FILE]] [--json] [--root /]
//
// It prints a table (or the observation as JSON); with --out it writes
// observation.json and observation.txt into a fresh DIR and, with
// --signing-key, a DSSE envelope evidence.dsse.json over both (verify it
// with `observe verify --key PUB DIR`).
//
// Exit status: 0 when observed (and, with --until-gone, the scope ended
// gone or empty); 1 when the scope is still occupied at the timeout or a
// verification failed; 2 for usage errors; 3 when the PID or container
// cannot be resolved.
package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/moby/moby/client"

	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/evidence"
	"github.com/qualbox/qualbox/qualify/observer"
)

const (
	exitOK        = 0
	exitFailed    = 1
	exitUsage     = 2
	exitResolve   = 3
	defaultEngine = "unix:///var/run/docker.sock"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "verify" {
		return verify(ctx, args[1:], stdout, stderr)
	}
	fl := flag.NewFlagSet("observe", flag.ContinueOnError)
	fl.SetOutput(stderr)
	pid := fl.Int("pid", 0, "keeper host `PID`")
	container := fl.String("container", "", "container `ID` whose keeper PID is resolved once through the Engine")
	endpoint := fl.String("endpoint", defaultEngine, "Engine `socket` for --container")
	interval := fl.Duration("interval", time.Second, "time between snapshots while the keeper lives")
	duration := fl.Duration("duration", 0, "stop snapshotting after this long (0: one snapshot, or until the keeper exits with --until-gone)")
	untilGone := fl.Bool("until-gone", false, "snapshot until the keeper exits, then wait for the scope to be gone or empty")
	timeout := fl.Duration("timeout", 60*time.Second, "with --until-gone: how long to wait for the keeper to exit and the scope to empty")
	out := fl.String("out", "", "fresh `directory` for observation.json, observation.txt and the envelope")
	signingKey := fl.String("signing-key", "", "ed25519 private key `file` (PEM PKCS#8) to sign --out with")
	asJSON := fl.Bool("json", false, "print the observation as JSON instead of the table")
	root := fl.String("root", "/", "host filesystem `root` holding proc/ and sys/fs/cgroup/ (recorded trees in tests)")
	if err := fl.Parse(args); err != nil || fl.NArg() > 0 || (*pid == 0) == (*container == "") || (*signingKey != "" && *out == "") {
		fmt.Fprintln(stderr, "observe: exactly one of --pid or --container is required; --signing-key needs --out")
		return exitUsage
	}
	if err := observer.Supported(*root); err != nil {
		fmt.Fprintf(stderr, "observe: %v\n", err)
		return exitUsage
	}
	var key ed25519.PrivateKey
	if *signingKey != "" {
		var err error
		if key, err = attest.LoadPrivateKey(*signingKey); err != nil {
			fmt.Fprintf(stderr, "observe: %v\n", err)
			return exitUsage
		}
	}
	if *out != "" {
		if entries, err := os.ReadDir(*out); err == nil && len(entries) > 0 {
			fmt.Fprintf(stderr, "observe: output directory %s is not empty\n", *out)
			return exitUsage
		}
	}
	fsys := os.DirFS(*root)
	if *container != "" {
		p, err := keeper(ctx, *endpoint, *container)
		if err != nil {
			fmt.Fprintf(stderr, "observe: %v\n", err)
			return exitResolve
		}
		*pid = p
	}
	scope, err := observer.Resolve(fsys, *pid)
	if err != nil {
		fmt.Fprintf(stderr, "observe: %v\n", err)
		return exitResolve
	}
	o := &observer.Observation{Schema: observer.Schema, Container: *container, Scope: scope}
	start := time.Now()
	o.Snapshots = append(o.Snapshots, scope.Read(fsys, "before"))
	fmt.Fprintf(stderr, "observing pid %d (cgroup v%d, %s)\n", *pid, scope.Version, scope.Dirs["memory"])
	limit := *duration
	if *untilGone && limit == 0 {
		limit = *timeout
	}
	code := exitOK
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
			code = exitFailed
		}
	}
	if err := emit(ctx, o, stdout, *asJSON, *out, key); err != nil {
		fmt.Fprintf(stderr, "observe: %v\n", err)
		return exitFailed
	}
	return code
}

// keeper resolves a container's keeper PID with one inspect, then closes
// the Engine connection: everything after is /proc and /sys only.
func keeper(ctx context.Context, endpoint, id string) (int, error) {
	cli, err := client.New(client.WithHost(endpoint), client.WithUserAgent("qualbox-observe"))
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return observer.KeeperPID(cctx, cli, id)
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
	fl := flag.NewFlagSet("observe verify", flag.ContinueOnError)
	fl.SetOutput(stderr)
	keyPath := fl.String("key", "", "ed25519 public key `file` (PEM PKIX)")
	if err := fl.Parse(args); err != nil || *keyPath == "" || fl.NArg() != 1 {
		fmt.Fprintln(stderr, "observe verify: --key PUB DIR")
		return exitUsage
	}
	key, err := attest.LoadPublicKey(*keyPath)
	if err != nil {
		fmt.Fprintf(stderr, "observe: %v\n", err)
		return exitUsage
	}
	o, err := observer.Verify(ctx, fl.Arg(0), key)
	if err != nil {
		var ve *attest.VerifyError
		if errors.As(err, &ve) {
			fmt.Fprintf(stdout, "%s: FAILED\n", fl.Arg(0))
			for _, p := range ve.Problems {
				fmt.Fprintf(stdout, "  %s: %s\n", p.File, p.Problem)
			}
		} else {
			fmt.Fprintf(stderr, "observe: %v\n", err)
		}
		return exitFailed
	}
	summary, _ := json.Marshal(observer.PredicateOf(o))
	fmt.Fprintf(stdout, "%s: OK: %s\n", fl.Arg(0), summary)
	return exitOK
}
