package main

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/qualbox/qualbox/internal/cli"
	"github.com/qualbox/qualbox/internal/exitcode"
	"github.com/qualbox/qualbox/internal/termprogress"
	"github.com/qualbox/qualbox/profiles"
	"github.com/qualbox/qualbox/qualify"
	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/evidence"
	"github.com/qualbox/qualbox/qualify/guest"
	"github.com/qualbox/qualbox/qualify/manifest"
	"github.com/qualbox/qualbox/qualify/scenario"
)

// runCommand is qualify run's help and flag set; its options are
// runOptions.
func runCommand() *cli.Command {
	c := cli.New("qualify run", "--manifest FILE [--endpoint URL] [--only NAMES | --skip NAMES] [--output DIR] [--repeat N] [--parallel N] [--scenario-timeout DURATION] [--signing-key FILE] [--probe BINARY | --image-archive FILE] [--engine-build FILE] [--image-inputs FILE] [--json] [--keep-image] [--verbose] [--progress MODE]",
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
the Engine is contacted.

--progress MODE says how progress shows on stderr. plain: one line when a
scenario starts and one when it ends, each ending with a newline, and
while a scenario runs a line every 30 s says it is still running. tty: a
live display, redrawn in place, of the running scenarios, how many runs
are done of all, the time elapsed and the time left (estimated from the
finished runs, and at most the remaining runs' --scenario-timeout). auto,
the default, is tty when stderr is a terminal, TERM is not "dumb" and CI
is not set, else plain. The display ends before the verdict table and
the report path print.

With --repeat N every scenario runs N times in the one report; a scenario
that passed some runs and failed others is flaky, which fails the run and
the gate. With --parallel N up to N scenarios run at once, each in its own
namespace; one whose bounds need a quiet host runs alone. The report
records the repeat count, the parallelism and each round's start order.`
	return c
}

// runOptions are the flags of qualify run; it takes no positional
// arguments.
type runOptions struct {
	cli.Positional
	manifest, endpoint, output, signingKey  string
	probe, imageArchive, only, skip, engine string
	progress, imageInputs                   string
	asJSON, keepImage, verbose              bool
	repeat, parallel                        int
	scenarioTimeout                         time.Duration
}

// AddFlags declares o's flags on fs.
func (o *runOptions) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.manifest, "manifest", "", "manifest `FILE` (YAML)")
	fs.StringVar(&o.endpoint, "endpoint", "", "instead of the manifest's engine.endpoint, the "+cli.EndpointNote)
	fs.StringVar(&o.output, "output", "", "fresh output `DIR` (default: the manifest's output, else reports/runs/<UTC timestamp>)")
	fs.BoolVar(&o.asJSON, "json", false, "print the run evidence as JSON on stdout instead of the table")
	fs.BoolVar(&o.keepImage, "keep-image", false, `keep the guest image built or loaded for "image: build"`)
	fs.BoolVar(&o.verbose, "verbose", false, "print scenario detail lines on stderr")
	fs.StringVar(&o.progress, "progress", string(termprogress.Auto), "progress on stderr as `MODE`: auto (tty on a terminal, else plain), tty (a live display) or plain (lines)")
	fs.StringVar(&o.signingKey, "signing-key", "", "ed25519 private key `FILE` (PEM PKCS#8, from qualify keygen) to sign the report with")
	fs.StringVar(&o.probe, "probe", "", `prebuilt static guest probe `+"`BINARY`"+` for "image: build" (default: compile it from this source tree)`)
	fs.StringVar(&o.imageArchive, "image-archive", "", `for "image: build", load the guest image from the archive `+"`FILE`"+` (make release's dist/qualbox-guest-linux-<arch>.tar) instead of building it`)
	fs.IntVar(&o.repeat, "repeat", 1, "run the manifest's scenarios `N` times in one report; a scenario that fails some runs is flaky")
	fs.IntVar(&o.parallel, "parallel", 1, "run up to `N` scenarios at once, each in its own namespace")
	fs.StringVar(&o.only, "only", "", "run only the manifest's scenarios named in `NAMES` (comma-separated); the report is partial")
	fs.StringVar(&o.skip, "skip", "", "run all the manifest's scenarios but those named in `NAMES` (comma-separated); the report is partial")
	fs.StringVar(&o.engine, "engine-build", "", "how the Engine was built, recorded in the signed run header: a UTF-8 text `FILE` of at most 64 lines (lane C passes its Engine tuple's VERSIONS)")
	fs.StringVar(&o.imageInputs, "image-inputs", "", "what the virtual machine image of the run was assembled from, recorded in the signed run header: an image inputs `FILE` (lanes C and D pass their guest's /etc/qualbox-image-inputs; docs/lanes.md#image-inputs)")
	fs.DurationVar(&o.scenarioTimeout, "scenario-timeout", qualify.DefaultScenarioTimeout, "fail a scenario still running after `DURATION` (its goroutine stacks go to "+qualify.GoroutinesFile+" in its directory)")
}

