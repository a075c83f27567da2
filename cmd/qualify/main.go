// Command qualify runs qualbox qualification campaigns against a real
// Docker Engine and manages the guest image (DESIGN.md "Qualification").
//
// Usage:
//
//	qualify run --manifest FILE [--output DIR] [--signing-key FILE] [--json] [--keep-image] [--verbose]
//	qualify verify --key PUB [--json] DIR...
//	qualify merge --key PUB [--key PUB...] [--require a,b] [--manifest FILE...] [--markdown|--json] DIR...
//	qualify keygen --out DIR
//	qualify image [--endpoint unix:///var/run/docker.sock] [--probe BINARY] [--arch amd64|arm64] [--busybox FILE] [--remove ID]
//
// run executes the manifest's scenarios and writes evidence.json,
// summary.md, junit.xml and one directory per scenario into a fresh output
// directory (default reports/runs/<UTC timestamp>). When the manifest says
// "image: build" the guest image is built first and exactly that image is
// removed at the end, unless --keep-image.
//
// With --signing-key (an ed25519 PKCS#8 PEM from keygen) run signs the
// complete report: evidence.dsse.json is a DSSE envelope around an in-toto
// Statement whose subjects are every file's SHA-256. verify checks the
// signature, every subject, that no file was added and the evidence
// schemas, and names each failing file; merge verifies several reports and
// renders one matrix of scenarios by tuple, exiting 1 unless every
// --require scenario passed under every tuple.
//
// The internal subcommand `qualify controller-child` is the child
// controller process of the controller-death scenario, which starts it
// with flags derived from the manifest (endpoint, profile, image ID,
// namespace, user, policy, spill directory, record file, marker file,
// checkpoint) and kills it with SIGKILL at the checkpoint; it is not for
// interactive use and not in the usage text.
//
// Exit status: 0 when every scenario passed, was skipped or not
// applicable; 1 when one failed; 2 for usage and manifest errors; 3 when no
// Engine answers or the guest image cannot be built; 130 when interrupted
// by SIGINT or SIGTERM (the running scenario is cleaned up and the partial
// report written first).
package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/moby/moby/client"

	"github.com/qualbox/qualbox/qualify"
	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/manifest"
	"github.com/qualbox/qualbox/qualify/scenario"
	"github.com/qualbox/qualbox/testbed/guest"
)

// Exit statuses.
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitEngine      = 3
	exitInterrupted = 130
)

