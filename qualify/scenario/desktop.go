package scenario

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strings"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/profiles"
	"github.com/qualbox/qualbox/qualify/syntheticengine"
)

// DesktopAdmission runs the admission of both Apple Silicon Desktop
// profiles (docs/lanes.md#desktop-synthetic) against a synthetic Engine on
// a Unix socket: the recorded Docker Desktop daemon must be admitted and
// every negative shape (rootless, userns, each missing controller flag,
// another daemon or image architecture, the systemd cgroup driver,
// AppArmor, cgroup v1, no builtin seccomp, no cgroupns, not Docker
// Desktop, API below 1.52, MinAPIVersion above it, no image) refused with
// its exact error. The controller is played as darwin/arm64
// (driver.Backend.AdmitAs); on any other controller the unplayed Desktop
// admission must be refused before the synthetic Engine sees a request.
//
// No Docker Desktop runs: the evidence says "synthetic: no Docker Desktop
// ran", and what only a Mac shows (Apple Virtualization, Rosetta, arm64
// guest code) stays for the Mac handoff in README.md. The scenario needs
// no real Engine and runs on any Linux host.
type DesktopAdmission struct{}

// Name returns "desktop-admission".
func (DesktopAdmission) Name() string { return "desktop-admission" }

// Validate accepts no params.
func (DesktopAdmission) Validate(params map[string]any) error { return noParams(params) }

// desktopCase is one profile on one synthetic shape with its exact
// expected admission error ("" when admitted).
type desktopCase struct {
	profile string
	variant string
	image   string
	want    string
}

const (
	nativeArm64  = "desktop-apple-virtualization-native-arm64"
	rosettaAmd64 = "desktop-apple-virtualization-rosetta-amd64"
)

// desktopRejections maps a variant to the exact failed rows after
// "driver: Engine does not match profile <name>: ". The rows are the same
// for both profiles: they share the daemon and differ in image only.
var desktopRejections = map[string]string{
	"desktop":               "",
	"rootless":              `rootless/userns: want none in SecurityOptions, got ["name=rootless"]`,
	"userns":                `rootless/userns: want none in SecurityOptions, got ["name=userns"]`,
	"no-memory-limit":       `/info MemoryLimit: want true, got false`,
	"no-swap-limit":         `/info SwapLimit: want true, got false`,
	"no-pids-limit":         `/info PidsLimit: want true, got false`,
	"no-cpu-cfs-period":     `/info CpuCfsPeriod: want true, got false`,
	"no-cpu-cfs-quota":      `/info CpuCfsQuota: want true, got false`,
	"amd64-daemon":          `/version Arch: want "arm64", got "amd64"; /info Architecture: want one of arm64, aarch64, got "x86_64"`,
	"systemd-cgroup-driver": `/info CgroupDriver: want "cgroupfs", got "systemd"`,
	"apparmor":              `AppArmor: want absent, got name=apparmor present`,
	"cgroup-v1":             `/info CgroupVersion: want "2", got "1"`,
	"no-builtin-seccomp":    `seccomp: want one of name=seccomp,profile=builtin, got ["name=seccomp,profile=unconfined" "name=cgroupns"]`,
	"no-cgroupns":           `cgroupns: want name=cgroupns in SecurityOptions, got ["name=seccomp,profile=builtin"]`,
	"not-desktop":           `/info OperatingSystem: want "Docker Desktop", got "Ubuntu 24.04.3 LTS"`,
	"api-1.51":              `API version range: want MinAPIVersion <= 1.52 <= ApiVersion, got 1.44..1.51`,
	"min-api-1.53":          `API version range: want MinAPIVersion <= 1.52 <= ApiVersion, got 1.53..1.52`,
	"no-images":             `image: want exact local image %s, got absent`,
}

// desktopCases is the whole matrix: both profiles on every shape, plus each
// profile with the other profile's image architecture.
func desktopCases() []desktopCase {
	var out []desktopCase
	for _, p := range []struct{ name, image, arch, wrong, wrongArch string }{
		{nativeArm64, syntheticengine.ImageArm64, "arm64", syntheticengine.ImageAmd64, "amd64"},
		{rosettaAmd64, syntheticengine.ImageAmd64, "amd64", syntheticengine.ImageArm64, "arm64"},
	} {
		for _, v := range syntheticengine.Variants() {
			rows := desktopRejections[v.Name]
			if strings.Contains(rows, "%s") {
				rows = fmt.Sprintf(rows, p.image)
			}
			want := ""
			if rows != "" {
				want = "driver: Engine does not match profile " + p.name + ": " + rows
			}
			out = append(out, desktopCase{profile: p.name, variant: v.Name, image: p.image, want: want})
		}
		out = append(out, desktopCase{profile: p.name, variant: "desktop", image: p.wrong,
			want: fmt.Sprintf(`driver: Engine does not match profile %s: image Architecture: want %q, got %q`, p.name, p.arch, p.wrongArch)})
	}
	return out
}

