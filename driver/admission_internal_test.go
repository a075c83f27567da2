package driver

import (
	"strings"
	"testing"

	dockerspec "github.com/moby/docker-image-spec/specs-go/v1"
	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/api/types/system"
	"github.com/moby/moby/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/profiles"
)

// Both SecurityOptions spellings of AppArmor count as present: Engine
// 29.1.3 sends "name=apparmor", Moby v2 builds send
// "name=apparmor,profile=default" (docs/lanes.md, lane C). An exact-string
// match would call the second absent and fail linux-x64 admission.
func TestSecurityOptionName(t *testing.T) {
	for opt, want := range map[string]string{
		"name=apparmor":                 "apparmor",
		"name=apparmor,profile=default": "apparmor",
		"name=seccomp,profile=builtin":  "seccomp",
		"profile=default,name=cgroupns": "cgroupns",
		"name=apparmorx":                "apparmorx",
		"apparmor":                      "",
		"":                              "",
	} {
		assert.Equal(t, securityOptionName(opt), want, opt)
	}
}

// passingFacts are facts a linux-x64-cgroupv1 admission accepts: the shape
// lane A reports (docs/lanes.md#lane-a), with one dataset attached so the
// dataset rows are evaluated too.
func passingFacts(t *testing.T) *admissionFacts {
	t.Helper()
	prof, err := profiles.Load("linux-x64-cgroupv1")
	assert.NilError(t, err)
	imageID := "sha256:" + strings.Repeat("a", 64)
	dsID := "sha256:" + strings.Repeat("b", 64)
	return &admissionFacts{
		controller: controllerPlatform{Platform: profiles.Platform{OS: "linux", Architecture: "amd64"}},
		prof:       prof,
		cfg:        &Config{ImageID: imageID, Datasets: []Dataset{{Name: "corpus", ImageID: dsID}}},
		ver: client.ServerVersionResult{Version: "29.1.4", APIVersion: "1.52", MinAPIVersion: "1.24",
			Os: "linux", Arch: "amd64"},
		info: system.Info{
			ID: "ABCD:EFGH", OSType: "linux", Architecture: "x86_64", OperatingSystem: "Debian GNU/Linux 12",
			KernelVersion: "6.1.0-50-amd64",
			CgroupVersion: "1", CgroupDriver: "cgroupfs", MemoryLimit: true, SwapLimit: true, PidsLimit: true,
			CPUCfsPeriod: true, CPUCfsQuota: true, SecurityOptions: []string{"name=seccomp,profile=default"},
			Driver: "overlayfs", DriverStatus: [][2]string{{"driver-type", "io.containerd.snapshotter.v1"}},
		},
		image: &image.InspectResponse{ID: imageID, Os: "linux", Architecture: "amd64",
			Config: &dockerspec.DockerOCIImageConfig{ImageConfig: ocispec.ImageConfig{Env: []string{"TMPDIR=/tmp"}}}},
		datasets: []*image.InspectResponse{{ID: dsID, Os: "linux", RootFS: image.RootFS{Type: "layers"}}},
	}
}