// defaultEndpoint is the Engine socket `image` uses without --endpoint.
const defaultEndpoint = "unix:///var/run/docker.sock"

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
		return exitUsage
	}
	switch args[0] {
	case "run":
		return runCmd(ctx, args[1:], stdout, stderr)
	case "image":
		return imageCmd(ctx, args[1:], stdout, stderr)
	case "verify":
		return verifyCmd(ctx, args[1:], stdout, stderr)
	case "merge":
		return mergeCmd(ctx, args[1:], stdout, stderr)
	case "keygen":
		return keygenCmd(args[1:], stdout, stderr)
	case scenario.ChildCommand:
		return childCmd(ctx, args[1:], stderr)
	case "-h", "--help", "help":
		usage(stdout)
		return exitOK
	}
	fmt.Fprintf(stderr, "qualify: unknown command %q: allowed run, verify, merge, keygen, image\n", args[0])
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage:
  qualify run --manifest FILE [--output DIR] [--signing-key FILE] [--probe BINARY] [--json] [--keep-image] [--verbose]
  qualify verify --key PUB [--json] DIR...
  qualify merge --key PUB [--key PUB...] [--require a,b] [--manifest FILE...] [--markdown|--json] DIR...
  qualify keygen --out DIR
  qualify image [--endpoint unix:///var/run/docker.sock] [--probe BINARY] [--arch amd64|arm64] [--busybox FILE] [--remove ID]
`)
}

func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("qualify run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	manifestPath := fs.String("manifest", "", "manifest `file` (YAML)")
	output := fs.String("output", "", "fresh output `directory` (default: the manifest's output, else reports/runs/<UTC timestamp>)")
	asJSON := fs.Bool("json", false, "print the run evidence as JSON on stdout instead of the table")
	keepImage := fs.Bool("keep-image", false, "keep the guest image built for `image: build`")
	verbose := fs.Bool("verbose", false, "print scenario detail lines on stderr")
	signingKey := fs.String("signing-key", "", "ed25519 private key `file` (PEM PKCS#8, from qualify keygen) to sign the report with")
	probe := fs.String("probe", "", "prebuilt static guest probe `binary` for `image: build` (default: compile it from this source tree)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *manifestPath == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "qualify run: --manifest FILE is required and no positional arguments are allowed")
		return exitUsage
	}
	reg := scenario.Default()
	m, err := manifest.Load(*manifestPath, reg)
	if err != nil {
		fmt.Fprintf(stderr, "qualify: %v\n", err)
		return exitUsage
	}
	var key ed25519.PrivateKey
	if *signingKey != "" {
		if key, err = attest.LoadPrivateKey(*signingKey); err != nil {
			fmt.Fprintf(stderr, "qualify: %v\n", err)
			return exitUsage
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
		return exitUsage
	}
	cli, err := connect(ctx, m.Endpoint)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitEngine
	}
	defer cli.Close()

	cfg := qualify.Config{
		Manifest: m, Registry: reg, Engine: cli, ImageID: m.Image, ImageSource: "manifest",
		Stdout: stdout, Stderr: stderr, JSON: *asJSON, Verbose: *verbose, SigningKey: key,
	}
	if m.Image == manifest.ImageBuild {
		fmt.Fprintf(stderr, "building guest image ...")
		img, err := guest.Build(ctx, cli, guest.BuildOptions{ProbeBinary: *probe})
		if err != nil {
			fmt.Fprintf(stderr, " failed\nqualify: %v\n", err)
			return exitEngine
		}
		fmt.Fprintf(stderr, " %s (%s)\n", img.ID, img.Elapsed.Round(100*time.Millisecond))
		cfg.ImageID, cfg.ImageSource = img.ID, "build"
		if *keepImage {
			fmt.Fprintf(stderr, "keeping image %s (remove it with: qualify image --remove %s)\n", img.ID, img.ID)
		} else {
			cfg.RemoveImage = func(ctx context.Context) error { return guest.Remove(ctx, cli, img.ID) }
		}
	}
	// The output directory is created only once the Engine answered and the
	// image exists, so an early failure leaves no empty report directory.
	if cfg.Output, err = qualify.PrepareOutput(out); err != nil {
		fmt.Fprintf(stderr, "qualify: %v\n", err)
		if cfg.RemoveImage != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			if rerr := cfg.RemoveImage(rctx); rerr != nil {
				fmt.Fprintf(stderr, "qualify: %v\n", rerr)
			}
			cancel()
		}
		return exitUsage
	}
	out = cfg.Output
	rep, err := qualify.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "qualify: %v\n", err)
		if rep == nil {
			if cfg.RemoveImage != nil {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
				if rerr := cfg.RemoveImage(rctx); rerr != nil {
					fmt.Fprintf(stderr, "qualify: %v\n", rerr)
				}
				cancel()
			}
			return exitUsage
		}
	}
	fmt.Fprintf(stderr, "report: %s\n", out)
	if rep.Image.RemoveError != "" {
		// A leaked image is a cleanup failure of the run: never exit 0.
		fmt.Fprintf(stderr, "qualify: removing image %s failed: %s\n", rep.Image.ID, rep.Image.RemoveError)
		return exitFailed
	}
	if code := qualify.ExitCode(rep); code != exitOK || err == nil {
		return code
	}
	return exitFailed
}

func imageCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("qualify image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	endpoint := fs.String("endpoint", defaultEndpoint, "Engine `socket`")
	remove := fs.String("remove", "", "remove exactly the image `ID` (sha256:<64 hex>) instead of building")
	probe := fs.String("probe", "", "prebuilt static guest probe `binary` (default: compile it from this source tree)")
	arch := fs.String("arch", "amd64", "guest image `architecture`, amd64 or arm64 (arm64 for the native Apple Silicon Desktop profile)")
	busybox := fs.String("busybox", guest.DefaultBusybox, "static Linux busybox `binary` of --arch (Debian's busybox-static)")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return exitUsage
	}
	cli, err := connect(ctx, *endpoint)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitEngine
	}
	defer cli.Close()
	if *remove != "" {
		if err := guest.Remove(ctx, cli, *remove); err != nil {
			fmt.Fprintf(stderr, "qualify: %v\n", err)
			return exitFailed
		}
		fmt.Fprintf(stdout, "removed %s\n", *remove)
		return exitOK
	}
	img, err := guest.Build(ctx, cli, guest.BuildOptions{ProbeBinary: *probe, Architecture: *arch, Busybox: *busybox})
	if err != nil {
		fmt.Fprintf(stderr, "qualify: %v\n", err)
		return exitFailed
	}
	fmt.Fprintln(stdout, img.ID)
	return exitOK
}

// connect returns a client of the Engine at endpoint after a successful
// ping. When nothing answers, the error is one line naming the socket and
// how to start an Engine.
func connect(ctx context.Context, endpoint string) (*client.Client, error) {
	cli, err := client.New(client.WithHost(endpoint), client.WithUserAgent("qualbox-qualify"))
	if err != nil {
		return nil, fmt.Errorf("qualify: engine endpoint %s: %v", endpoint, err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		cli.Close()
		cause := err.Error()
		var opErr interface{ Unwrap() error }
		if errors.As(err, &opErr) && opErr.Unwrap() != nil {
			cause = opErr.Unwrap().Error()
		}
		return nil, fmt.Errorf("qualify: no Docker Engine answers at %s (%s); start one with `make engine` or `dockerd --host %s`", endpoint, oneLine(cause), endpoint)
	}
	return cli, nil
}

func oneLine(s string) string {
	for i, r := range s {
		if r == '\n' || r == '\r' {
			return s[:i]
		}
	}
	return s
}
