// Command qualify runs qualbox qualification campaigns against a real
// Docker Engine, signs and checks their reports, and manages the guest
// image (docs/qualification.md).
//
// Usage:
//
//	qualify run --manifest FILE [--endpoint URL] [--only NAMES | --skip NAMES] [--output DIR] [--repeat N] [--parallel N] [--scenario-timeout DURATION] [--signing-key FILE] [--probe BINARY | --image-archive FILE] [--engine-build FILE] [--json] [--keep-image] [--verbose]
//	qualify verify --policy FILE [--key FILE...] | --key FILE [--key FILE...] [--json] DIR...
//	qualify merge --policy FILE [--key FILE...] | --key FILE [--key FILE...] [--require LIST --row SPEC... --manifest FILE...] [--markdown|--json|--junit|--test2json] [--ascii] [--html FILE] [--vsa FILE --vsa-key FILE [--vsa-verifier-id URI] [--vsa-resource-uri URI] [--vsa-policy-uri URI]] DIR...
//	qualify keygen --out DIR
//	qualify image [--endpoint URL] [--probe BINARY] [--arch ARCH] [--busybox FILE] [--remove ID]
//	qualify version [--json]
//	qualify --version
//	qualify help [COMMAND]
//
// Every subcommand prints its help on stdout and exits 0 for -h or
// --help. run executes the manifest's scenarios and writes evidence.json,
// summary.md, junit.xml and one directory per scenario into a fresh
// output directory (default reports/runs/<UTC timestamp>). When the
// manifest says "image: build" the guest image is built first, or loaded
// from a guest image archive of `make release` with --image-archive, and
// exactly that image is removed at the end, unless --keep-image or the
// Engine already had it.
//
// With --signing-key (an ed25519 PKCS#8 PEM from keygen) run signs the
// complete report: evidence.dsse.json is a DSSE envelope around an in-toto
// Statement whose subjects are every file's SHA-256. verify checks the
// signature, every subject, that no file was added and the evidence
// schemas, and names each failing file; with --policy it trusts only the
// policy's trust entries, each key bound to rows and a validity window.
// merge verifies several reports the same way and renders one matrix of
// scenarios by tuple, exiting 1 unless the gate of its policy (or of
// --require, --row and --manifest) is met (docs/qualification.md#gate).
//
// The Engine is always the one named by the manifest or --endpoint:
// DOCKER_HOST and docker contexts are ignored on purpose.
//
// The internal subcommand `qualify controller-child` is the child
// controller process of the controller-death scenario, which starts it
// with flags derived from the manifest (endpoint, profile, image ID,
// namespace, user, policy, spill directory, record file, marker file,
// checkpoint) and kills it with SIGKILL at the checkpoint; it is not for
// interactive use and not in the usage text.
//
// Exit status is the table of internal/exitcode (also in README.md): 0
// passed, 1 a check failed, 2 usage, 3 no Engine or no guest image, 4
// internal error, 130 interrupted (the running scenario is cleaned up and
// the partial report written first).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/client"

	"github.com/qualbox/qualbox/internal/cli"
	"github.com/qualbox/qualbox/internal/enginepin"
	"github.com/qualbox/qualbox/internal/exitcode"
	"github.com/qualbox/qualbox/qualify"
	"github.com/qualbox/qualbox/qualify/evidence"
	"github.com/qualbox/qualbox/qualify/guest"
	"github.com/qualbox/qualbox/qualify/manifest"
	"github.com/qualbox/qualbox/qualify/scenario"
)

// defaultEndpoint is the Engine socket `image` uses without --endpoint.
const defaultEndpoint = "unix:///var/run/docker.sock"

// command is one listed subcommand.
type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// commands is the subcommand list, in the order the help shows it.
var commands = []command{
	{"run", "run a manifest's scenarios against an Engine and write (and sign) the report", runCmd},
	{"verify", "verify signed reports against a gate policy's trust or named public keys, naming each failing file", verifyCmd},
	{"merge", "verify several signed reports and print one matrix of scenarios by tuple", mergeCmd},
	{"keygen", "generate the ed25519 key pair that signs reports", func(_ context.Context, args []string, stdout, stderr io.Writer) int {
		return keygenCmd(args, stdout, stderr)
	}},
	{"image", "build the guest image, or remove exactly one image by ID", imageCmd},
	{"version", "print the version, VCS revision, Go version and scenario catalogue of this binary (--json: one object; qualify --version is the same as qualify version)", func(_ context.Context, args []string, stdout, stderr io.Writer) int {
		return versionCmd(args, stdout, stderr)
	}},
}

