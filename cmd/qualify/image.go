package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"

	"github.com/qualbox/qualbox/internal/cli"
	"github.com/qualbox/qualbox/internal/exitcode"
	"github.com/qualbox/qualbox/qualify/guest"
	"github.com/qualbox/qualbox/qualify/manifest"
)

// defaultEndpoint is the Engine socket `image` uses without --endpoint.
const defaultEndpoint = "unix:///var/run/docker.sock"

// imageCommand is qualify image's help and flag set; its options are
// imageOptions.
func imageCommand() *cli.Command {
	c := cli.New("qualify image", "[--endpoint URL] [--probe BINARY] [--arch ARCH] [--busybox FILE] [--remove ID]",
		"Build the guest image and print its ID, or remove exactly the image --remove names.")
	c.Details = `The guest image is assembled locally from a static probe binary; no
registry is used. --remove deletes only that image ID, never by name or
label. The Engine is the one --endpoint names: DOCKER_HOST and docker
contexts are ignored on purpose.`
	return c
}

// imageOptions are the flags of qualify image; it takes no positional
// arguments.
type imageOptions struct {
	cli.Positional
	endpoint, remove, probe, arch, busybox string
}

// AddFlags declares o's flags on fs.
func (o *imageOptions) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.endpoint, "endpoint", defaultEndpoint, cli.EndpointNote)
	fs.StringVar(&o.remove, "remove", "", "remove exactly the image `ID` (sha256:<64 hex>) instead of building")
	fs.StringVar(&o.probe, "probe", "", "prebuilt static guest probe `BINARY` (default: compile it from this source tree)")
	fs.StringVar(&o.arch, "arch", "amd64", "guest image `ARCH`, amd64 or arm64 (arm64 for the native Apple Silicon Desktop profile)")
	fs.StringVar(&o.busybox, "busybox", guest.DefaultBusybox, "static Linux busybox `FILE` of --arch (Debian's busybox-static)")
}

// Validate checks every flag before the Engine is contacted: the
// endpoint; with --remove an exact image ID; else the architecture and
// that --probe (when given) and --busybox are regular files.
func (o *imageOptions) Validate() error {
	if len(o.Args) > 0 {
		return cli.UsageError("no positional arguments are allowed")
	}
	if err := manifest.CheckEndpoint(o.endpoint); err != nil {
		return cli.UsageError("--endpoint " + err.Error())
	}
	switch {
	case o.remove != "":
		if !imageIDPattern.MatchString(o.remove) {
			return cli.UsageError(fmt.Sprintf("--remove %q: want an exact image ID, sha256:<64 lowercase hex>", o.remove))
		}
	case o.arch != "amd64" && o.arch != "arm64":
		return cli.UsageError(fmt.Sprintf("--arch %q: want amd64 or arm64", o.arch))
	default:
		return o.validateBuildFiles()
	}
	return nil
}

// validateBuildFiles checks the files a build reads.
func (o *imageOptions) validateBuildFiles() error {
	if o.probe != "" {
		if err := checkRegularFile(o.probe); err != nil {
			return cli.UsageError("--probe " + err.Error())
		}
	}
	if err := checkRegularFile(o.busybox); err != nil {
		return cli.UsageError("--busybox " + err.Error() + "; install Debian's static busybox (apt-get install busybox-static)")
	}
	return nil
}

// Exec connects to the Engine (exitcode.Unavailable when none answers),
// then removes the --remove image (exitcode.Failed when that fails) or
// builds the guest image and prints its ID (exitcode.Unavailable when
// the build fails).
func (o *imageOptions) Exec(ctx context.Context, stdout, _ io.Writer) (int, error) {
	eng, err := connect(ctx, o.endpoint, "")
	if err != nil {
		return 0, cli.Exitf(exitcode.Unavailable, "%v", err)
	}
	defer eng.Close()
	if o.remove != "" {
		if err := guest.Remove(ctx, eng, o.remove); err != nil {
			return 0, failed(exitcode.Failed, err)
		}
		fmt.Fprintf(stdout, "removed %s\n", o.remove)
		return exitcode.OK, nil
	}
	img, err := guest.Build(ctx, eng, guest.BuildOptions{ProbeBinary: o.probe, Architecture: o.arch, Busybox: o.busybox})
	if err != nil {
		return 0, failed(exitcode.Unavailable, err)
	}
	fmt.Fprintln(stdout, img.ID)
	return exitcode.OK, nil
}

// imageIDPattern is an exact image ID, as guest.Remove accepts it.
var imageIDPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

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
