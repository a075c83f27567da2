package platforms

// linuxARM64 is lane D's arm64 guest and GitHub's hosted arm64 runner.
var linuxARM64 = Platform{
	Profile:   "linux-arm64",
	Manifests: []Manifest{linuxARM64Manifest},
	Rows: []Row{
		{
			Name: "lane-d",
			About: text(
				"Lane D (docs/lanes.md#lane-d): the linux-arm64 catalogue in the arm64",
				"guest under qemu-system-aarch64, on 29.1.4's tuple built for arm64."),
			Manifest:     linuxARM64Manifest.File,
			Engine:       LaneD("ref-29.1.4", ""),
			Runner:       laneCRunner,
			DispatchOnly: true,
			Tuple:        arm64Controller(ref2914Tuple),
			CIGate:       Informational,
			ReleaseGate:  Required,
		},
		{
			Name: "hosted-ubuntu-arm",
			About: text(
				"GitHub's ubuntu-24.04-arm runner with Docker Engine 29.1.3 (below",
				"29.1.4: datasets not_applicable, as on hosted-ubuntu)."),
			Manifest:    linuxARM64Manifest.File,
			Engine:      HostedDockerCE(hostedDockerCE),
			Runner:      []string{"ubuntu-24.04-arm"},
			Tuple:       arm64Controller(Tuple{OperatingSystem: "Ubuntu"}),
			CIGate:      Informational,
			ReleaseGate: Absent,
			Waived:      []string{"datasets"},
		},
	},
}

// arm64Controller is t with a linux/arm64 controller.
func arm64Controller(t Tuple) Tuple {
	t.ControllerOS, t.ControllerArch = "linux", "arm64"
	return t
}

// arm64Admission is admission on an arm64 Engine: every other Linux
// profile is for an amd64 controller.
var arm64Admission = Override{Scenario: "admission", Params: []Param{
	{Key: "reject", YAML: "[linux-x64, linux-x64-cgroupv1]", Note: text(
		"Every other Linux profile is for an amd64 controller, which the",
		"controller row alone would refuse: each is admitted as its own",
		"controller, so this arm64 Engine's own facts refuse it",
		"(linux-x64 differs from linux-arm64 in architecture only).")},
	{Key: "asController", YAML: "true"},
	{Key: "mustFail", YAML: `["/version Arch", "/info Architecture"]`},
}}

var linuxARM64Manifest = Manifest{
	File: "linux-arm64.yaml",
	About: text(
		"Qualification catalogue of the `linux-arm64` profile (arm64 daemon and",
		"images, cgroup v2, systemd cgroup driver, AppArmor docker-default, builtin",
		"seccomp, private cgroup namespaces) on lane D (docs/lanes.md#lane-d): a",
		"Debian 12 arm64 guest under qemu-system-aarch64 (TCG) running an Engine",
		"tuple built for arm64. The controller, the probe and the guest image are",
		"arm64 and run inside the guest, so the endpoint is the guest's own Engine",
		"socket.",
		"",
		"  make test-lane-d        (LANEC_ARCH=arm64 scripts/lanec.sh run)",
		"",
		"Everything but the profile and admission's rejections equals",
		"manifests/linux-x64.yaml, deadlines included (arm64 code under TCG runs at",
		"the speed of lane C's x86-64 guest)."),
	Deadlines: EmulatedCPUDeadlines,
	Overrides: []Override{arm64Admission, EmulatedCPUWarmPool},
}
