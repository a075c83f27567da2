// Command qualify runs qualbox qualification campaigns against a real
// Docker Engine, signs and checks their reports, and manages the guest
// image (docs/qualification.md).
//
// Usage:
//
//	qualify run --manifest FILE [--endpoint URL] [--only NAMES | --skip NAMES] [--output DIR] [--repeat N] [--parallel N] [--scenario-timeout DURATION] [--signing-key FILE] [--probe BINARY | --image-archive FILE] [--engine-build FILE] [--json] [--keep-image] [--verbose]
//	qualify verify --policy FILE [--key FILE...] | --key FILE [--key FILE...] [--json] DIR...
//	qualify merge --policy FILE [--key FILE...] | --key FILE [--key FILE...] [--require LIST --row SPEC... --manifest FILE...] [--markdown|--json|--junit|--test2json] [--ascii] [--vsa FILE --vsa-key FILE [--vsa-verifier-id URI] [--vsa-resource-uri URI] [--vsa-policy-uri URI]] DIR...
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
	"crypto/ed25519"
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
	"github.com/qualbox/qualbox/internal/exitcode"
	"github.com/qualbox/qualbox/profiles"
	"github.com/qualbox/qualbox/qualify"
	"github.com/qualbox/qualbox/qualify/attest"
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

func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := cli.New("qualify run", "--manifest FILE [--endpoint URL] [--only NAMES | --skip NAMES] [--output DIR] [--repeat N] [--parallel N] [--scenario-timeout DURATION] [--signing-key FILE] [--probe BINARY | --image-archive FILE] [--engine-build FILE] [--json] [--keep-image] [--verbose]",
		"Run the manifest's scenarios against the Engine it names and write the report.")
	c.Details = `The report (evidence.json, summary.md, junit.xml, one directory per
scenario) goes into a fresh directory. With --signing-key the whole report
is signed: evidence.dsse.json is a DSSE envelope around an in-toto
Statement over every file's SHA-256. Progress goes to stderr, the verdict
table (or --json) to stdout.

The Engine is the manifest's endpoint, or the one --endpoint names instead:
DOCKER_HOST and docker contexts are ignored on purpose. --endpoint leaves
the manifest file and its recorded digest unchanged; the run header's
endpoint is the Engine the run actually used. When the manifest says "image: build" the guest image
is built first and exactly that image is removed at the end.

--image-archive FILE takes the guest image from a guest image archive of
make release (dist/qualbox-guest-linux-<arch>.tar) instead of building
it, so the host needs no busybox and no Go source tree. Before any Engine
contact the archive is checked (a tar of one untagged image whose config
and layer digests match what it declares and whose layer is exactly the
guest root filesystem) and its architecture must be the profile's image
architecture; it is loaded only when the Engine lacks
its image ID, the ID the Engine gives it must be the archive's (an
Engine with the containerd image store names it by its own manifest
digest; then the loaded image's layers are checked instead), and it is
removed by that ID at the end only if this run loaded it. The report
records the ID with image source "archive".

Each scenario run is bounded by --scenario-timeout: past it the scenario
is cancelled and fails, and its directory gets the controller's goroutine
stacks; one that then does not return within twice the policy's cleanup
deadline plus a minute is abandoned, and the run starts nothing more.

With --only NAMES or --skip NAMES (comma-separated scenario names of the
manifest; not both) only some entries run: the report is partial, lists
the others as not selected, records the selection in its header, says
PARTIAL in summary.md and on stdout, and a gate refuses it for a required
row (docs/qualification.md#partial-reports). Every flag is checked before
the Engine is contacted. Progress lines end with a newline; while a
scenario runs, a line every 30 s says it is still running.

With --repeat N every scenario runs N times in the one report; a scenario
that passed some runs and failed others is flaky, which fails the run and
the gate. With --parallel N up to N scenarios run at once, each in its own
namespace; one whose bounds need a quiet host runs alone. The report
records the repeat count, the parallelism and each round's start order.`
	fs := c.Flags
	manifestPath := fs.String("manifest", "", "manifest `FILE` (YAML)")
	endpoint := fs.String("endpoint", "", "instead of the manifest's engine.endpoint, the "+cli.EndpointNote)
	output := fs.String("output", "", "fresh output `DIR` (default: the manifest's output, else reports/runs/<UTC timestamp>)")
	asJSON := fs.Bool("json", false, "print the run evidence as JSON on stdout instead of the table")
	keepImage := fs.Bool("keep-image", false, `keep the guest image built or loaded for "image: build"`)
	verbose := fs.Bool("verbose", false, "print scenario detail lines on stderr")
	signingKey := fs.String("signing-key", "", "ed25519 private key `FILE` (PEM PKCS#8, from qualify keygen) to sign the report with")
	probe := fs.String("probe", "", `prebuilt static guest probe `+"`BINARY`"+` for "image: build" (default: compile it from this source tree)`)
	imageArchive := fs.String("image-archive", "", `for "image: build", load the guest image from the archive `+"`FILE`"+` (make release's dist/qualbox-guest-linux-<arch>.tar) instead of building it`)
	repeat := fs.Int("repeat", 1, "run the manifest's scenarios `N` times in one report; a scenario that fails some runs is flaky")
	parallel := fs.Int("parallel", 1, "run up to `N` scenarios at once, each in its own namespace")
	only := fs.String("only", "", "run only the manifest's scenarios named in `NAMES` (comma-separated); the report is partial")
	skip := fs.String("skip", "", "run all the manifest's scenarios but those named in `NAMES` (comma-separated); the report is partial")
	engineBuild := fs.String("engine-build", "", "how the Engine was built, recorded in the signed run header: a UTF-8 text `FILE` of at most 64 lines (lane C passes its Engine tuple's VERSIONS)")
	scenarioTimeout := fs.Duration("scenario-timeout", qualify.DefaultScenarioTimeout, "fail a scenario still running after `DURATION` (its goroutine stacks go to "+qualify.GoroutinesFile+" in its directory)")
	if code, done := c.Parse(args, stdout, stderr); done {
		return code
	}
	if *manifestPath == "" || fs.NArg() > 0 {
		return c.UsageError(stderr, "--manifest FILE is required and no positional arguments are allowed")
	}
	if *repeat < 1 || *repeat > maxRepeat || *parallel < 1 || *parallel > maxParallel {
		return c.UsageError(stderr, fmt.Sprintf("--repeat must be 1..%d and --parallel 1..%d, got %d and %d", maxRepeat, maxParallel, *repeat, *parallel))
	}
	if *scenarioTimeout < time.Second || *scenarioTimeout > maxScenarioTimeout {
		return c.UsageError(stderr, fmt.Sprintf("--scenario-timeout must be 1s..%s, got %s", maxScenarioTimeout, *scenarioTimeout))
	}
	if *endpoint != "" {
		if err := manifest.CheckEndpoint(*endpoint); err != nil {
			return c.UsageError(stderr, "--endpoint "+err.Error())
		}
	}
	if *only != "" && *skip != "" {
		return c.UsageError(stderr, "--only and --skip exclude each other: give one of them")
	}
	selFlag, selList := "--only", *only
	if *skip != "" {
		selFlag, selList = "--skip", *skip
	}
	var selNames []string
	if selList != "" {
		var err error
		if selNames, err = scenarioList(selFlag, selList); err != nil {
			return c.UsageError(stderr, err.Error())
		}
	}
	if *probe != "" {
		if err := checkRegularFile(*probe); err != nil {
			return c.UsageError(stderr, "--probe "+err.Error())
		}
	}
	var build []string
	if *engineBuild != "" {
		var err error
		if build, err = qualify.ReadEngineBuild(*engineBuild); err != nil {
			return c.UsageError(stderr, "--engine-build: "+err.Error())
		}
	}
	if *imageArchive != "" && *probe != "" {
		return c.UsageError(stderr, "--image-archive and --probe exclude each other: the archive holds its probe")
	}
	reg := scenario.Default()
	m, err := manifest.Load(*manifestPath, reg)
	if err != nil {
		fmt.Fprintf(stderr, "qualify: %v\n", err)
		return exitcode.Usage
	}
	var selection *evidence.Selection
	if selNames != nil {
		if selection, err = selectScenarios(selFlag, selNames, reg, m); err != nil {
			return c.UsageError(stderr, err.Error())
		}
		if selection == nil {
			fmt.Fprintf(stderr, "qualify: %s %s selects every scenario of %s: the report is complete\n", selFlag, selList, m.Path)
		}
	}
	if *endpoint != "" && *endpoint != m.Endpoint {
		// Every consumer of the manifest (connect, the run header, each
		// scenario's driver and child controller) reads m.Endpoint, so the
		// header records the Engine actually used; m.SHA256 stays the
		// digest of the file as read.
		fmt.Fprintf(stderr, "engine: %s (--endpoint, instead of the manifest's %s)\n", *endpoint, m.Endpoint)
		m.Endpoint = *endpoint
	}
	var archive guest.ArchiveImage
	var imageArch string
	if *imageArchive != "" {
		if m.Image != manifest.ImageBuild {
			return c.UsageError(stderr, fmt.Sprintf("--image-archive replaces \"image: build\", but manifest %s names image %s", *manifestPath, m.Image))
		}
		prof, err := profiles.Load(m.Profile)
		if err != nil {
			fmt.Fprintf(stderr, "qualify: %v\n", err)
			return exitcode.Usage
		}
		imageArch = prof.Image.Architecture
		if archive, err = guest.ReadArchive(*imageArchive); err != nil {
			fmt.Fprintf(stderr, "qualify: --image-archive: %v\n", err)
			return exitcode.Usage
		}
		if archive.Architecture != imageArch {
			fmt.Fprintf(stderr, "qualify: --image-archive: %v\n", &guest.ArchiveError{File: *imageArchive, Problem: guest.ArchivePlatform,
				Detail: fmt.Sprintf("image is linux/%s, profile %s requires linux/%s", archive.Architecture, m.Profile, imageArch)})
			return exitcode.Usage
		}
	}
	var key ed25519.PrivateKey
	if *signingKey != "" {
		if key, err = attest.LoadPrivateKey(*signingKey); err != nil {
			fmt.Fprintf(stderr, "qualify: %v\n", err)
			return exitcode.Usage
		}
	}
	out := *output
	if out == "" {
		out = m.Output
	}
	if out == "" {
		out = qualify.DefaultOutput(time.Now())
	}
	if err := qualify.CheckOutput(out); err != nil {
		fmt.Fprintf(stderr, "qualify: %v\n", err)
		return exitcode.Usage
	}
	// The harness's client speaks the profile's API version, as the
	// driver's does (docs/contract.md#profiles-and-admission).
	runProf, err := profiles.Load(m.Profile)
	if err != nil {
		fmt.Fprintf(stderr, "qualify: %v\n", err)
		return exitcode.Usage
	}
	eng, err := connect(ctx, m.Endpoint, runProf.Daemon.MinAPIVersion)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitcode.Unavailable
	}
	defer eng.Close()

	cfg := qualify.Config{
		Manifest: m, Registry: reg, Engine: eng, ImageID: m.Image, ImageSource: "manifest",
		Stdout: stdout, Stderr: stderr, JSON: *asJSON, Verbose: *verbose, SigningKey: key,
		Repeat: *repeat, Parallel: *parallel, ScenarioTimeout: *scenarioTimeout, Selection: selection,
		EngineBuild: build,
	}
	if selection != nil {
		fmt.Fprintf(stderr, "qualify: partial run (%s): not running %s\n", selection.Flag(), strings.Join(selection.Skipped, ", "))
	}
	if *imageArchive != "" {
		fmt.Fprintf(stderr, "loading guest image %s from %s ...\n", archive.ID, *imageArchive)
		lctx, cancel := context.WithTimeout(ctx, imageBuildTimeout)
		img, err := guest.Load(lctx, eng, archive, imageArch)
		cancel()
		if err != nil {
			fmt.Fprintf(stderr, "loading guest image failed\nqualify: %v\n", err)
			return exitcode.Unavailable
		}
		state := "loaded"
		if !img.Created {
			state = "already on the Engine: it stays there"
		}
		fmt.Fprintf(stderr, "guest image %s %s\n", img.ID, state)
		cfg.ImageID, cfg.ImageSource = img.ID, "archive"
		cfg.ImageArchiveSHA256, cfg.ImageArchiveID = archive.SHA256, archive.ID
		switch {
		case !img.Created:
		case *keepImage:
			fmt.Fprintf(stderr, "keeping image %s (remove it with: qualify image --remove %s)\n", img.ID, img.ID)
		default:
			cfg.RemoveImage = func(ctx context.Context) error { return guest.Remove(ctx, eng, img.ID) }
		}
	} else if m.Image == manifest.ImageBuild {
		// The image is built for the profile's image architecture (the
		// probe and busybox must be that architecture's executables).
		prof, err := profiles.Load(m.Profile)
		if err != nil {
			fmt.Fprintf(stderr, "qualify: %v\n", err)
			return exitcode.Usage
		}
		fmt.Fprintf(stderr, "building guest image (linux/%s) ...\n", prof.Image.Architecture)
		bctx, cancel := context.WithTimeout(ctx, imageBuildTimeout)
		img, err := guest.Build(bctx, eng, guest.BuildOptions{ProbeBinary: *probe, Architecture: prof.Image.Architecture})
		cancel()
		if err != nil {
			fmt.Fprintf(stderr, "building guest image failed\nqualify: %v\n", err)
			return exitcode.Unavailable
		}
		fmt.Fprintf(stderr, "built guest image %s (%s)\n", img.ID, img.Elapsed.Round(100*time.Millisecond))
		cfg.ImageID, cfg.ImageSource = img.ID, "build"
		if *keepImage {
			fmt.Fprintf(stderr, "keeping image %s (remove it with: qualify image --remove %s)\n", img.ID, img.ID)
		} else {
			cfg.RemoveImage = func(ctx context.Context) error { return guest.Remove(ctx, eng, img.ID) }
		}
	}
	removeImage := func() {
		if cfg.RemoveImage == nil {
			return
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		if rerr := cfg.RemoveImage(rctx); rerr != nil {
			fmt.Fprintf(stderr, "qualify: %v\n", rerr)
		}
		cancel()
	}
	// The output directory is created only once the Engine answered and the
	// image exists, so an early failure leaves no empty report directory.
	if cfg.Output, err = qualify.PrepareOutput(out); err != nil {
		fmt.Fprintf(stderr, "qualify: %v\n", err)
		removeImage()
		return exitcode.Internal
	}
	out = cfg.Output
	rep, err := qualify.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "qualify: %v\n", err)
		if rep == nil {
			removeImage()
			if ctx.Err() != nil {
				return exitcode.Interrupted
			}
			return exitcode.Internal
		}
	}
	fmt.Fprintf(stderr, "report: %s\n", out)
	if rep.Image.RemoveError != "" {
		// A leaked image is a cleanup failure of the run: never exit 0.
		fmt.Fprintf(stderr, "qualify: removing image %s failed: %s\n", rep.Image.ID, rep.Image.RemoveError)
	}
	return runExit(rep, err)
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

