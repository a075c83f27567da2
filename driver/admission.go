package driver

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/api/types/system"
	"github.com/moby/moby/client"

	"github.com/qualbox/qualbox/profiles"
	"github.com/qualbox/qualbox/sandboxapi"
)

// Check is one admission comparison: what the profile requires (Want) and
// what the controller, Engine or image reported (Got).
type Check struct {
	Name string `json:"name"`
	Want string `json:"want"`
	Got  string `json:"got"`
	OK   bool   `json:"ok"`
}

// EngineFacts is what admission read from the Engine: the tuple a
// qualification report records.
type EngineFacts struct {
	DaemonID      string `json:"daemonId"`
	Version       string `json:"version"`
	APIVersion    string `json:"apiVersion"`
	MinAPIVersion string `json:"minApiVersion"`
	// ClientAPIVersion is the API version the driver pinned its client to
	// and used for every request of this admission.
	ClientAPIVersion string `json:"clientApiVersion"`
	GitCommit        string `json:"gitCommit"`
	// GoVersion is the Go release the Engine was built with, from the
	// Engine component's GoVersion detail ("go1.26.8"; "" when absent).
	GoVersion        string      `json:"goVersion,omitempty"`
	Os               string      `json:"os"`
	Arch             string      `json:"arch"`
	KernelVersion    string      `json:"kernelVersion"`
	OperatingSystem  string      `json:"operatingSystem"`
	OSType           string      `json:"osType"`
	Architecture     string      `json:"architecture"`
	CgroupVersion    string      `json:"cgroupVersion"`
	CgroupDriver     string      `json:"cgroupDriver"`
	SecurityOptions  []string    `json:"securityOptions"`
	StorageDriver    string      `json:"storageDriver"`
	DriverStatus     [][2]string `json:"driverStatus"`
	ContainerdCommit string      `json:"containerdCommit"`
	RuncCommit       string      `json:"runcCommit"`
	// DefaultRuntime is /info DefaultRuntime ("runc"); Runtimes are /info
	// Runtimes as "name=path" (the shim type for a shim v2 runtime without
	// a path), sorted. Both are empty in reports made before they were
	// recorded.
	DefaultRuntime string   `json:"defaultRuntime,omitempty"`
	Runtimes       []string `json:"runtimes,omitempty"`
	Components     []string `json:"components"`
	Warnings       []string `json:"warnings"`
}

// ImageFacts is what admission read from the workload image.
type ImageFacts struct {
	ID           string   `json:"id"`
	Os           string   `json:"os"`
	Architecture string   `json:"architecture"`
	Env          []string `json:"env"`
	Volumes      []string `json:"volumes"`
}

// Admission is the outcome of admitting a profile against a real Engine
// (docs/contract.md#profiles-and-admission): every check made, and the facts
// behind them.
type Admission struct {
	Profile string `json:"profile"`
	// Controller is the controller platform admission checked, "linux/amd64";
	// a platform played for a synthetic Engine (Backend.AdmitAs) reads
	// "darwin/arm64 (played by linux/amd64 for a synthetic Engine)".
	Controller string      `json:"controller"`
	Checks     []Check     `json:"checks"`
	Engine     EngineFacts `json:"engine"`
	Image      ImageFacts  `json:"image"`
}

// Failed returns the checks that did not pass.
func (a *Admission) Failed() []Check {
	var out []Check
	for _, c := range a.Checks {
		if !c.OK {
			out = append(out, c)
		}
	}
	return out
}

// AdmissionError reports a rejected admission. It unwraps to
// *sandboxapi.UnsupportedError; Failed lists every failed check, not only the
// first.
type AdmissionError struct {
	Profile string
	Failed  []Check
}

func (e *AdmissionError) Error() string {
	parts := make([]string, 0, len(e.Failed))
	for _, c := range e.Failed {
		parts = append(parts, fmt.Sprintf("%s: want %s, got %s", c.Name, c.Want, c.Got))
	}
	return fmt.Sprintf("driver: Engine does not match profile %s: %s", e.Profile, strings.Join(parts, "; "))
}

func (e *AdmissionError) Unwrap() error {
	return &sandboxapi.UnsupportedError{Message: "Engine does not match profile " + e.Profile}
}