// Validate checks the flags by themselves, before any file but --probe
// is read: a cli.UsageError naming the flag that is wrong.
func (o *runOptions) Validate() error {
	switch {
	case o.manifest == "" || len(o.Args) > 0:
		return cli.UsageError("--manifest FILE is required and no positional arguments are allowed")
	case o.repeat < 1 || o.repeat > maxRepeat || o.parallel < 1 || o.parallel > maxParallel:
		return cli.UsageError(fmt.Sprintf("--repeat must be 1..%d and --parallel 1..%d, got %d and %d", maxRepeat, maxParallel, o.repeat, o.parallel))
	case o.scenarioTimeout < time.Second || o.scenarioTimeout > maxScenarioTimeout:
		return cli.UsageError(fmt.Sprintf("--scenario-timeout must be 1s..%s, got %s", maxScenarioTimeout, o.scenarioTimeout))
	}
	if _, err := termprogress.ParseMode(o.progress); err != nil {
		return cli.UsageError("--progress " + err.Error())
	}
	if o.endpoint != "" {
		if err := manifest.CheckEndpoint(o.endpoint); err != nil {
			return cli.UsageError("--endpoint " + err.Error())
		}
	}
	if o.only != "" && o.skip != "" {
		return cli.UsageError("--only and --skip exclude each other: give one of them")
	}
	if _, list := o.selectionFlag(); list != "" {
		if _, err := scenarioList(o.selectionFlag()); err != nil {
			return cli.UsageError(err.Error())
		}
	}
	if o.probe != "" {
		if err := checkRegularFile(o.probe); err != nil {
			return cli.UsageError("--probe " + err.Error())
		}
	}
	return nil
}

// selectionFlag is the selection flag given ("--only" or "--skip") and
// its value; "--only" and "" when neither is.
func (o *runOptions) selectionFlag() (flag, list string) {
	if o.skip != "" {
		return "--skip", o.skip
	}
	return "--only", o.only
}

// runPlan is what qualify run resolved from its flags' files before it
// contacts the Engine.
type runPlan struct {
	reg       scenario.Registry
	m         *manifest.Manifest
	selection *evidence.Selection
	build     []string
	inputs    []string
	archive   guest.ArchiveImage
	imageArch string
	key       ed25519.PrivateKey
	out       string
}

