package platforms

import "slices"

// linuxX64CgroupV1 is the cgroup v1 host of lanes A and B, the project's
// own machine (docs/lanes.md#lane-a, #lane-b).
var linuxX64CgroupV1 = Platform{
	Profile:   "linux-x64-cgroupv1",
	Manifests: []Manifest{laneAManifest, laneBManifest},
	Rows: []Row{
		{
			Name: "lane-a",
			About: text(
				"Lane A (docs/lanes.md#lane-a): Debian 12's docker.io 20.10 on cgroup v1.",
				"Its Engine has no image mounts or containerd image store, so",
				"datasets is not_applicable there and not required; nor is",
				"engine-restart, which never restarts lane A's shared Engine."),
			Manifest:    laneAManifest.File,
			Engine:      EngineUp(),
			Runner:      cgroupV1Runner,
			Tuple:       Tuple{Engine: "20.10."},
			CIGate:      Required,
			ReleaseGate: Required,
			Waived:      []string{"datasets", "engine-restart"},
		},
		{
			Name:        "lane-b",
			About:       "Lane B (docs/lanes.md#lane-b): the Moby module build beside lane A.",
			Manifest:    laneBManifest.File,
			Engine:      EngineUpB(),
			Runner:      cgroupV1Runner,
			Tuple:       Tuple{Engine: "2.0.0-"},
			CIGate:      Required,
			ReleaseGate: Required,
		},
	},
}

// beforeWarmPool is the manifest file the committed reports of a row ran
// before the catalogue gained warm-pool and engine-restart
// (reports/manifests/), which those reports lack.
func beforeWarmPool(file string) *Ran {
	return &Ran{File: file, Lacks: []string{"warm-pool", "engine-restart"}}
}

// cgroupV1Runner is the self-hosted runner of lanes A and B.
var cgroupV1Runner = []string{"self-hosted", "linux", "x64", "qualbox-cgroupv1"}

var laneAManifest = Manifest{
	File: "linux-x64-cgroupv1.yaml",
	About: text(
		"Qualification catalogue of the linux-x64-cgroupv1 profile: Debian 12's",
		"docker.io 20.10.24 (API 1.41, cgroup v1/cgroupfs, no AppArmor) at the default",
		"socket, with a guest image built for the run and removed afterwards.",
		"",
		"  go run ./cmd/qualify run --manifest manifests/linux-x64-cgroupv1.yaml"),
	Overrides: []Override{
		{Scenario: "admission", Params: []Param{
			{Key: "reject", YAML: "[linux-x64]"},
			{Key: "mustFail", YAML: `["/info CgroupVersion", "/info CgroupDriver"]`},
		}},
		{Scenario: "controller-death", Note: text(
			"Default: every checkpoint of reserve and start, after (N) and before",
			"(N/before) its record is durable, plus exec; e.g. [0, 3/before, 8, exec].")},
		{Scenario: "datasets", Note: text(
			"A data-only image of the other architecture, shared by two sandboxes;",
			"not_applicable (with the admission error) where the Engine has no",
			"image mounts or containerd image store, as on lane A.")},
		{Scenario: "desktop-admission", Note: text(
			"Both Apple Silicon Desktop profiles against a synthetic Engine (no",
			`Docker Desktop runs); any Linux host. The real rows: README "Mac handoff".`)},
		{Scenario: "engine-restart", Params: []Param{}, Note: text(
			"No restart command: lane A's Engine is shared and never restarted by",
			"a run, so the scenario is not_applicable here (it runs on lane B).")},
	},
}

// laneBManifest is lane A's manifest at lane B's socket, so the two
// lanes' reports merge into one matrix; but lane B is the lane a run may
// restart, so its engine-restart restarts it.
var laneBManifest = func() Manifest {
	m := laneAManifest
	m.File = "linux-x64-cgroupv1-lane-b.yaml"
	m.Endpoint = "unix:///run/qualbox-moby/docker.sock"
	m.Overrides = slices.Clone(m.Overrides)
	m.Overrides[slices.IndexFunc(m.Overrides, func(o Override) bool { return o.Scenario == "engine-restart" })] = Override{
		Scenario: "engine-restart",
		Params: []Param{
			{Key: "restart", YAML: "[scripts/engine.sh, restart-b]"},
			{Key: "liveRestoreRestart", YAML: "[scripts/engine.sh, restart-b, --live-restore]"},
		},
		Note: text(
			"Lane B's own daemon, restarted by its bring-up script (the run's",
			"working directory is the checkout: make qualify-lane-b, CI's lane-b",
			"row): live-restore off as configured, then on, then back to off."),
	}
	m.About = text(
		"Qualification catalogue of the linux-x64-cgroupv1 profile on lane B: a",
		"current Moby Engine built from its Go module (`make engine-b`: dockerd",
		"v2.0.0-beta.24 with runc 1.3.4, API 1.56, containerd image store, seccomp",
		"profile=builtin) at its own socket beside lane A. Everything below the",
		"endpoint equals manifests/linux-x64-cgroupv1.yaml but engine-restart's",
		"restart commands (lane B is the lane a run may restart), so the two lanes'",
		"reports merge into one matrix.",
		"",
		"  make qualify-lane-b")
	return m
}()
