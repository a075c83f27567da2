package platforms

// The Docker Desktop profiles of an Apple Silicon Mac: the Mac handoff
// (README.md), whose rows stay informational until such a Mac runs them.
var (
	desktopNativeARM64  = desktop("desktop-native-arm64", "desktop-apple-virtualization-native-arm64", "linux/arm64 images run natively", "arm64")
	desktopRosettaAMD64 = desktop("desktop-rosetta-amd64", "desktop-apple-virtualization-rosetta-amd64", "linux/amd64 images run through Rosetta", "amd64")
)

// desktopScenarios are the scenarios that need no host cgroup observer:
// on macOS the containers run in Docker Desktop's Linux VM, whose /proc
// and /sys/fs/cgroup the controller cannot read.
var desktopScenarios = []string{"admission", "isolation", "lifecycle", "lost-engine-replies", "unsupported-quota", "datasets", "desktop-admission", "warm-pool"}

// desktop is the platform of a Docker Desktop profile on an Apple Silicon
// Mac with one row, row, whose images are of arch.
func desktop(row, profile, images, arch string) Platform {
	m := Manifest{
		File: profile + ".yaml",
		About: text(
			"Qualification catalogue of the "+profile+" profile: Docker Desktop on an",
			"Apple Silicon Mac with the Apple Virtualization framework, Enhanced Container",
			"Isolation off ("+images+"). It runs only on such a Mac: see",
			`README.md "Mac handoff" for the exact commands. The file runs as committed`,
			"(the gate pins its digest): `qualify run --image-archive",
			"qualbox-guest-linux-"+arch+".tar` (make release) supplies the guest image for",
			`"image: build", and `+"`--endpoint unix://$HOME/.docker/run/docker.sock`",
			"replaces Docker Desktop's default /var/run/docker.sock when that is disabled.",
			"",
			"Only scenarios that need no host cgroup observer are selected: on macOS the",
			"containers run in Docker Desktop's Linux VM, whose /proc and /sys/fs/cgroup",
			"the controller cannot read (the observer says so when asked)."),
		Only: desktopScenarios,
		Overrides: []Override{
			{Scenario: "admission", Params: []Param{
				{Key: "reject", YAML: "[linux-x64]"},
				{Key: "mustFail", YAML: `["controller"]`, Note: text(
					"On a darwin/arm64 controller the Linux profile is refused by its",
					"controller row, before any Engine request.")},
			}},
			{Scenario: "datasets", Unnoted: true},
			{Scenario: "desktop-admission", Unnoted: true},
		},
	}
	return Platform{
		Profile:   profile,
		Manifests: []Manifest{m},
		Rows: []Row{{
			Name: row,
			About: text(
				"Docker Desktop on an Apple Silicon Mac (README.md \"Mac handoff\"): a",
				"self-hosted runner with Docker Desktop, Apple Virtualization framework,",
				"ECI off. The manifest runs eight scenarios; the row requires all eight."),
			Manifest:    m.File,
			Engine:      DockerDesktop(),
			Runner:      []string{"self-hosted", "macOS", "ARM64", "qualbox-desktop"},
			Tuple:       Tuple{ControllerOS: "darwin", ControllerArch: "arm64"},
			CIGate:      Informational,
			ReleaseGate: Absent,
		}},
	}
}