// resolve reads the files the flags name (engine build, image inputs, manifest,
// selection, image archive, signing key) and checks the output directory:
// a cli.UsageError or *cli.ExitError naming what is wrong. Every check comes
// before the Engine is contacted.
func (o *runOptions) resolve(stderr io.Writer) (*runPlan, error) {
	p := &runPlan{reg: scenario.Default()}
	var err error
	if o.engine != "" {
		if p.build, err = qualify.ReadEngineBuild(o.engine); err != nil {
			return nil, cli.UsageError("--engine-build: " + err.Error())
		}
	}
	if o.imageInputs != "" {
		if p.inputs, err = qualify.ReadImageInputs(o.imageInputs); err != nil {
			return nil, cli.UsageError("--image-inputs: " + err.Error())
		}
	}
	if o.imageArchive != "" && o.probe != "" {
		return nil, cli.UsageError("--image-archive and --probe exclude each other: the archive holds its probe")
	}
	if p.m, err = manifest.Load(o.manifest, p.reg); err != nil {
		return nil, failed(exitcode.Usage, err)
	}
	if err := o.resolveSelection(p, stderr); err != nil {
		return nil, err
	}
	if o.endpoint != "" && o.endpoint != p.m.Endpoint {
		// Every consumer of the manifest (connect, the run header, each
		// scenario's driver and child controller) reads m.Endpoint, so the
		// header records the Engine actually used; m.SHA256 stays the
		// digest of the file as read.
		fmt.Fprintf(stderr, "engine: %s (--endpoint, instead of the manifest's %s)\n", o.endpoint, p.m.Endpoint)
		p.m.Endpoint = o.endpoint
	}
	if o.imageArchive != "" {
		if err := o.resolveArchive(p); err != nil {
			return nil, err
		}
	}
	if o.signingKey != "" {
		if p.key, err = attest.LoadPrivateKey(o.signingKey); err != nil {
			return nil, failed(exitcode.Usage, err)
		}
	}
	p.out = cmp.Or(o.output, p.m.Output, qualify.DefaultOutput(time.Now()))
	if err := qualify.CheckOutput(p.out); err != nil {
		return nil, failed(exitcode.Usage, err)
	}
	return p, nil
}

// resolveSelection sets p.selection from --only or --skip.
func (o *runOptions) resolveSelection(p *runPlan, stderr io.Writer) error {
	flag, list := o.selectionFlag()
	if list == "" {
		return nil
	}
	names, err := scenarioList(flag, list)
	if err == nil {
		p.selection, err = selectScenarios(flag, names, p.reg, p.m)
	}
	if err != nil {
		return cli.UsageError(err.Error())
	}
	if p.selection == nil {
		fmt.Fprintf(stderr, "qualify: %s %s selects every scenario of %s: the report is complete\n", flag, list, p.m.Path)
	}
	return nil
}

// resolveArchive checks --image-archive against the manifest and its
// profile and sets p.archive and p.imageArch.
func (o *runOptions) resolveArchive(p *runPlan) error {
	m := p.m
	if m.Image != manifest.ImageBuild {
		return cli.UsageError(fmt.Sprintf("--image-archive replaces \"image: build\", but manifest %s names image %s", o.manifest, m.Image))
	}
	prof, err := profiles.Load(m.Profile)
	if err != nil {
		return failed(exitcode.Usage, err)
	}
	p.imageArch = prof.Image.Architecture
	if p.archive, err = guest.ReadArchive(o.imageArchive); err != nil {
		return failed(exitcode.Usage, fmt.Errorf("--image-archive: %w", err))
	}
	if p.archive.Architecture != p.imageArch {
		return failed(exitcode.Usage, fmt.Errorf("--image-archive: %w", &guest.ArchiveError{File: o.imageArchive, Problem: guest.ArchivePlatform,
			Detail: fmt.Sprintf("image is linux/%s, profile %s requires linux/%s", p.archive.Architecture, m.Profile, p.imageArch)}))
	}
	return nil
}