// runExit maps a finished run to its exit status: an interruption first,
// then a report that could not be completely written or signed (an
// internal error: the report on disk is not a complete one), then the
// run's verdict.
func runExit(rep *evidence.Run, err error) int {
	switch {
	case rep.Interrupted:
		return exitcode.Interrupted
	case err != nil:
		return exitcode.Internal
	case !rep.Verdict.OK():
		return exitcode.Failed
	}
	return exitcode.OK
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
	eng, err := connect(ctx, *endpoint, profiles.OldestDaemonAPIVersion())
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
// profile was qualified against. It pings first: when nothing answers, the
// error is one line naming the socket and how to start an Engine. It then
// reads /version through the pinned API: an Engine that does not serve it
// is refused with an error naming the endpoint, the version and the range
// the Engine serves.
func connect(ctx context.Context, endpoint, apiVersion string) (*client.Client, error) {
	eng, err := client.New(client.WithHost(endpoint), client.WithUserAgent("qualbox-qualify"), client.WithAPIVersion(apiVersion))
	if err != nil {
		return nil, fmt.Errorf("qualify: engine endpoint %s: %v", endpoint, err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ping, err := eng.Ping(pctx, client.PingOptions{})
	if err != nil {
		eng.Close()
		cause := err.Error()
		var opErr interface{ Unwrap() error }
		if errors.As(err, &opErr) && opErr.Unwrap() != nil {
			cause = opErr.Unwrap().Error()
		}
		return nil, fmt.Errorf("qualify: no Docker Engine answers at %s (%s); start one with `make engine` or `dockerd --host %s`", endpoint, oneLine(cause), endpoint)
	}
	if _, err := eng.ServerVersion(pctx, client.ServerVersionOptions{}); err != nil {
		eng.Close()
		return nil, fmt.Errorf("qualify: the Engine at %s does not serve Engine API %s (it reports API %s): %s", endpoint, apiVersion, ping.APIVersion, oneLine(err.Error()))
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