func main() {
	ctx, stop := context.Background(), func() {}
	// Only the commands that own Engine resources turn SIGINT/SIGTERM into
	// a cancellation they clean up after; verify, merge and keygen keep the
	// default, so Ctrl-C always stops them.
	if len(os.Args) > 1 && (os.Args[1] == "run" || os.Args[1] == "image" || os.Args[1] == scenario.ChildCommand) {
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	}
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitcode.Usage
	}
	if args[0] == "--version" || args[0] == "-version" {
		// `qualify --version` is `qualify version`.
		if len(args) > 1 {
			fmt.Fprintf(stderr, "qualify: %s takes no arguments\n", args[0])
			return exitcode.Usage
		}
		return versionCmd(nil, stdout, stderr)
	}
	if args[0] == scenario.ChildCommand {
		return childCmd(ctx, args[1:], stdout, stderr)
	}
	if cli.IsHelp(args[0]) {
		// `qualify help run` is `qualify run --help`.
		if args[0] == "help" && len(args) > 1 && !cli.IsHelp(args[1]) {
			if c := lookup(args[1]); c != nil {
				return c.run(ctx, []string{"--help"}, stdout, stderr)
			}
			fmt.Fprintf(stderr, "qualify help: unknown command %q\n", args[1])
			usage(stderr)
			return exitcode.Usage
		}
		usage(stdout)
		return exitcode.OK
	}
	if c := lookup(args[0]); c != nil {
		return c.run(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "qualify: unknown command %q\n", args[0])
	usage(stderr)
	return exitcode.Usage
}

func lookup(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: qualify COMMAND [flags] [arguments]

qualify runs qualbox qualification scenarios against a real Docker Engine,
signs their reports (DSSE + in-toto) and verifies and merges signed reports.

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "  %-8s %s\n", "help", "print this help, or a command's help: qualify help COMMAND")
	fmt.Fprint(w, `
Run 'qualify COMMAND --help' for a command's flags.
The Engine is always the one a manifest's endpoint or --endpoint names:
DOCKER_HOST and docker contexts are ignored on purpose.

`)
	exitcode.Help(w)
}

// imageBuildTimeout bounds building the guest image for "image: build"
// (seconds on lane A, about 6 s on lane C's emulated CPU; compiling the
// probe when --probe is not given takes longer).
const imageBuildTimeout = 10 * time.Minute

// Bounds of run's --repeat, --parallel and --scenario-timeout: a campaign
// stays one readable report, concurrency stays below what one Engine serves
// well, and a stuck scenario is noticed within a day.
const (
	maxRepeat          = 1000
	maxParallel        = 16
	maxScenarioTimeout = 24 * time.Hour
)

// renderRun renders a complete run's result: the signing line on stderr
// when signed, then the verdict table (or, asJSON, the run evidence as
// JSON) on stdout. An error is one writing or encoding them.
func renderRun(stdout, stderr io.Writer, res *qualify.Result, asJSON bool) error {
	if res.Envelope != "" {
		fmt.Fprintf(stderr, "signed: %s (key %s)\n", res.Envelope, res.KeyID)
	}
	if !asJSON {
		return evidence.Table(stdout, res.Run)
	}
	data, err := evidence.MarshalJSON(res.Run)
	if err != nil {
		return err
	}
	_, err = stdout.Write(data)
	return err
}

// scenarioList splits the comma-separated value of flag (--only or
// --skip) into scenario names, refusing an empty name or a repeated one.
func scenarioList(flag, value string) ([]string, error) {
	var names []string
	for _, n := range strings.Split(value, ",") {
		n = strings.TrimSpace(n)
		switch {
		case n == "":
			return nil, fmt.Errorf("%s %q: empty scenario name; want NAME[,NAME...]", flag, value)
		case slices.Contains(names, n):
			return nil, fmt.Errorf("%s %q: scenario %q is named twice", flag, value, n)
		}
		names = append(names, n)
	}
	return names, nil
}

// selectScenarios checks flag's names against the catalogue reg and the
// manifest m and returns the selection they make, nil when it leaves no
// entry out. A name the catalogue does not know, or one m does not list,
// is an error naming it.
func selectScenarios(flag string, names []string, reg scenario.Registry, m *manifest.Manifest) (*evidence.Selection, error) {
	var entries []string
	for _, e := range m.Scenarios {
		entries = append(entries, e.Name)
	}
	for _, n := range names {
		if _, ok := reg[n]; !ok {
			return nil, fmt.Errorf("%s: unknown scenario %q (the catalogue has: %s)", flag, n, strings.Join(reg.Names(), ", "))
		}
		if !slices.Contains(entries, n) {
			return nil, fmt.Errorf("%s: scenario %q is not in manifest %s (it lists: %s)", flag, n, m.Path, strings.Join(slices.Compact(slices.Clone(entries)), ", "))
		}
	}
	return evidence.NewSelection(names, flag == "--only", entries), nil
}

// checkRegularFile says why path is not a readable regular file, or nil.
func checkRegularFile(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%q: %v", path, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%q: not a regular file", path)
	}
	return nil
}

func imageCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := cli.New("qualify image", "[--endpoint URL] [--probe BINARY] [--arch ARCH] [--busybox FILE] [--remove ID]",
		"Build the guest image and print its ID, or remove exactly the image --remove names.")
	c.Details = `The guest image is assembled locally from a static probe binary; no
registry is used. --remove deletes only that image ID, never by name or
label. The Engine is the one --endpoint names: DOCKER_HOST and docker
contexts are ignored on purpose.`
	fs := c.Flags
	endpoint := fs.String("endpoint", defaultEndpoint, cli.EndpointNote)
	remove := fs.String("remove", "", "remove exactly the image `ID` (sha256:<64 hex>) instead of building")
	probe := fs.String("probe", "", "prebuilt static guest probe `BINARY` (default: compile it from this source tree)")
	arch := fs.String("arch", "amd64", "guest image `ARCH`, amd64 or arm64 (arm64 for the native Apple Silicon Desktop profile)")
	busybox := fs.String("busybox", guest.DefaultBusybox, "static Linux busybox `FILE` of --arch (Debian's busybox-static)")
	if code, done := c.Parse(args, stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		return c.UsageError(stderr, "no positional arguments are allowed")
	}
	// Every flag is checked before the Engine is contacted.
	if err := manifest.CheckEndpoint(*endpoint); err != nil {
		return c.UsageError(stderr, "--endpoint "+err.Error())
	}
	switch {
	case *remove != "":
		if !imageIDPattern.MatchString(*remove) {
			return c.UsageError(stderr, fmt.Sprintf("--remove %q: want an exact image ID, sha256:<64 lowercase hex>", *remove))
		}
	case *arch != "amd64" && *arch != "arm64":
		return c.UsageError(stderr, fmt.Sprintf("--arch %q: want amd64 or arm64", *arch))
	default:
		if *probe != "" {
			if err := checkRegularFile(*probe); err != nil {
				return c.UsageError(stderr, "--probe "+err.Error())
			}
		}
		if err := checkRegularFile(*busybox); err != nil {
			return c.UsageError(stderr, "--busybox "+err.Error()+"; install Debian's static busybox (apt-get install busybox-static)")
		}
	}
	eng, err := connect(ctx, *endpoint, "")
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitcode.Unavailable
	}
	defer eng.Close()
	if *remove != "" {
		if err := guest.Remove(ctx, eng, *remove); err != nil {
			fmt.Fprintf(stderr, "qualify: %v\n", err)
			return exitcode.Failed
		}
		fmt.Fprintf(stdout, "removed %s\n", *remove)
		return exitcode.OK
	}
	img, err := guest.Build(ctx, eng, guest.BuildOptions{ProbeBinary: *probe, Architecture: *arch, Busybox: *busybox})
	if err != nil {
		fmt.Fprintf(stderr, "qualify: %v\n", err)
		return exitcode.Unavailable
	}
	fmt.Fprintln(stdout, img.ID)
	return exitcode.OK
}

// imageIDPattern is an exact image ID, as guest.Remove accepts it.
var imageIDPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// connect returns a client of the Engine at endpoint that speaks exactly
// apiVersion ("1.<minor>") on every request, as the driver's client does:
// no negotiation, so the harness reads and builds through the API the
// profile was qualified against. An empty apiVersion, for a command that
// serves no one profile, pins the newest profile pin the Engine serves
// (enginepin.Connect). It pings first: when nothing answers, the error is
// one line naming the socket and how to start an Engine. It then reads
// /version through the pinned API: an Engine that does not serve it is
// refused with an error naming the endpoint, the version and the one the
// Engine reports.
func connect(ctx context.Context, endpoint, apiVersion string) (*client.Client, error) {
	eng, served, err := enginepin.Connect(ctx, endpoint, "qualbox-qualify", apiVersion)
	// Wrapped with %w, so that callers (and their tests) can still tell
	// enginepin's typed errors apart. Start-an-Engine advice only when
	// nothing answered, not when the caller gave up first.
	if noEngine := (*enginepin.NoEngineError)(nil); errors.As(err, &noEngine) && ctx.Err() == nil {
		return nil, fmt.Errorf("qualify: %w; start one with `make engine` or `dockerd --host %s`", err, endpoint)
	}
	if err != nil {
		return nil, fmt.Errorf("qualify: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := eng.ServerVersion(pctx, client.ServerVersionOptions{}); err != nil {
		eng.Close()
		return nil, fmt.Errorf("qualify: the Engine at %s does not serve Engine API %s (it reports API %s): %s", endpoint, eng.ClientVersion(), served, oneLine(err.Error()))
	}
	return eng, nil
}

func oneLine(s string) string {
	for i, r := range s {
		if r == '\n' || r == '\r' {
			return s[:i]
		}
	}
	return s
}