// Every row of the admission table can fail, and a failed row reaches both
// the evidence (Admission.Checks) and the error text: each mutation below
// breaks exactly the named row of otherwise passing facts.
func TestAdmissionTableRowsFail(t *testing.T) {
	f := passingFacts(t)
	for _, c := range f.evaluate(true) {
		assert.Check(t, c.OK, "passing facts fail %s: want %s, got %s", c.Name, c.Want, c.Got)
	}
	mutations := map[string]func(f *admissionFacts){
		"controller":            func(f *admissionFacts) { f.prof.Controller.Architecture = "arm64" },
		"daemon ID":             func(f *admissionFacts) { f.info.ID = "a/b" },
		"/version Os":           func(f *admissionFacts) { f.ver.Os = "windows" },
		"/version Arch":         func(f *admissionFacts) { f.ver.Arch = "arm64" },
		"/info OSType":          func(f *admissionFacts) { f.info.OSType = "windows" },
		"/info Architecture":    func(f *admissionFacts) { f.info.Architecture = "aarch64" },
		"API version range":     func(f *admissionFacts) { f.ver.MinAPIVersion = "1.44" },
		"/info OperatingSystem": func(f *admissionFacts) { f.info.OperatingSystem = profiles.DesktopOperatingSystem },
		"/info KernelVersion":   func(f *admissionFacts) { f.info.KernelVersion = "6.10.14-linuxkit" },
		"/info CgroupVersion":   func(f *admissionFacts) { f.info.CgroupVersion = "2" },
		"/info CgroupDriver":    func(f *admissionFacts) { f.info.CgroupDriver = "systemd" },
		"/info MemoryLimit":     func(f *admissionFacts) { f.info.MemoryLimit = false },
		"/info SwapLimit":       func(f *admissionFacts) { f.info.SwapLimit = false },
		"/info PidsLimit":       func(f *admissionFacts) { f.info.PidsLimit = false },
		"/info CpuCfsPeriod":    func(f *admissionFacts) { f.info.CPUCfsPeriod = false },
		"/info CpuCfsQuota":     func(f *admissionFacts) { f.info.CPUCfsQuota = false },
		"rootless/userns": func(f *admissionFacts) {
			f.info.SecurityOptions = append(f.info.SecurityOptions, "name=rootless")
		},
		"AppArmor": func(f *admissionFacts) {
			f.info.SecurityOptions = append(f.info.SecurityOptions, "name=apparmor")
		},
		"seccomp": func(f *admissionFacts) { f.info.SecurityOptions = nil },
		"cgroupns": func(f *admissionFacts) {
			f.prof.Cgroup.Namespace.SecurityOption = true
		},
		"datasets: storage driver":  func(f *admissionFacts) { f.info.Driver = "overlay2" },
		"datasets: image store":     func(f *admissionFacts) { f.info.DriverStatus = nil },
		"datasets: Engine identity": func(f *admissionFacts) { f.ver.Version = "29.1.4-rc.1" },
		"datasets: API version":     func(f *admissionFacts) { f.ver.APIVersion = "1.47" },
		"image Id":                  func(f *admissionFacts) { f.image.ID = "sha256:" + strings.Repeat("c", 64) },
		"image Os":                  func(f *admissionFacts) { f.image.Os = "windows" },
		"image Architecture":        func(f *admissionFacts) { f.image.Architecture = "arm64" },
		"image Volumes":             func(f *admissionFacts) { f.image.Config.Volumes = map[string]struct{}{"/data": {}} },
		"image Env":                 func(f *admissionFacts) { f.image.Config.Env = []string{"LD_PRELOAD=/x.so"} },
		"image":                     func(f *admissionFacts) { f.image = nil },
		"dataset corpus":            func(f *admissionFacts) { f.datasets[0].RootFS.Type = "unknown" },
	}
	names := map[string]bool{"image": true, "dataset corpus": true}
	for _, r := range append(append([]admissionRule(nil), daemonRules...), imageRules...) {
		names[r.name] = true
	}
	for name := range names {
		_, ok := mutations[name]
		assert.Check(t, ok, "row %q has no mutation that shows it failing", name)
	}
	for name, mutate := range mutations {
		t.Run(name, func(t *testing.T) {
			f := passingFacts(t)
			mutate(f)
			var failed []string
			for _, c := range f.evaluate(true) {
				if !c.OK {
					failed = append(failed, c.Name)
				}
			}
			assert.DeepEqual(t, failed, []string{name})
		})
	}
}

// The daemon ID is one opaque token: any Unicode white space rejects it, not
// only space, tab, CR and LF.
func TestDaemonIDRejectsAnyWhitespace(t *testing.T) {
	for _, id := range []string{"a b", "a\tb", "a\nb", "a\rb", "a\vb", "a\fb", "a\u0085b", "a\u00a0b", "a\u2028b", "a\u3000b", "a/b", "a\\b", ""} {
		f := passingFacts(t)
		f.info.ID = id
		for _, c := range f.evaluate(false) {
			if c.Name == "daemon ID" {
				assert.Check(t, !c.OK, "daemon ID %q admitted", id)
			}
		}
	}
}

