package driver

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

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
	DaemonID         string      `json:"daemonId"`
	Version          string      `json:"version"`
	APIVersion       string      `json:"apiVersion"`
	MinAPIVersion    string      `json:"minApiVersion"`
	GitCommit        string      `json:"gitCommit"`
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
	Components       []string    `json:"components"`
	Warnings         []string    `json:"warnings"`
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
// (seed policy/preflight.js): every check made, and the facts behind them.
type Admission struct {
	Profile string      `json:"profile"`
	Checks  []Check     `json:"checks"`
	Engine  EngineFacts `json:"engine"`
	Image   ImageFacts  `json:"image"`
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

type checker struct{ checks []Check }

func (c *checker) add(name, want, got string, ok bool) {
	c.checks = append(c.checks, Check{Name: name, Want: want, Got: got, OK: ok})
}

func (c *checker) equal(name, want, got string) {
	c.add(name, strconv.Quote(want), strconv.Quote(got), want == got)
}

func (c *checker) flag(name string, got bool) {
	c.add(name, "true", strconv.FormatBool(got), got)
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

// admit runs every admission check of prof against the Engine and, with
// withImages, the workload and dataset images. It
// returns the Admission (always, when the Engine answered) and an
// *AdmissionError when any check failed.
func admit(ctx context.Context, eng *engine, prof profiles.Profile, cfg *Config, withImages bool) (*Admission, error) {
	var c checker
	a := &Admission{Profile: prof.Name}
	if err := checkController(prof); err != nil {
		c.add("controller", prof.Controller.OS+"/"+prof.Controller.Architecture, runtimeTuple(), false)
	} else {
		c.add("controller", prof.Controller.OS+"/"+prof.Controller.Architecture, runtimeTuple(), true)
	}
	ver, err := eng.cli.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		return nil, engineFailure(err, "read Engine /version at %s", eng.socket)
	}
	infoRes, err := eng.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return nil, engineFailure(err, "read Engine /info at %s", eng.socket)
	}
	info := infoRes.Info
	a.Engine = EngineFacts{
		DaemonID: info.ID, Version: ver.Version, APIVersion: ver.APIVersion, MinAPIVersion: ver.MinAPIVersion,
		Os: ver.Os, Arch: ver.Arch, KernelVersion: info.KernelVersion, OperatingSystem: info.OperatingSystem,
		OSType: info.OSType, Architecture: info.Architecture, CgroupVersion: info.CgroupVersion,
		CgroupDriver: info.CgroupDriver, SecurityOptions: info.SecurityOptions, StorageDriver: info.Driver,
		DriverStatus: info.DriverStatus, ContainerdCommit: info.ContainerdCommit.ID, RuncCommit: info.RuncCommit.ID,
		Warnings: info.Warnings,
	}
	for _, comp := range ver.Components {
		a.Engine.Components = append(a.Engine.Components, comp.Name+" "+comp.Version)
		if comp.Name == "Engine" {
			a.Engine.GitCommit = comp.Details["GitCommit"]
		}
	}
	d := prof.Daemon
	c.add("daemon ID", "non-empty identity without whitespace or separators", strconv.Quote(info.ID),
		info.ID != "" && len(info.ID) <= 256 && !strings.ContainsAny(info.ID, " \t\r\n/\\"))
	c.equal("/version Os", "linux", ver.Os)
	c.equal("/version Arch", d.Architecture, ver.Arch)
	c.equal("/info OSType", "linux", info.OSType)
	c.add("/info Architecture", "one of "+strings.Join(d.InfoArchitectures, ", "), strconv.Quote(info.Architecture), slices.Contains(d.InfoArchitectures, info.Architecture))
	min, _ := apiVersion(d.MinAPIVersion)
	got, gotOK := apiVersion(ver.APIVersion)
	floor, floorOK := apiVersion(ver.MinAPIVersion)
	c.add("API version range", fmt.Sprintf("MinAPIVersion <= %s <= ApiVersion", d.MinAPIVersion),
		fmt.Sprintf("%s..%s", ver.MinAPIVersion, ver.APIVersion), gotOK && floorOK && floor <= min && got >= min)
	if d.Desktop {
		c.equal("/info OperatingSystem", profiles.DesktopOperatingSystem, info.OperatingSystem)
	} else {
		c.add("/info OperatingSystem", "not "+strconv.Quote(profiles.DesktopOperatingSystem), strconv.Quote(info.OperatingSystem), info.OperatingSystem != profiles.DesktopOperatingSystem)
	}
	c.equal("/info CgroupVersion", strconv.Itoa(prof.Cgroup.Version), info.CgroupVersion)
	c.equal("/info CgroupDriver", prof.Cgroup.Driver, info.CgroupDriver)
	c.flag("/info MemoryLimit", info.MemoryLimit)
	c.flag("/info SwapLimit", info.SwapLimit)
	c.flag("/info PidsLimit", info.PidsLimit)
	c.flag("/info CpuCfsPeriod", info.CPUCfsPeriod)
	c.flag("/info CpuCfsQuota", info.CPUCfsQuota)
	sec := info.SecurityOptions
	var userns []string
	for _, o := range sec {
		if strings.Contains(strings.ToLower(o), "rootless") || strings.Contains(strings.ToLower(o), "userns") {
			userns = append(userns, o)
		}
	}
	c.add("rootless/userns", "none in SecurityOptions", fmt.Sprintf("%q", userns), len(userns) == 0)
	hasAppArmor := slices.ContainsFunc(sec, func(o string) bool { return securityOptionName(o) == "apparmor" })
	c.add("AppArmor", prof.AppArmor.Daemon, map[bool]string{true: "name=apparmor present", false: "name=apparmor absent"}[hasAppArmor],
		hasAppArmor == (prof.AppArmor.Daemon == profiles.AppArmorEnabled))
	seccompOK := false
	for _, want := range prof.Seccomp.SecurityOptions {
		seccompOK = seccompOK || slices.Contains(sec, want)
	}
	c.add("seccomp", "one of "+strings.Join(prof.Seccomp.SecurityOptions, " | "), fmt.Sprintf("%q", sec), seccompOK)
	if prof.Cgroup.Namespace.SecurityOption {
		c.add("cgroupns", "name=cgroupns in SecurityOptions", fmt.Sprintf("%q", sec), slices.Contains(sec, "name=cgroupns"))
	}
	if len(cfg.Datasets) > 0 {
		req := prof.Datasets
		var driverType []string
		for _, kv := range info.DriverStatus {
			if kv[0] == "driver-type" {
				driverType = append(driverType, kv[1])
			}
		}
		c.equal("datasets: storage driver", req.StorageDriver, info.Driver)
		c.add("datasets: image store", req.DriverType, fmt.Sprintf("%q", driverType), len(driverType) == 1 && driverType[0] == req.DriverType)
		ev, evOK := engineVersion(ver.Version)
		mv, _ := engineVersion(req.MinEngineVersion)
		c.add("datasets: Engine version", ">= "+req.MinEngineVersion+" (stable)", strconv.Quote(ver.Version), evOK && versionAtLeast(ev, mv))
		dmin, _ := apiVersion(req.MinAPIVersion)
		c.add("datasets: API version", ">= "+req.MinAPIVersion, ver.APIVersion, gotOK && got >= dmin)
	}

	if !withImages {
		a.Checks = c.checks
		if failed := a.Failed(); len(failed) > 0 {
			return a, &AdmissionError{Profile: prof.Name, Failed: failed}
		}
		return a, nil
	}
	img, err := eng.cli.ImageInspect(ctx, cfg.ImageID)
	switch {
	case isNotFound(err):
		c.add("image", "exact local image "+cfg.ImageID, "absent", false)
	case err != nil:
		return nil, engineFailure(err, "inspect image %s", cfg.ImageID)
	default:
		a.Image = ImageFacts{ID: img.ID, Os: img.Os, Architecture: img.Architecture}
		if img.Config != nil {
			a.Image.Env = img.Config.Env
			for v := range img.Config.Volumes {
				a.Image.Volumes = append(a.Image.Volumes, v)
			}
			slices.Sort(a.Image.Volumes)
		}
		c.equal("image Id", cfg.ImageID, img.ID)
		c.equal("image Os", "linux", img.Os)
		c.equal("image Architecture", prof.Image.Architecture, img.Architecture)
		c.add("image Volumes", "none declared", fmt.Sprintf("%q", a.Image.Volumes), len(a.Image.Volumes) == 0)
		fixed := fixedEnvironmentMap()
		var extra []string
		for _, kv := range a.Image.Env {
			k, v, _ := strings.Cut(kv, "=")
			if want, ok := fixed[k]; !ok || want != v {
				extra = append(extra, kv)
			}
		}
		c.add("image Env", "subset of "+strings.Join(FixedEnvironment, " "), fmt.Sprintf("%q", a.Image.Env), len(extra) == 0)
	}
	for _, ds := range cfg.Datasets {
		di, err := eng.cli.ImageInspect(ctx, ds.ImageID)
		switch {
		case isNotFound(err):
			c.add("dataset "+ds.Name, "exact local image "+ds.ImageID, "absent", false)
		case err != nil:
			return nil, engineFailure(err, "inspect dataset image %s", ds.ImageID)
		default:
			c.add("dataset "+ds.Name, "exact Linux layers image "+ds.ImageID, fmt.Sprintf("%s %s %s", di.ID, di.Os, di.RootFS.Type),
				di.ID == ds.ImageID && di.Os == "linux" && di.RootFS.Type == "layers")
		}
	}
	a.Checks = c.checks
	if failed := a.Failed(); len(failed) > 0 {
		return a, &AdmissionError{Profile: prof.Name, Failed: failed}
	}
	return a, nil
}