// admissionReads are the only requests admission may send.
var admissionReads = regexp.MustCompile(`^(GET|HEAD) (/v\d+\.\d+)?(/_ping|/version|/info|/images/sha256:[0-9a-f]{64}/json)$`)

var appleSilicon = profiles.Platform{OS: "darwin", Architecture: "arm64"}

// Run admits every case against its own synthetic Engine.
func (s DesktopAdmission) Run(ctx context.Context, env *Env, params map[string]any, rec *Record) error {
	rec.Observe("synthetic", syntheticengine.Marker)
	rec.Request("controller played", appleSilicon.OS+"/"+appleSilicon.Architecture)
	// A short directory: the socket path must fit a sockaddr_un.
	dir, err := os.MkdirTemp("", "qb-desktop-")
	if err != nil {
		return err
	}
	defer func() { rec.CleanupError("remove "+dir, os.RemoveAll(dir)) }()
	shapes := map[string]syntheticengine.Shape{}
	for _, v := range syntheticengine.Variants() {
		shapes[v.Name] = v.Shape()
	}
	rec.Observe("shapes", shapes)
	srv, err := syntheticengine.Start(dir, syntheticengine.Desktop())
	if err != nil {
		return err
	}
	defer func() { rec.CleanupError("stop synthetic Engine", srv.Close()) }()

	var stray []string
	for _, c := range desktopCases() {
		srv.SetShape(shapes[c.variant])
		srv.ResetRequests()
		got, adm, err := desktopAdmit(ctx, env, srv, c.profile, c.image, true)
		if err != nil {
			return err
		}
		label := strings.TrimPrefix(c.profile, "desktop-apple-virtualization-") + " on " + c.variant
		if c.image != map[string]string{nativeArm64: syntheticengine.ImageArm64, rosettaAmd64: syntheticengine.ImageAmd64}[c.profile] {
			label += " with the other architecture's image"
		}
		want := c.want
		if want == "" {
			want = "admitted"
		}
		rec.Check("synthetic: "+label, want, got, got == want)
		if c.variant == "desktop" && c.want == "" && adm != nil {
			rec.Observe("admission: "+c.profile, adm)
		}
		for _, r := range srv.Requests() {
			if !admissionReads.MatchString(r) {
				stray = append(stray, r)
			}
		}
	}
	rec.Check("synthetic: no Docker Desktop ran; the synthetic Engine saw admission reads only", "GET /_ping, /version, /info, /images/<id>/json", stray, len(stray) == 0)

	// Unplayed: this controller's own platform.
	host := runtime.GOOS + "/" + runtime.GOARCH
	if host == appleSilicon.OS+"/"+appleSilicon.Architecture {
		rec.Observe("controller gate", "not exercised: this controller is darwin/arm64, where the Desktop profiles are admissible")
		return nil
	}
	for _, profile := range []string{nativeArm64, rosettaAmd64} {
		srv.SetShape(shapes["desktop"])
		srv.ResetRequests()
		got, _, err := desktopAdmit(ctx, env, srv, profile, syntheticengine.ImageArm64, false)
		if err != nil {
			return err
		}
		want := fmt.Sprintf("driver: Engine does not match profile %s: controller: want darwin/arm64, got %s", profile, host)
		rec.Check(fmt.Sprintf("%s on this %s controller is refused before any Engine request", profile, host), want+" (0 requests)",
			fmt.Sprintf("%s (%d requests)", got, len(srv.Requests())), got == want && len(srv.Requests()) == 0)
	}
	return nil
}

// desktopAdmit admits profile with workload image on srv, as darwin/arm64
// when played, and returns the error text ("admitted" when none). A
// non-admission error (the synthetic Engine did not answer) is returned.
func desktopAdmit(ctx context.Context, env *Env, srv *syntheticengine.Server, profile, image string, played bool) (string, *driver.Admission, error) {
	b, err := driver.New(driver.Config{
		Profile: profile, Endpoint: srv.Endpoint(), Namespace: env.Namespace,
		SpillDirectory: env.Dir, ImageID: image, User: env.User,
	})
	if err != nil {
		return "", nil, err
	}
	defer b.Close()
	var adm *driver.Admission
	if played {
		adm, err = b.AdmitAs(ctx, appleSilicon)
	} else {
		adm, err = b.Admit(ctx)
	}
	if adm == nil && err != nil {
		return "", nil, fmt.Errorf("admit %s on the synthetic Engine: %w", profile, err)
	}
	if err != nil {
		return err.Error(), adm, nil
	}
	return "admitted", adm, nil
}