// CheckEngineFacts over the facts admission records gives exactly the
// admission table's results for the rows those facts determine, passing
// and failing alike, and leaves out only the rows it cannot recompute.
func TestCheckEngineFactsIsTheAdmissionTable(t *testing.T) {
	for name, mutate := range map[string]func(f *admissionFacts){
		"passing":   func(*admissionFacts) {},
		"cgroup v2": func(f *admissionFacts) { f.info.CgroupVersion = "2" },
		"apparmor present": func(f *admissionFacts) {
			f.info.SecurityOptions = append(f.info.SecurityOptions, "name=apparmor,profile=default")
		},
		"other profile": func(f *admissionFacts) {
			prof, err := profiles.Load("linux-x64")
			assert.NilError(t, err)
			f.prof = prof
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := passingFacts(t)
			f.cfg.Datasets, f.datasets = nil, nil
			mutate(f)
			var want []Check
			for _, c := range f.evaluate(false) {
				switch c.Name {
				case "controller", "/info MemoryLimit", "/info SwapLimit", "/info PidsLimit", "/info CpuCfsPeriod", "/info CpuCfsQuota":
					continue
				}
				want = append(want, c)
			}
			assert.DeepEqual(t, CheckEngineFacts(f.prof, f.engineFacts()), want)
		})
	}
	prof, err := profiles.Load("linux-x64")
	assert.NilError(t, err)
	assert.DeepEqual(t, CheckController(prof, "darwin", "arm64"), Check{Name: "controller", Want: "linux/amd64", Got: "darwin/arm64"})
	assert.Equal(t, CheckController(prof, "linux", "amd64").OK, true)
}

// A Linux profile refuses every Docker Desktop shape it cannot be: the
// bare "Docker Desktop", the name with a release, and a linuxkit kernel
// under another name; each refusal names what it saw. Lane A's and lane C's
// own hosts stay admitted.
func TestLinuxProfileRefusesDesktopShapes(t *testing.T) {
	for _, c := range []struct {
		os, kernel string
		failed     []Check
	}{
		{"Debian GNU/Linux 12 (bookworm)", "6.1.0-50-amd64", nil},
		{"Debian GNU/Linux 13 (trixie)", "6.12.117+deb13-amd64", nil},
		{"Docker Desktop", "6.1.0-50-amd64", []Check{{Name: "/info OperatingSystem",
			Want: `not Docker Desktop ("Docker Desktop", "Docker Desktop <version>")`, Got: `"Docker Desktop"`}}},
		{"Docker Desktop 4.56.0", "6.1.0-50-amd64", []Check{{Name: "/info OperatingSystem",
			Want: `not Docker Desktop ("Docker Desktop", "Docker Desktop <version>")`, Got: `"Docker Desktop 4.56.0"`}}},
		{"Debian GNU/Linux 12 (bookworm)", "6.10.14-linuxkit", []Check{{Name: "/info KernelVersion",
			Want: `not a Docker Desktop VM kernel (no "linuxkit")`, Got: `"6.10.14-linuxkit"`}}},
		{"docker desktop 4.56.0", "5.15.49-LinuxKit", []Check{
			{Name: "/info OperatingSystem", Want: `not Docker Desktop ("Docker Desktop", "Docker Desktop <version>")`, Got: `"docker desktop 4.56.0"`},
			{Name: "/info KernelVersion", Want: `not a Docker Desktop VM kernel (no "linuxkit")`, Got: `"5.15.49-LinuxKit"`}}},
	} {
		f := passingFacts(t)
		f.info.OperatingSystem, f.info.KernelVersion = c.os, c.kernel
		a := &Admission{Checks: f.evaluate(true)}
		assert.Check(t, is.DeepEqual(a.Failed(), c.failed), "OperatingSystem %q, kernel %q", c.os, c.kernel)
		// The verifier's re-evaluation from recorded facts agrees.
		var again []Check
		for _, ch := range CheckEngineFacts(f.prof, f.engineFacts()) {
			if !ch.OK {
				again = append(again, ch)
			}
		}
		assert.Check(t, is.DeepEqual(again, c.failed), "recorded OperatingSystem %q, kernel %q", c.os, c.kernel)
	}
}
