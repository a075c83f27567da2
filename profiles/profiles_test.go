package profiles

import (
	"errors"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

func TestNames(t *testing.T) {
	assert.DeepEqual(t, Names(), []string{
		"desktop-apple-virtualization-native-arm64",
		"desktop-apple-virtualization-rosetta-amd64",
		"linux-arm64",
		"linux-arm64-cgroupfs",
		"linux-arm64-emulated-amd64",
		"linux-x64",
		"linux-x64-cgroupv1",
	})
}

func TestAllEmbeddedProfilesLoad(t *testing.T) {
	all, err := All()
	assert.NilError(t, err)
	assert.Equal(t, len(all), len(Names()))
	for _, p := range all {
		t.Run(p.Name, func(t *testing.T) {
			loaded, err := Load(p.Name)
			assert.NilError(t, err)
			assert.DeepEqual(t, loaded, p)
		})
	}
}

func TestReferenceProfiles(t *testing.T) {
	// The reference profiles, field for field
	// (docs/contract.md#profiles-and-admission).
	linux := Profile{
		Name:            "linux-x64",
		BackendRevision: "engine-1.52-v4-linux-x64",
		Controller:      Platform{OS: "linux", Architecture: "amd64"},
		Daemon: Daemon{
			Architecture:      "amd64",
			InfoArchitectures: []string{"amd64", "x86_64"},
			MinAPIVersion:     "1.52",
		},
		Image:   Image{Architecture: "amd64"},
		Runtime: "runc",
		Cgroup: Cgroup{Version: 2, Driver: "systemd",
			Namespace: CgroupNamespace{SecurityOption: true, PerContainerReadback: true}},
		AppArmor: AppArmor{Daemon: AppArmorEnabled, WorkloadProfile: "docker-default"},
		Seccomp:  Seccomp{SecurityOptions: []string{"name=seccomp,profile=builtin"}},
		Datasets: DatasetRequirements{
			MinEngineVersion: "29.1.4",
			MinAPIVersion:    "1.52",
			StorageDriver:    "overlayfs",
			DriverType:       "io.containerd.snapshotter.v1",
		},
	}
	desktop := func(name, image string) Profile {
		p := linux
		p.Name = name
		p.BackendRevision = "engine-1.52-v4-" + name
		p.Controller = Platform{OS: "darwin", Architecture: "arm64"}
		p.Daemon = Daemon{
			Architecture:      "arm64",
			InfoArchitectures: []string{"arm64", "aarch64"},
			MinAPIVersion:     "1.52",
			Desktop:           true,
			OperatingSystem:   "Docker Desktop",
		}
		p.Image = Image{Architecture: image}
		p.Cgroup.Driver = "cgroupfs"
		p.AppArmor = AppArmor{Daemon: AppArmorAbsent}
		p.Datasets.ModuleBuilds = nil
		return p
	}
	ignoreNote := cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Qualification" }, cmp.Ignore())
	// linux.Datasets.ModuleBuilds stays nil: the reference admits datasets
	// only on a stable release >= 29.1.4, never on a module build.
	for _, want := range []Profile{
		linux,
		desktop("desktop-apple-virtualization-native-arm64", "arm64"),
		desktop("desktop-apple-virtualization-rosetta-amd64", "amd64"),
	} {
		got, err := Load(want.Name)
		assert.NilError(t, err)
		assert.DeepEqual(t, got, want, ignoreNote)
		if want.Name != "linux-x64" {
			// No Desktop report exists until the Mac handoff produces one.
			assert.Equal(t, got.Qualification.Status, StatusPending)
		}
	}
}

// A profile says "qualified" only while the signed report its note names
// is committed: the status follows evidence, never the other way round.
func TestQualifiedProfilesNameACommittedReport(t *testing.T) {
	for _, name := range Names() {
		p, err := Load(name)
		assert.NilError(t, err)
		if p.Qualification.Status != StatusQualified {
			continue
		}
		reports := regexp.MustCompile(`reports/[a-z0-9.-]+/(\d{8}T\d{6}Z)?`).FindAllString(p.Qualification.Note, -1)
		assert.Check(t, len(reports) > 0, "%s: qualified, but its note names no report", name)
		for _, r := range reports {
			found, _ := filepath.Glob(filepath.Join("..", r, "*evidence.dsse.json"))
			more, _ := filepath.Glob(filepath.Join("..", r, "*", "evidence.dsse.json"))
			assert.Check(t, len(found)+len(more) > 0, "%s: note names %s, which holds no signed report", name, r)
		}
	}
}

func TestCgroupV1Profile(t *testing.T) {
	p, err := Load("linux-x64-cgroupv1")
	assert.NilError(t, err)
	assert.Equal(t, p.BackendRevision, "engine-1.41-v1-linux-x64-cgroupv1")
	assert.Equal(t, p.Cgroup, Cgroup{Version: 1, Driver: "cgroupfs",
		Namespace: CgroupNamespace{SecurityOption: false, PerContainerReadback: true}})
	assert.DeepEqual(t, p.Seccomp.SecurityOptions, []string{"name=seccomp,profile=default", "name=seccomp,profile=builtin"})
	assert.Equal(t, p.AppArmor, AppArmor{Daemon: AppArmorAbsent, WorkloadProfile: ""})
	assert.Equal(t, p.Daemon.MinAPIVersion, "1.41")
	assert.Equal(t, p.Datasets.MinAPIVersion, "1.48")
	assert.Check(t, is.Contains(p.Qualification.Note, "1.48"))
}

func TestUnknownProfile(t *testing.T) {
	_, err := Load("linux-riscv64")
	var unknown *UnknownProfileError
	assert.Assert(t, errors.As(err, &unknown))
	assert.DeepEqual(t, unknown.Known, Names())
	assert.Error(t, err, `profiles: unknown profile "linux-riscv64" (known: `+
		`desktop-apple-virtualization-native-arm64, desktop-apple-virtualization-rosetta-amd64, linux-arm64, linux-arm64-cgroupfs, linux-arm64-emulated-amd64, linux-x64, linux-x64-cgroupv1)`)
}

const good = `name: example
backendRevision: engine-1.41-v1-example
controller: {os: linux, architecture: amd64}
daemon:
  architecture: amd64
  infoArchitectures: [amd64, x86_64]
  minAPIVersion: "1.41"
  desktop: false
image: {architecture: amd64}
cgroup:
  version: 1
  driver: cgroupfs
  namespace: {securityOption: false, perContainerReadback: true}
appArmor: {daemon: absent, workloadProfile: ""}
seccomp: {securityOptions: ["name=seccomp,profile=default"]}
datasets: {minEngineVersion: 29.1.4, minAPIVersion: "1.48", storageDriver: overlayfs, driverType: io.containerd.snapshotter.v1}
qualification: {status: pending, note: test document}
runtime: runc
`

func TestParseGood(t *testing.T) {
	p, err := parse("example", []byte(good))
	assert.NilError(t, err)
	assert.Equal(t, p.Cgroup.Version, 1)
}

func TestParseMalformed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		old    string
		new    string
		issues []Issue
	}{
		{
			name: "unknown field",
			old:  "  version: 1\n", new: "  version: 1\n  hybrid: true\n",
			issues: []Issue{{Field: "cgroup.hybrid", Problem: "unknown field (line 12)"}},
		},
		{
			name: "unknown top-level field",
			old:  "name: example\n", new: "name: example\nprofile: x\n",
			issues: []Issue{{Field: "profile", Problem: "unknown field (line 2)"}},
		},
		{
			name: "missing field",
			old:  "  desktop: false\n", new: "",
			issues: []Issue{{Field: "daemon.desktop", Problem: "missing"}},
		},
		{
			name: "missing section",
			old:  "image: {architecture: amd64}\n", new: "",
			issues: []Issue{{Field: "image", Problem: "missing"}},
		},
		{
			name: "bad version",
			old:  "  version: 1\n", new: "  version: 3\n",
			issues: []Issue{{Field: "cgroup.version", Problem: "3, want 1 or 2"}},
		},
		{
			name: "mistyped version",
			old:  "  version: 1\n", new: "  version: two\n",
			issues: []Issue{{Field: "cgroup.version", Problem: `want a int, got "two" (line 11)`}},
		},
		{
			name: "bad API version",
			old:  `minAPIVersion: "1.41"`, new: `minAPIVersion: "1.39"`,
			issues: []Issue{
				{Field: "backendRevision", Problem: `"engine-1.41-v1-example" is not engine-1.39-v<N>-example`},
				{Field: "daemon.minAPIVersion", Problem: `"1.39" is out of range 1.40 to 1.999`},
			},
		},
		{
			name: "name differs from file",
			old:  "name: example\n", new: "name: other\n",
			issues: []Issue{
				{Field: "name", Problem: `"other" differs from the file name "example.yaml"`},
				{Field: "backendRevision", Problem: `"engine-1.41-v1-example" is not engine-1.41-v<N>-other`},
			},
		},
		{
			name: "cgroupns security option on v1",
			old:  "securityOption: false", new: "securityOption: true",
			issues: []Issue{{Field: "cgroup.namespace.securityOption", Problem: "true, but cgroup v1 daemons never report name=cgroupns"}},
		},
		{
			name: "apparmor profile without apparmor",
			old:  `workloadProfile: ""`, new: `workloadProfile: docker-default`,
			issues: []Issue{{Field: "appArmor.workloadProfile", Problem: `"docker-default", want "" when the daemon has no AppArmor`}},
		},
		{
			name: "module build with build metadata",
			old:  "driverType: io.containerd.snapshotter.v1}", new: "driverType: io.containerd.snapshotter.v1, moduleBuilds: [{module: github.com/moby/moby/v2, version: v2.0.0+unknown}]}",
			issues: []Issue{{Field: "datasets.moduleBuilds[0].version", Problem: `"v2.0.0+unknown" is not an exact Go module version v<major>.<minor>.<patch>[-<pre-release>]`}},
		},
		{
			name: "module build without module",
			old:  "driverType: io.containerd.snapshotter.v1}", new: "driverType: io.containerd.snapshotter.v1, moduleBuilds: [{version: v2.0.0-beta.24}]}",
			issues: []Issue{{Field: "datasets.moduleBuilds[0].module", Problem: "missing"}},
		},
		{
			name: "module build twice",
			old:  "driverType: io.containerd.snapshotter.v1}", new: "driverType: io.containerd.snapshotter.v1, moduleBuilds: [{module: github.com/moby/moby/v2, version: v2.0.0-beta.24}, {module: github.com/moby/moby/v2, version: v2.0.0-beta.24}]}",
			issues: []Issue{{Field: "datasets.moduleBuilds[1]", Problem: "github.com/moby/moby/v2@v2.0.0-beta.24 is listed twice"}},
		},
		{
			name: "missing runtime",
			old:  "runtime: runc\n", new: "",
			issues: []Issue{{Field: "runtime", Problem: "missing"}},
		},
		{
			name: "runtime with a path",
			old:  "runtime: runc\n", new: "runtime: /usr/bin/runc\n",
			issues: []Issue{{Field: "runtime", Problem: `"/usr/bin/runc" is not an OCI runtime name (letters, digits, '_', '.', '-'; at most 64)`}},
		},
		{
			name: "second document",
			old:  "qualification:", new: "---\nqualification:",
			issues: []Issue{{Problem: "want exactly one YAML document"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := strings.Replace(good, tc.old, tc.new, 1)
			assert.Assert(t, doc != good, "test case does not change the document")
			_, err := parse("example", []byte(doc))
			var invalid *InvalidProfileError
			assert.Assert(t, errors.As(err, &invalid), "%v", err)
			assert.Equal(t, invalid.File, "example.yaml")
			assert.DeepEqual(t, invalid.Issues, tc.issues)
			for _, issue := range tc.issues {
				assert.Check(t, is.Contains(err.Error(), "example.yaml: "))
				assert.Check(t, is.Contains(err.Error(), issue.Field))
			}
		})
	}
}

// A profile-less client pins the newest profile pin the Engine serves:
// lane A's 20.10 (API 1.41) gets 1.41, a 29.x Engine (API 1.52, which
// refuses 1.41) 1.52, one newer still 1.52; an Engine older than every
// profile, or a malformed version, gets none.
func TestDaemonAPIVersionFor(t *testing.T) {
	for served, want := range map[string]string{"1.41": "1.41", "1.47": "1.41", "1.52": "1.52", "1.56": "1.52", "1.40": "", "2.0": "", "": ""} {
		assert.Check(t, is.Equal(DaemonAPIVersionFor(served), want), "served %q", served)
	}
}
