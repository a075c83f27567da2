package main

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// The newcomer's three files (README.md "Adding a host row"): a profile,
// its platform and the platform's line in the registry's list.
const (
	newProfile = `# An example profile: linux-x64's expectations on a host of its own.
name: linux-x64-example
backendRevision: engine-1.52-v1-linux-x64-example
controller:
  os: linux
  architecture: amd64
daemon:
  architecture: amd64
  infoArchitectures: [amd64, x86_64]
  minAPIVersion: "1.52"
  desktop: false
image:
  architecture: amd64
runtime: runc
cgroup:
  version: 2
  driver: systemd
  namespace:
    securityOption: true
    perContainerReadback: true
appArmor:
  daemon: enabled
  workloadProfile: docker-default
seccomp:
  securityOptions:
    - name=seccomp,profile=builtin
datasets:
  minEngineVersion: 29.1.4
  minAPIVersion: "1.52"
  storageDriver: overlayfs
  driverType: io.containerd.snapshotter.v1
qualification:
  status: pending
  note: An example.
`
	newPlatform = `package platforms

var linuxX64Example = Platform{
	Profile: "linux-x64-example",
	Manifests: []Manifest{{
		File:  "linux-x64-example.yaml",
		About: "The linux-x64-example profile on the example host.",
		Overrides: []Override{{Scenario: "admission", Params: []Param{
			{Key: "reject", YAML: "[linux-x64-cgroupv1]"},
			{Key: "mustFail", YAML: ` + "`" + `["/info CgroupVersion", "/info CgroupDriver"]` + "`" + `},
		}}},
	}},
	Rows: []Row{{
		Name:     "example-host",
		About:    "The example host, self-hosted.",
		Manifest: "linux-x64-example.yaml",
		Engine:   EngineUp(),
		Runner:   []string{"self-hosted", "linux", "x64", "qualbox-example"},
		Tuple:    Tuple{OperatingSystem: "Example"},
		CIGate:   Informational,
		Waived:   []string{"datasets"},
	}},
}
`
	registryListEnd = "\t// A new platform: one line here, its Platform in a file of its own.\n"
)

// A newcomer adds a profile by writing three files in a copy of the
// repository: the profile, a platform file and one line of the
// registry's list. The drift test then fails naming the manifest to
// generate and the command; the command writes the manifest, the CI
// gate policy's row and its lane-host trust list, the workflow row and
// the runner's actionlint label (the release gate does not list the
// row); and the drift test and the policies' load then pass.
func TestANewProfileTakesThreeFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the generator and its test in a copy of the repository (a minute or more)")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command on PATH: %v", err)
	}
	root := copyRepository(t)
	write := func(name, data string) {
		t.Helper()
		assert.NilError(t, os.WriteFile(filepath.Join(root, filepath.FromSlash(name)), []byte(data), 0o644))
	}
	write("profiles/profiles/linux-x64-example.yaml", newProfile)
	write("platforms/linux-x64-example.go", newPlatform)
	list, err := os.ReadFile(filepath.Join(root, "platforms", "registry.go"))
	assert.NilError(t, err)
	assert.Assert(t, bytes.Count(list, []byte(registryListEnd)) == 1, "platforms/registry.go has no line %q", registryListEnd)
	write("platforms/registry.go", strings.Replace(string(list), registryListEnd, "\tlinuxX64Example,\n"+registryListEnd, 1))
	releasePolicy, err := os.ReadFile(filepath.Join(root, "reports", "gate-policy.yaml"))
	assert.NilError(t, err)

	gocmd := func(args ...string) (string, error) {
		t.Helper()
		cmd := exec.Command(goTool, args...)
		cmd.Dir = root
		// The copy has no VCS; -trimpath lets the build cache serve every
		// package the three files do not change.
		cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false -trimpath", "GOWORK=off", "GOPROXY=off", "GOTOOLCHAIN=local", "QUALBOX_NO_ENGINE=1")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	drift := []string{"test", "-count=1", "-run", "^(TestCommittedFilesAreGenerated|TestGeneratedPoliciesLoad)$", "./internal/platformgen/"}

	out, err := gocmd(drift...)
	assert.Check(t, err != nil, "the drift test passed before generating:\n%s", out)
	assert.Check(t, is.Contains(out, "manifests/linux-x64-example.yaml: missing"))
	assert.Check(t, is.Contains(out, "run `go run ./internal/platformgen` (make generate)"))

	out, err = gocmd("run", "./internal/platformgen")
	assert.NilError(t, err, out)
	assert.Check(t, is.Equal(out, "wrote manifests/linux-x64-example.yaml\nwrote .github/gate-policy.yaml\nwrote .github/workflows/qualify.yml\nwrote .github/actionlint.yaml\n"))

	read := func(name string) string {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		assert.NilError(t, err)
		return string(data)
	}
	m := read("manifests/linux-x64-example.yaml")
	assert.Check(t, is.Contains(m, "# The linux-x64-example profile on the example host.\nprofile: linux-x64-example\n"))
	assert.Check(t, is.Contains(m, "      reject: [linux-x64-cgroupv1]\n"))
	assert.Check(t, is.Contains(m, "  - name: desktop-admission\n"))
	ci := read(".github/gate-policy.yaml")
	assert.Check(t, is.Contains(ci, "  # The example host, self-hosted.\n  - name: example-host\n    profile: linux-x64-example\n    required: false\n    runtime: runc\n    operatingSystem: Example\n    manifests: [../manifests/linux-x64-example.yaml]\n"))
	assert.Check(t, is.Contains(ci, "    rows: [lane-a, lane-b, lane-c, lane-d, lane-d-emulated-amd64, lane-d-cgroupfs, example-host] # generated: signer lane-host\n"))
	wf := read(".github/workflows/qualify.yml")
	assert.Check(t, is.Contains(wf, "          - row: example-host\n            profile: linux-x64-example\n            manifest: manifests/linux-x64-example.yaml\n"+
		"            runner: '[\"self-hosted\", \"linux\", \"x64\", \"qualbox-example\"]'\n            engine: up\n"))
	assert.Check(t, is.Contains(read(".github/actionlint.yaml"), "    - qualbox-example\n"))
	assert.Check(t, is.Equal(read("reports/gate-policy.yaml"), string(releasePolicy)))

	out, err = gocmd(drift...)
	assert.NilError(t, err, out)
}

// copyRepository copies the repository into a temporary directory: every
// file but the VCS directory, build output and the committed reports
// (their keys and the release gate policy stay).
func copyRepository(t *testing.T) string {
	t.Helper()
	src, err := filepath.Abs(repoRoot)
	assert.NilError(t, err)
	dst := t.TempDir()
	err = filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case rel == ".git" || rel == "dist":
			if !d.IsDir() {
				return nil // a worktree's .git file
			}
			return fs.SkipDir
		case d.IsDir() && strings.HasPrefix(rel, "reports/") && rel != "reports/keys" && rel != ranDir:
			return fs.SkipDir
		case d.IsDir():
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		case !d.Type().IsRegular():
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	assert.NilError(t, err)
	return dst
}
