package evidence

import (
	"fmt"
	"strings"
)

// Tuple is the platform tuple a run qualifies: what a release manager
// gates on and what `qualify merge` uses as a matrix column.
type Tuple struct {
	Profile        string `json:"profile"`
	ControllerOS   string `json:"controllerOS"`
	ControllerArch string `json:"controllerArch"`
	GoVersion      string `json:"goVersion"`
	EngineVersion  string `json:"engineVersion"`
	EngineAPI      string `json:"engineAPIVersion"`
	EngineCommit   string `json:"engineCommit"`
	// Containerd and Runc are the versions (commits) /info reports.
	Containerd string `json:"containerd"`
	Runc       string `json:"runc"`
	// Runtime is the OCI runtime the run's sandboxes ran under (Run.Runtime);
	// empty in reports made before it was recorded.
	Runtime         string `json:"runtime,omitempty"`
	Kernel          string `json:"kernel"`
	OperatingSystem string `json:"operatingSystem"`
	CgroupVersion   string `json:"cgroupVersion"`
	CgroupDriver    string `json:"cgroupDriver"`
	StorageDriver   string `json:"storageDriver"`
	// Images are the exact image IDs the run used (guest image first).
	Images         []string `json:"images"`
	ManifestSHA256 string   `json:"manifestSha256"`
}

// TupleOf derives the tuple from a run's header.
func TupleOf(r *Run) Tuple {
	e := r.Engine
	t := Tuple{
		Profile: r.Profile, ControllerOS: r.Controller.OS, ControllerArch: r.Controller.Arch, GoVersion: r.Controller.GoVersion,
		EngineVersion: e.Version, EngineAPI: e.APIVersion, EngineCommit: e.GitCommit,
		Containerd: e.ContainerdCommit, Runc: e.RuncCommit, Runtime: r.Runtime, Kernel: e.KernelVersion, OperatingSystem: e.OperatingSystem,
		CgroupVersion: e.CgroupVersion, CgroupDriver: e.CgroupDriver, StorageDriver: e.StorageDriver,
		Images: []string{}, ManifestSHA256: r.Manifest.SHA256,
	}
	if r.Image.ID != "" {
		t.Images = append(t.Images, r.Image.ID)
	}
	return t
}

// Label is a one-line rendering for matrix columns, e.g.
// "linux-x64-cgroupv1 · engine 20.10.24/API 1.41 · kernel 6.1 · cgroup v1/cgroupfs".
func (t Tuple) Label() string {
	return fmt.Sprintf("%s · engine %s/API %s · kernel %s · cgroup v%s/%s", t.Profile, t.EngineVersion, t.EngineAPI, t.Kernel, t.CgroupVersion, t.CgroupDriver)
}

// Lines renders the tuple as "key: value" lines for report headers; the
// runtime line only when the tuple records one.
func (t Tuple) Lines() []string {
	components := fmt.Sprintf("containerd: %s, runc: %s", t.Containerd, t.Runc)
	if t.Runtime != "" {
		components = fmt.Sprintf("OCI runtime: %s; %s", t.Runtime, components)
	}
	return []string{
		"profile: " + t.Profile,
		fmt.Sprintf("controller: %s/%s, %s", t.ControllerOS, t.ControllerArch, t.GoVersion),
		fmt.Sprintf("engine: %s (API %s, commit %s)", t.EngineVersion, t.EngineAPI, t.EngineCommit),
		components,
		fmt.Sprintf("kernel: %s (%s)", t.Kernel, t.OperatingSystem),
		fmt.Sprintf("cgroup: v%s/%s, storage: %s", t.CgroupVersion, t.CgroupDriver, t.StorageDriver),
		"images: " + strings.Join(t.Images, ", "),
		"manifest sha256: " + t.ManifestSHA256,
	}
}