// Exec runs the checked options: resolves their files, connects to the
// Engine, provides the guest image, runs the campaign into a fresh output
// directory and renders its Result. It returns the exit status
// (qualify.ExitCode once a report exists), or the error that stopped it
// before the campaign.
func (o *runOptions) Exec(ctx context.Context, stdout, stderr io.Writer) (int, error) {
	p, err := o.resolve(stderr)
	if err != nil {
		return 0, err
	}
	// The harness's client speaks the profile's API version, as the
	// driver's does (docs/contract.md#profiles-and-admission).
	prof, err := profiles.Load(p.m.Profile)
	if err != nil {
		return 0, failed(exitcode.Usage, err)
	}
	eng, err := connect(ctx, p.m.Endpoint, prof.Daemon.MinAPIVersion)
	if err != nil {
		return 0, cli.Exitf(exitcode.Unavailable, "%v", err)
	}
	defer eng.Close()
	cfg := o.config(p, eng, stderr)
	if p.selection != nil {
		fmt.Fprintf(stderr, "qualify: partial run (%s): not running %s\n", p.selection.Flag(), strings.Join(p.selection.Skipped, ", "))
	}
	if err := o.provideImage(ctx, eng, p, &cfg, stderr); err != nil {
		return 0, err
	}
	// The output directory is created only once the Engine answered and the
	// image exists, so an early failure leaves no empty report directory.
	if cfg.Output, err = qualify.PrepareOutput(p.out); err != nil {
		fmt.Fprintf(stderr, "qualify: %v\n", err)
		removeImage(ctx, cfg, stderr)
		return exitcode.Internal, nil
	}
	return o.runAndRender(ctx, cfg, stdout, stderr), nil
}

// config is the campaign's configuration from the options and plan p,
// with the image the manifest names; provideImage replaces it for
// "image: build".
func (o *runOptions) config(p *runPlan, eng *client.Client, stderr io.Writer) qualify.Config {
	return qualify.Config{
		Manifest: p.m, Registry: p.reg, Engine: eng, ImageID: p.m.Image, ImageSource: "manifest",
		Stderr: stderr, Verbose: o.verbose, SigningKey: p.key,
		Repeat: o.repeat, Parallel: o.parallel, ScenarioTimeout: o.scenarioTimeout, Selection: p.selection,
		EngineBuild: p.build, ImageInputs: p.inputs,
	}
}

// provideImage provides the guest image of "image: build": loaded from
// --image-archive or built for the profile's image architecture, and set
// in cfg with the RemoveImage that removes exactly it (unless
// --keep-image or the Engine already had it). A manifest naming an image
// needs nothing.
func (o *runOptions) provideImage(ctx context.Context, eng *client.Client, p *runPlan, cfg *qualify.Config, stderr io.Writer) error {
	switch {
	case o.imageArchive != "":
		return o.loadImage(ctx, eng, p, cfg, stderr)
	case p.m.Image == manifest.ImageBuild:
		return o.buildImage(ctx, eng, p, cfg, stderr)
	}
	return nil
}

func (o *runOptions) loadImage(ctx context.Context, eng *client.Client, p *runPlan, cfg *qualify.Config, stderr io.Writer) error {
	fmt.Fprintf(stderr, "loading guest image %s from %s ...\n", p.archive.ID, o.imageArchive)
	lctx, cancel := context.WithTimeout(ctx, imageBuildTimeout)
	img, err := guest.Load(lctx, eng, p.archive, p.imageArch)
	cancel()
	if err != nil {
		return cli.Exitf(exitcode.Unavailable, "loading guest image failed\nqualify: %v", err)
	}
	state := "loaded"
	if !img.Created {
		state = "already on the Engine: it stays there"
	}
	fmt.Fprintf(stderr, "guest image %s %s\n", img.ID, state)
	cfg.ImageID, cfg.ImageSource = img.ID, "archive"
	cfg.ImageArchiveSHA256, cfg.ImageArchiveID = p.archive.SHA256, p.archive.ID
	switch {
	case !img.Created:
	case o.keepImage:
		fmt.Fprintf(stderr, "keeping image %s (remove it with: qualify image --remove %s)\n", img.ID, img.ID)
	default:
		cfg.RemoveImage = func(ctx context.Context) error { return guest.Remove(ctx, eng, img.ID) }
	}
	return nil
}

