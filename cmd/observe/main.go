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
			return verifyCommand().Run(ctx, new(verifyOptions), args[1:], stdout, stderr)
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
	return observeCommand().Run(ctx, new(observeOptions), args, stdout, stderr)
}

// observeCommand is observe's own help and flag set; its options are
// observeOptions.
func observeCommand() *cli.Command {
	c := cli.New("observe", observeSynopsis, `Observe a sandbox keeper's cgroup scope from the host: limits, failures,
OOM kills and pids from /proc and the cgroup files only, before, during and
(with --until-gone) after cleanup.`)
	c.Details = `With --out the observation is written as observation.json and
observation.txt into a fresh DIR, and with --signing-key signed as a DSSE
envelope, evidence.dsse.json. --endpoint is used as given: DOCKER_HOST and
docker contexts are ignored on purpose.

` + observeCommands
	return c
}

// observeOptions are the flags of observe; it takes no positional
// arguments.
type observeOptions struct {
	cli.Positional
	pid                                  int
	container, endpoint, out, signingKey string
	root                                 string
	interval, duration, timeout          time.Duration
	untilGone, asJSON                    bool
}

// AddFlags declares o's flags on fs.
func (o *observeOptions) AddFlags(fl *flag.FlagSet) {
	fl.IntVar(&o.pid, "pid", 0, "keeper host `PID`")
	fl.StringVar(&o.container, "container", "", "container `ID` whose keeper PID is resolved once through the Engine")
	fl.StringVar(&o.endpoint, "endpoint", defaultEngine, "for --container: "+cli.EndpointNote)
	fl.DurationVar(&o.interval, "interval", time.Second, "`DURATION` between snapshots while the keeper lives")
	fl.DurationVar(&o.duration, "duration", 0, "stop snapshotting after this `DURATION` (0: one snapshot, or until the keeper exits with --until-gone)")
	fl.BoolVar(&o.untilGone, "until-gone", false, "snapshot until the keeper exits, then wait for the scope to be gone or empty")
	fl.DurationVar(&o.timeout, "timeout", 60*time.Second, "with --until-gone: how long (`DURATION`) to wait for the keeper to exit and the scope to empty")
	fl.StringVar(&o.out, "out", "", "fresh `DIR` for observation.json, observation.txt and the envelope")
	fl.StringVar(&o.signingKey, "signing-key", "", "ed25519 private key `FILE` (PEM PKCS#8) to sign --out with")
	fl.BoolVar(&o.asJSON, "json", false, "print the observation as JSON instead of the table")
	fl.StringVar(&o.root, "root", "/", "host filesystem root `DIR` holding proc/ and sys/fs/cgroup/ (recorded trees in tests)")
}

// Validate requires exactly one of --pid and --container, --out for
// --signing-key, and no positional argument.
func (o *observeOptions) Validate() error {
	if len(o.Args) > 0 || (o.pid == 0) == (o.container == "") || (o.signingKey != "" && o.out == "") {
		return cli.UsageError("exactly one of --pid or --container is required; --signing-key needs --out; no positional arguments")
	}
	return nil
}

// failed is a *cli.ExitError whose text is "observe: " and err.
func failed(code int, err error) *cli.ExitError {
	return cli.Exitf(code, "observe: %v", err)
}

// Exec checks the host and the flags' files, resolves the keeper and its
// scope (exitcode.Unavailable when either cannot be), observes it and
// prints (and with --out writes) the observation. It returns
// exitcode.Failed when --until-gone found the scope still occupied.
func (o *observeOptions) Exec(ctx context.Context, stdout, stderr io.Writer) (int, error) {
	if err := observer.Supported(o.root); err != nil {
		return 0, failed(exitcode.Unavailable, err)
	}
	key, err := o.loadKey()
	if err != nil {
		return 0, err
	}
	if err := o.checkOut(); err != nil {
		return 0, err
	}
	fsys := os.DirFS(o.root)
	pid, err := o.keeperPID(ctx)
	if err != nil {
		return 0, failed(exitcode.Unavailable, err)
	}
	scope, err := observer.Resolve(fsys, pid)
	if err != nil {
		return 0, failed(exitcode.Unavailable, err)
	}
	obs := &observer.Observation{Schema: observer.Schema, Container: o.container, Scope: scope}
	start := time.Now()
	obs.Snapshots = append(obs.Snapshots, scope.Read(fsys, "before"))
	fmt.Fprintf(stderr, "observing pid %d (cgroup v%d, %s)\n", pid, scope.Version, scope.Dirs["memory"])
	o.snapshot(ctx, fsys, pid, scope, obs, start)
	code := exitcode.OK
	if o.untilGone && !o.waitGone(ctx, fsys, scope, obs, start, stderr) {
		code = exitcode.Failed
	}
	if err := emit(ctx, obs, stdout, o.asJSON, o.out, key); err != nil {
		return 0, failed(exitcode.Internal, err)
	}
	return code, nil
}