// securityOptionName returns the name field of one /info SecurityOptions
// entry: "apparmor" for both "name=apparmor" (Engine 29.1.3) and
// "name=apparmor,profile=default" (Moby v2 builds, docs/lanes.md lane C).
// An entry without a name field returns "".
func securityOptionName(opt string) string {
	for _, kv := range strings.Split(opt, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok && k == "name" {
			return v
		}
	}
	return ""
}

// apiVersion parses "1.41" into 1041; ok is false for anything else.
func apiVersion(v string) (int, bool) {
	m := regexp.MustCompile(`^(\d+)\.(\d+)$`).FindStringSubmatch(v)
	if m == nil {
		return 0, false
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	return major*1000 + minor, true
}

// engineVersion parses a stable "X.Y.Z" Engine version; ok is false for
// anything else (pre-releases and "library-import" builds included).
func engineVersion(v string) ([3]int, bool) {
	m := regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$`).FindStringSubmatch(v)
	if m == nil {
		return [3]int{}, false
	}
	var out [3]int
	for i := range out {
		out[i], _ = strconv.Atoi(m[i+1])
	}
	return out, true
}

func versionAtLeast(got, min [3]int) bool {
	for i := range got {
		if got[i] != min[i] {
			return got[i] > min[i]
		}
	}
	return true
}

// admissionFacts is everything one admission compares: the profile and
// configuration on one side, the controller, /version, /info and image
// inspects on the other. Rules read it and nothing else.
type admissionFacts struct {
	// controller is the platform admission checks the profile against:
	// this process's, or the one a synthetic-Engine test plays (AdmitAs).
	controller controllerPlatform
	prof       profiles.Profile
	cfg        *Config
	ver        client.ServerVersionResult
	info       system.Info
	// image is the workload image inspect; nil when the image is absent.
	image *image.InspectResponse
	// datasets holds one inspect per cfg.Datasets entry, in order; nil
	// entries are absent images.
	datasets []*image.InspectResponse
}

// admissionRule is one row of the admission table: a check's name, when it
// applies (nil: always) and how to compute want, got and ok from the facts.
// The evidence (Admission.Checks) and the error text (AdmissionError) both
// read the rows' results, so they cannot disagree
// (docs/contract.md#profiles-and-admission).
type admissionRule struct {
	name    string
	applies func(f *admissionFacts) bool
	check   func(f *admissionFacts) (want, got string, ok bool)
	// unrecorded marks a row that reads a fact EngineFacts does not keep
	// (the controller, the /info limit capabilities): CheckEngineFacts
	// cannot re-evaluate it from a report.
	unrecorded bool
}

// datasetRule is a row evaluated once per configured dataset; its check
// name is "dataset <name>" plus the row's suffix.
type datasetRule struct {
	suffix string
	check  func(f *admissionFacts, ds Dataset, img *image.InspectResponse) (want, got string, ok bool)
}

// equal is a rule result comparing two strings exactly, both quoted.
func equal(want, got string) (string, string, bool) {
	return strconv.Quote(want), strconv.Quote(got), want == got
}

// flag is a rule result requiring a capability reported true.
func flag(got bool) (string, string, bool) {
	return "true", strconv.FormatBool(got), got
}

func withDatasets(f *admissionFacts) bool { return len(f.cfg.Datasets) > 0 }

// userns lists the SecurityOptions entries naming rootless mode or a user
// namespace remap.
func userns(sec []string) []string {
	var out []string
	for _, o := range sec {
		if strings.Contains(strings.ToLower(o), "rootless") || strings.Contains(strings.ToLower(o), "userns") {
			out = append(out, o)
		}
	}
	return out
}

// driverTypes lists the "driver-type" values of /info DriverStatus.
func driverTypes(info system.Info) []string {
	var out []string
	for _, kv := range info.DriverStatus {
		if kv[0] == "driver-type" {
			out = append(out, kv[1])
		}
	}
	return out
}

// desktopOperatingSystem reports whether an /info OperatingSystem is one
// Docker Desktop reports: "Docker Desktop" or that name followed by its
// release ("Docker Desktop 4.56.0"), in any letter case. A Linux profile
// cannot be such a daemon: its VM, kernel and file sharing are Desktop's
// (docs/contract.md#profiles-and-admission).
func desktopOperatingSystem(os string) bool {
	return strings.HasPrefix(strings.ToLower(strings.TrimSpace(os)), strings.ToLower(profiles.DesktopOperatingSystem))
}

// daemonRules are the controller, /version and /info rows, in report order.
var daemonRules = []admissionRule{
	{name: "controller", check: controllerCheck, unrecorded: true},
	{name: "daemon ID", check: func(f *admissionFacts) (string, string, bool) {
		id := f.info.ID
		// Any Unicode white space, not only ASCII: the ID is recorded and
		// compared as one opaque token (docs/contract.md#recovery).
		return "non-empty identity without whitespace or separators", strconv.Quote(id),
			id != "" && len(id) <= 256 && !strings.ContainsFunc(id, unicode.IsSpace) && !strings.ContainsAny(id, "/\\")
	}},
	{name: "/version Os", check: func(f *admissionFacts) (string, string, bool) { return equal("linux", f.ver.Os) }},
	{name: "/version Arch", check: func(f *admissionFacts) (string, string, bool) {
		return equal(f.prof.Daemon.Architecture, f.ver.Arch)
	}},
	{name: "/info OSType", check: func(f *admissionFacts) (string, string, bool) { return equal("linux", f.info.OSType) }},
	{name: "/info Architecture", check: func(f *admissionFacts) (string, string, bool) {
		want := f.prof.Daemon.InfoArchitectures
		return "one of " + strings.Join(want, ", "), strconv.Quote(f.info.Architecture), slices.Contains(want, f.info.Architecture)
	}},
	{name: "API version range", check: func(f *admissionFacts) (string, string, bool) {
		min, _ := apiVersion(f.prof.Daemon.MinAPIVersion)
		got, gotOK := apiVersion(f.ver.APIVersion)
		floor, floorOK := apiVersion(f.ver.MinAPIVersion)
		return fmt.Sprintf("MinAPIVersion <= %s <= ApiVersion", f.prof.Daemon.MinAPIVersion),
			fmt.Sprintf("%s..%s", f.ver.MinAPIVersion, f.ver.APIVersion), gotOK && floorOK && floor <= min && got >= min
	}},
	{name: "/info OperatingSystem", check: func(f *admissionFacts) (string, string, bool) {
		if f.prof.Daemon.Desktop {
			return equal(profiles.DesktopOperatingSystem, f.info.OperatingSystem)
		}
		return fmt.Sprintf("not Docker Desktop (%q, %q)", profiles.DesktopOperatingSystem, profiles.DesktopOperatingSystem+" <version>"),
			strconv.Quote(f.info.OperatingSystem), !desktopOperatingSystem(f.info.OperatingSystem)
	}},
	{name: "/info KernelVersion", applies: func(f *admissionFacts) bool { return !f.prof.Daemon.Desktop },
		check: func(f *admissionFacts) (string, string, bool) {
			return "not a Docker Desktop VM kernel (no \"linuxkit\")", strconv.Quote(f.info.KernelVersion),
				!strings.Contains(strings.ToLower(f.info.KernelVersion), "linuxkit")
		}},
	{name: "/info CgroupVersion", check: func(f *admissionFacts) (string, string, bool) {
		return equal(strconv.Itoa(f.prof.Cgroup.Version), f.info.CgroupVersion)
	}},
	{name: "/info CgroupDriver", check: func(f *admissionFacts) (string, string, bool) {
		return equal(f.prof.Cgroup.Driver, f.info.CgroupDriver)
	}},
	{name: "/info MemoryLimit", check: func(f *admissionFacts) (string, string, bool) { return flag(f.info.MemoryLimit) }, unrecorded: true},
	{name: "/info SwapLimit", check: func(f *admissionFacts) (string, string, bool) { return flag(f.info.SwapLimit) }, unrecorded: true},
	{name: "/info PidsLimit", check: func(f *admissionFacts) (string, string, bool) { return flag(f.info.PidsLimit) }, unrecorded: true},
	{name: "/info CpuCfsPeriod", check: func(f *admissionFacts) (string, string, bool) { return flag(f.info.CPUCfsPeriod) }, unrecorded: true},
	{name: "/info CpuCfsQuota", check: func(f *admissionFacts) (string, string, bool) { return flag(f.info.CPUCfsQuota) }, unrecorded: true},
	{name: "rootless/userns", check: func(f *admissionFacts) (string, string, bool) {
		found := userns(f.info.SecurityOptions)
		return "none in SecurityOptions", fmt.Sprintf("%q", found), len(found) == 0
	}},
	{name: "AppArmor", check: func(f *admissionFacts) (string, string, bool) {
		present := slices.ContainsFunc(f.info.SecurityOptions, func(o string) bool { return securityOptionName(o) == "apparmor" })
		got := "name=apparmor absent"
		if present {
			got = "name=apparmor present"
		}
		return f.prof.AppArmor.Daemon, got, present == (f.prof.AppArmor.Daemon == profiles.AppArmorEnabled)
	}},
	{name: "seccomp", check: func(f *admissionFacts) (string, string, bool) {
		want := f.prof.Seccomp.SecurityOptions
		ok := slices.ContainsFunc(want, func(w string) bool { return slices.Contains(f.info.SecurityOptions, w) })
		return "one of " + strings.Join(want, " | "), fmt.Sprintf("%q", f.info.SecurityOptions), ok
	}},
	{name: "cgroupns", applies: func(f *admissionFacts) bool { return f.prof.Cgroup.Namespace.SecurityOption },
		check: func(f *admissionFacts) (string, string, bool) {
			return "name=cgroupns in SecurityOptions", fmt.Sprintf("%q", f.info.SecurityOptions), slices.Contains(f.info.SecurityOptions, "name=cgroupns")
		}},
	{name: "datasets: storage driver", applies: withDatasets, check: func(f *admissionFacts) (string, string, bool) {
		return equal(f.prof.Datasets.StorageDriver, f.info.Driver)
	}},
	{name: "datasets: image store", applies: withDatasets, check: func(f *admissionFacts) (string, string, bool) {
		types := driverTypes(f.info)
		return f.prof.Datasets.DriverType, fmt.Sprintf("%q", types), len(types) == 1 && types[0] == f.prof.Datasets.DriverType
	}},
	{name: "datasets: Engine identity", applies: withDatasets, check: func(f *admissionFacts) (string, string, bool) {
		return datasetEngineIdentity(f.prof, f.ver)
	}},
	{name: "datasets: API version", applies: withDatasets, check: func(f *admissionFacts) (string, string, bool) {
		got, gotOK := apiVersion(f.ver.APIVersion)
		min, _ := apiVersion(f.prof.Datasets.MinAPIVersion)
		return ">= " + f.prof.Datasets.MinAPIVersion, f.ver.APIVersion, gotOK && got >= min
	}},
}

// CheckEngineFacts re-evaluates, over Engine facts a report recorded
// (EngineFacts, as admission read them from /version and /info), every
// daemon row of the admission table that those facts determine, for
// profile prof without datasets, and returns the results in report order
// (docs/qualification.md#evidence). The rows are the admission's own, so a
// verifier and admission cannot disagree on what a profile requires. Rows
// reading facts EngineFacts does not keep are left out: the controller
// (see CheckController) and the /info MemoryLimit, SwapLimit, PidsLimit,
// CpuCfsPeriod and CpuCfsQuota capabilities. It is pure: no Engine
// request.
func CheckEngineFacts(prof profiles.Profile, facts EngineFacts) []Check {
	f := &admissionFacts{prof: prof, cfg: &Config{},
		ver: client.ServerVersionResult{Version: facts.Version, APIVersion: facts.APIVersion, MinAPIVersion: facts.MinAPIVersion,
			Os: facts.Os, Arch: facts.Arch},
		info: system.Info{ID: facts.DaemonID, KernelVersion: facts.KernelVersion, OperatingSystem: facts.OperatingSystem,
			OSType: facts.OSType, Architecture: facts.Architecture, CgroupVersion: facts.CgroupVersion,
			CgroupDriver: facts.CgroupDriver, SecurityOptions: facts.SecurityOptions, Driver: facts.StorageDriver,
			DriverStatus: facts.DriverStatus},
	}
	var out []Check
	for _, r := range daemonRules {
		if r.unrecorded || (r.applies != nil && !r.applies(f)) {
			continue
		}
		want, got, ok := r.check(f)
		out = append(out, Check{Name: r.name, Want: want, Got: got, OK: ok})
	}
	return out
}

// CheckController is the admission table's controller row for a
// controller platform a report recorded (GOOS os, GOARCH arch) against
// profile prof.
func CheckController(prof profiles.Profile, os, arch string) Check {
	f := &admissionFacts{prof: prof, controller: controllerPlatform{Platform: profiles.Platform{OS: os, Architecture: arch}}}
	want, got, ok := controllerCheck(f)
	return Check{Name: "controller", Want: want, Got: got, OK: ok}
}

// imageRules are the workload image rows; they run only when the image
// exists (an absent image is one failed "image" row).
var imageRules = []admissionRule{
	{name: "image Id", check: func(f *admissionFacts) (string, string, bool) { return equal(f.cfg.ImageID, f.image.ID) }},
	{name: "image Os", check: func(f *admissionFacts) (string, string, bool) { return equal("linux", f.image.Os) }},
	{name: "image Architecture", check: func(f *admissionFacts) (string, string, bool) {
		return equal(f.prof.Image.Architecture, f.image.Architecture)
	}},
	{name: "image Volumes", check: func(f *admissionFacts) (string, string, bool) {
		vols := imageVolumes(f.image)
		return "none declared", fmt.Sprintf("%q", vols), len(vols) == 0
	}},
	{name: "image Env", check: func(f *admissionFacts) (string, string, bool) {
		env := imageEnv(f.image)
		fixed := fixedEnvironmentMap()
		ok := !slices.ContainsFunc(env, func(kv string) bool {
			k, v, _ := strings.Cut(kv, "=")
			want, known := fixed[k]
			return !known || want != v
		})
		return "subset of " + strings.Join(FixedEnvironment, " "), fmt.Sprintf("%q", env), ok
	}},
}

// datasetRules are the rows of each present dataset image.
var datasetRules = []datasetRule{
	{check: func(_ *admissionFacts, ds Dataset, img *image.InspectResponse) (string, string, bool) {
		return "exact Linux layers image " + ds.ImageID, fmt.Sprintf("%s %s %s", img.ID, img.Os, img.RootFS.Type),
			img.ID == ds.ImageID && img.Os == "linux" && img.RootFS.Type == "layers"
	}},
}

func imageVolumes(img *image.InspectResponse) []string {
	if img.Config == nil {
		return nil
	}
	var out []string
	for v := range img.Config.Volumes {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

func imageEnv(img *image.InspectResponse) []string {
	if img.Config == nil {
		return nil
	}
	return img.Config.Env
}

// evaluate runs the table over f: daemon rows, then (withImages) the
// workload image and dataset rows, and returns every result in order.
func (f *admissionFacts) evaluate(withImages bool) []Check {
	var out []Check
	run := func(rules []admissionRule) {
		for _, r := range rules {
			if r.applies != nil && !r.applies(f) {
				continue
			}
			want, got, ok := r.check(f)
			out = append(out, Check{Name: r.name, Want: want, Got: got, OK: ok})
		}
	}
	run(daemonRules)
	if !withImages {
		return out
	}
	if f.image == nil {
		out = append(out, Check{Name: "image", Want: "exact local image " + f.cfg.ImageID, Got: "absent"})
	} else {
		run(imageRules)
	}
	for i, ds := range f.cfg.Datasets {
		name := "dataset " + ds.Name
		img := f.datasets[i]
		if img == nil {
			out = append(out, Check{Name: name, Want: "exact local image " + ds.ImageID, Got: "absent"})
			continue
		}
		for _, r := range datasetRules {
			want, got, ok := r.check(f, ds, img)
			out = append(out, Check{Name: name + r.suffix, Want: want, Got: got, OK: ok})
		}
	}
	return out
}

// maxAdmissionReads bounds how many of admission's image inspects (one per
// image) are in flight at once: with up to MaxDatasets
// dataset images, dispatching them all together would open dozens of
// connections per sandbox start.
const maxAdmissionReads = 4

// admit reads the facts admission needs from the Engine (/version, /info
// and, with withImages, the workload and dataset image inspects), evaluates
// the admission table over them and returns the Admission (always, when the
// Engine answered) and an *AdmissionError when any row failed. Engine and
// transport failures are *sandboxapi.OperationError.
//
// The controller row runs first and alone: a profile for another controller
// platform is rejected before any Engine request
// (docs/contract.md#profiles-and-admission). Then the steps: the reads
// (readAdmission), their outcome kept in f (apply), the table evaluated
// (admission).
func admit(ctx context.Context, eng *engine, controller controllerPlatform, prof profiles.Profile, cfg *Config, withImages bool) (*Admission, error) {
	f := &admissionFacts{controller: controller, prof: prof, cfg: cfg}
	if want, got, ok := controllerCheck(f); !ok {
		a := &Admission{Profile: prof.Name, Controller: controller.String(), Checks: []Check{{Name: "controller", Want: want, Got: got}}}
		return a, &AdmissionError{Profile: prof.Name, Failed: a.Checks}
	}
	r := readAdmission(ctx, eng, f, withImages)
	if err := r.apply(ctx, eng, f); err != nil {
		return nil, err
	}
	return r.admission(eng, f)
}

// admissionReads are the outcomes of admission's Engine reads.
type admissionReads struct {
	withImages      bool
	verErr, infoErr error
	info            client.SystemInfoResult
	// imageIDs are the workload image's then each dataset's; images and
	// imageErrs their inspects, by index.
	imageIDs  []string
	images    []*image.InspectResponse
	imageErrs []error
	// unserved is set when the daemon does not serve the pinned API
	// version (apply).
	unserved bool
}

// readAdmission reads /version (into f.ver), /info and, with withImages,
// the image inspects. They are independent reads: they are dispatched
// together (the image inspects at most maxAdmissionReads at once), so
// admission costs one round trip on the start and exec paths rather than
// one per read. /version and /info come from the engine's daemonReadGroup:
// a read that began after this call, shared with concurrent admissions.
// Errors keep their report order (/version, /info, workload image,
// datasets): a /version failure, which wins whatever the others return,
// cancels the /info read, and either failure cancels the image inspects;
// nothing else cuts a read short.
func readAdmission(ctx context.Context, eng *engine, f *admissionFacts, withImages bool) *admissionReads {
	r := &admissionReads{withImages: withImages}
	if withImages {
		r.imageIDs = append(r.imageIDs, f.cfg.ImageID)
		for _, ds := range f.cfg.Datasets {
			r.imageIDs = append(r.imageIDs, ds.ImageID)
		}
		r.images = make([]*image.InspectResponse, len(r.imageIDs))
		r.imageErrs = make([]error, len(r.imageIDs))
	}
	var wg sync.WaitGroup
	imageCtx, cancelImages := context.WithCancel(ctx)
	defer cancelImages()
	slots := make(chan struct{}, maxAdmissionReads)
	for i, id := range r.imageIDs {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			r.images[i], r.imageErrs[i] = inspectImage(imageCtx, eng, id)
		})
	}
	d, err := eng.reads.read(ctx, eng)
	if err != nil {
		d.verErr = err
	}
	if d.verErr != nil || d.infoErr != nil {
		cancelImages()
	}
	wg.Wait()
	f.ver, r.verErr, r.info, r.infoErr = d.ver, d.verErr, d.info, d.infoErr
	// The read is shared with concurrent admissions: what this one keeps
	// and exposes (EngineFacts) is its own copy.
	r.info.Info.SecurityOptions = slices.Clone(r.info.Info.SecurityOptions)
	r.info.Info.Warnings = slices.Clone(r.info.Info.Warnings)
	r.info.Info.DriverStatus = slices.Clone(r.info.Info.DriverStatus)
	r.info.Info.Runtimes = maps.Clone(r.info.Info.Runtimes)
	f.ver.Components = slices.Clone(f.ver.Components)
	return r
}

// apply keeps the reads' outcome in f, or returns the first failure in
// report order.
func (r *admissionReads) apply(ctx context.Context, eng *engine, f *admissionFacts) error {
	err := r.verErr
	r.unserved = err != nil && cerrdefs.IsInvalidArgument(err) && strings.Contains(err.Error(), "client version")
	switch {
	case r.unserved:
		return r.readUnversioned(ctx, eng, f)
	case err != nil:
		return engineFailure(err, "read Engine /version at %s", eng.socket)
	case r.infoErr != nil:
		return engineFailure(r.infoErr, "read Engine /info at %s", eng.socket)
	}
	f.info = r.info.Info
	for i, ierr := range r.imageErrs {
		if ierr == nil {
			continue
		}
		if i == 0 {
			return engineFailure(ierr, "inspect image %s", r.imageIDs[i])
		}
		return engineFailure(ierr, "inspect dataset image %s", r.imageIDs[i])
	}
	if r.withImages {
		f.image, f.datasets = r.images[0], r.images[1:]
	}
	return nil
}

// readUnversioned is apply when the daemon does not serve the pinned API
// version: the other reads' replies are discarded, whatever they were.
// It reads /version and /info at the daemon's default version, only so
// that admission can report every failed row (the API version range among
// them); no image is inspected and nothing else is done at that version.
func (r *admissionReads) readUnversioned(ctx context.Context, eng *engine, f *admissionFacts) error {
	var v system.VersionResponse
	if _, err := eng.getUnversioned(ctx, "/version", &v); err != nil {
		return engineFailure(err, "read Engine /version at %s", eng.socket)
	}
	f.ver = client.ServerVersionResult{Version: v.Version, APIVersion: v.APIVersion, MinAPIVersion: v.MinAPIVersion,
		Os: v.Os, Arch: v.Arch, Components: v.Components}
	if _, err := eng.getUnversioned(ctx, "/info", &f.info); err != nil {
		return engineFailure(err, "read Engine /info at %s", eng.socket)
	}
	r.withImages = false
	return nil
}

// admission evaluates the table over f and returns the Admission, with an
// *AdmissionError when a row failed.
func (r *admissionReads) admission(eng *engine, f *admissionFacts) (*Admission, error) {
	prof := f.prof
	a := &Admission{Profile: prof.Name, Controller: f.controller.String(), Checks: f.evaluate(r.withImages), Engine: f.engineFacts()}
	a.Engine.ClientAPIVersion = eng.cli.ClientVersion()
	if r.unserved && len(a.Failed()) == 0 {
		// Never admitted without its image rows. An honest daemon that
		// refuses the pin already fails a version row; one whose /version
		// range claims the pin while refusing it fails this one.
		a.Checks = append(a.Checks, Check{Name: "pinned API version served", Want: eng.cli.ClientVersion(), Got: r.verErr.Error()})
	}
	if f.image != nil {
		a.Image = ImageFacts{ID: f.image.ID, Os: f.image.Os, Architecture: f.image.Architecture,
			Env: imageEnv(f.image), Volumes: imageVolumes(f.image)}
	}
	if failed := a.Failed(); len(failed) > 0 {
		return a, &AdmissionError{Profile: prof.Name, Failed: failed}
	}
	return a, nil
}

// inspectImage returns the inspect of id, or nil without error when the
// Engine has no such image.
func inspectImage(ctx context.Context, eng *engine, id string) (*image.InspectResponse, error) {
	res, err := eng.cli.ImageInspect(ctx, id)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &res.InspectResponse, nil
}

// engineFacts is the evidence tuple of f's /version and /info.
func (f *admissionFacts) engineFacts() EngineFacts {
	ver, info := f.ver, f.info
	e := EngineFacts{
		DaemonID: info.ID, Version: ver.Version, APIVersion: ver.APIVersion, MinAPIVersion: ver.MinAPIVersion,
		Os: ver.Os, Arch: ver.Arch, KernelVersion: info.KernelVersion, OperatingSystem: info.OperatingSystem,
		OSType: info.OSType, Architecture: info.Architecture, CgroupVersion: info.CgroupVersion,
		CgroupDriver: info.CgroupDriver, SecurityOptions: info.SecurityOptions, StorageDriver: info.Driver,
		DriverStatus: info.DriverStatus, ContainerdCommit: info.ContainerdCommit.ID, RuncCommit: info.RuncCommit.ID,
		Warnings: info.Warnings,
	}
	e.DefaultRuntime = info.DefaultRuntime
	for name, rt := range info.Runtimes {
		where := rt.Path
		if where == "" {
			where = rt.Type
		}
		e.Runtimes = append(e.Runtimes, name+"="+where)
	}
	slices.Sort(e.Runtimes)
	for _, comp := range ver.Components {
		e.Components = append(e.Components, comp.Name+" "+comp.Version)
		if comp.Name == "Engine" {
			e.GitCommit = comp.Details["GitCommit"]
			e.GoVersion = comp.Details["GoVersion"]
		}
	}
	return e
}