func (o *runOptions) buildImage(ctx context.Context, eng *client.Client, p *runPlan, cfg *qualify.Config, stderr io.Writer) error {
	// The image is built for the profile's image architecture (the
	// probe and busybox must be that architecture's executables).
	prof, err := profiles.Load(p.m.Profile)
	if err != nil {
		return failed(exitcode.Usage, err)
	}
	fmt.Fprintf(stderr, "building guest image (linux/%s) ...\n", prof.Image.Architecture)
	bctx, cancel := context.WithTimeout(ctx, imageBuildTimeout)
	img, err := guest.Build(bctx, eng, guest.BuildOptions{ProbeBinary: o.probe, Architecture: prof.Image.Architecture})
	cancel()
	if err != nil {
		return cli.Exitf(exitcode.Unavailable, "building guest image failed\nqualify: %v", err)
	}
	fmt.Fprintf(stderr, "built guest image %s (%s)\n", img.ID, img.Elapsed.Round(100*time.Millisecond))
	cfg.ImageID, cfg.ImageSource = img.ID, "build"
	if o.keepImage {
		fmt.Fprintf(stderr, "keeping image %s (remove it with: qualify image --remove %s)\n", img.ID, img.ID)
	} else {
		cfg.RemoveImage = func(ctx context.Context) error { return guest.Remove(ctx, eng, img.ID) }
	}
	return nil
}

// removeImage removes the image cfg.RemoveImage names, when the run did
// not get to (it could not start), printing a failure on stderr.
func removeImage(ctx context.Context, cfg qualify.Config, stderr io.Writer) {
	if cfg.RemoveImage == nil {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := cfg.RemoveImage(rctx); err != nil {
		fmt.Fprintf(stderr, "qualify: %v\n", err)
	}
}

// progressMode is what --progress (validated) means on stderr: a
// terminal check on the real stderr, TERM and CI from the environment.
func (o *runOptions) progressMode(stderr io.Writer) termprogress.Mode {
	mode, _ := termprogress.ParseMode(o.progress)
	return termprogress.Resolve(mode, stderr, os.Getenv, termprogress.IsTerminal)
}

// runAndRender runs the campaign of cfg and renders its Result (renderRun),
// returning qualify.ExitCode of it. With the tty progress mode the run's
// events go to a termprogress.Display on stderr instead of the plain
// lines; it is closed before anything else is printed.
func (o *runOptions) runAndRender(ctx context.Context, cfg qualify.Config, stdout, stderr io.Writer) int {
	var display *termprogress.Display
	if o.progressMode(stderr) == termprogress.TTY {
		display = termprogress.New(stderr, termprogress.Options{})
		cfg.Progress = display.Event
	}
	res, err := qualify.Run(ctx, cfg)
	if display != nil {
		// Run emitted RunFinished unless it failed before its campaign.
		display.Close()
	}
	return o.render(ctx, cfg, res, err, stdout, stderr)
}

// render prints the outcome of qualify.Run (res, err) and returns its
// exit status.
func (o *runOptions) render(ctx context.Context, cfg qualify.Config, res *qualify.Result, err error, stdout, stderr io.Writer) int {
	if err != nil {
		fmt.Fprintf(stderr, "qualify: %v\n", err)
		if res == nil {
			removeImage(ctx, cfg, stderr)
			if ctx.Err() != nil {
				return exitcode.Interrupted
			}
			return exitcode.Internal
		}
	} else if err = renderRun(stdout, stderr, res, o.asJSON); err != nil {
		fmt.Fprintf(stderr, "qualify: %v\n", err)
	}
	fmt.Fprintf(stderr, "report: %s\n", cfg.Output)
	if res.Image.RemoveError != "" {
		// A leaked image is a cleanup failure of the run: never exit 0.
		fmt.Fprintf(stderr, "qualify: removing image %s failed: %s\n", res.Image.ID, res.Image.RemoveError)
	}
	return qualify.ExitCode(res.Run, err)
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