// loadKey loads --signing-key, nil without it.
func (o *observeOptions) loadKey() (ed25519.PrivateKey, error) {
	if o.signingKey == "" {
		return nil, nil
	}
	key, err := attest.LoadPrivateKey(o.signingKey)
	if err != nil {
		return nil, failed(exitcode.Usage, err)
	}
	return key, nil
}

// checkOut refuses an --out directory that exists with entries in it.
func (o *observeOptions) checkOut() error {
	if o.out == "" {
		return nil
	}
	if entries, err := os.ReadDir(o.out); err == nil && len(entries) > 0 {
		return cli.Exitf(exitcode.Usage, "observe: output directory %s is not empty", o.out)
	}
	return nil
}

// keeperPID is --pid, or the keeper PID of --container.
func (o *observeOptions) keeperPID(ctx context.Context) (int, error) {
	if o.container == "" {
		return o.pid, nil
	}
	return keeper(ctx, o.endpoint, o.container)
}

// snapshot appends to obs one snapshot of scope per --interval while the
// keeper pid lives, and one "after" snapshot when it has exited, until
// --duration (with --until-gone and no --duration, --timeout) has passed
// since start or ctx ends.
func (o *observeOptions) snapshot(ctx context.Context, fsys fs.FS, pid int, scope observer.Scope, obs *observer.Observation, start time.Time) {
	limit := o.duration
	if o.untilGone && limit == 0 {
		limit = o.timeout
	}
	for time.Since(start) < limit {
		select {
		case <-ctx.Done():
			return
		case <-time.After(o.interval):
		}
		if !alive(fsys, pid) {
			obs.Snapshots = append(obs.Snapshots, scope.Read(fsys, "after"))
			return
		}
		obs.Snapshots = append(obs.Snapshots, scope.Read(fsys, fmt.Sprintf("during +%.1fs", time.Since(start).Seconds())))
	}
}

// waitGone waits for scope to be gone or empty until --timeout after
// start (at least one --interval), records the absence in obs and
// reports whether the scope ended gone or empty, saying on stderr which
// directories are still occupied when not.
func (o *observeOptions) waitGone(ctx context.Context, fsys fs.FS, scope observer.Scope, obs *observer.Observation, start time.Time, stderr io.Writer) bool {
	wctx, cancel := context.WithTimeout(ctx, max(o.timeout-time.Since(start), o.interval))
	a := scope.WaitAbsent(wctx, fsys, 100*time.Millisecond)
	cancel()
	obs.Absence = &a
	if !a.OK() {
		fmt.Fprintf(stderr, "observe: scope still occupied: %v\n", a.Dirs)
		return false
	}
	return true
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

// verifyCommand is observe verify's help and flag set; its options are
// verifyOptions.
func verifyCommand() *cli.Command {
	c := cli.New("observe verify", "--key FILE DIR", "Verify a signed observation directory written by observe --out --signing-key.")
	c.Details = `Checks the DSSE signature, both files' SHA-256 and the observation schema.
OK and the signed summary go to stdout; FAILED and each problem to stderr.`
	return c
}

// verifyOptions are the flags of observe verify; its one positional
// argument is the observation directory.
type verifyOptions struct {
	cli.Positional
	keyPath string
}

// AddFlags declares o's flags on fs.
func (o *verifyOptions) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.keyPath, "key", "", "ed25519 public key `FILE` (PEM PKIX)")
}

// Validate requires --key and exactly one directory.
func (o *verifyOptions) Validate() error {
	if o.keyPath == "" || len(o.Args) != 1 {
		return cli.UsageError("--key FILE and exactly one DIR are required")
	}
	return nil
}

// Exec verifies the directory: OK and the signed summary on stdout, or
// FAILED and each problem on stderr with exitcode.Failed. A key that
// cannot be loaded is exitcode.Usage.
func (o *verifyOptions) Exec(ctx context.Context, stdout, stderr io.Writer) (int, error) {
	key, err := attest.LoadPublicKey(o.keyPath)
	if err != nil {
		return 0, failed(exitcode.Usage, err)
	}
	dir := o.Args[0]
	obs, err := observer.Verify(ctx, dir, key)
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
		return exitcode.Failed, nil
	}
	summary, _ := json.Marshal(observer.PredicateOf(obs))
	fmt.Fprintf(stdout, "%s: OK: %s\n", dir, summary)
	return exitcode.OK, nil
}
