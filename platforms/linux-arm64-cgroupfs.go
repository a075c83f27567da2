package platforms

// linuxARM64Cgroupfs is lane D's arm64 guest with dockerd's cgroupfs
// driver: the cgroup shape of Docker Desktop's Linux VM on Apple Silicon.
var linuxARM64Cgroupfs = Platform{
	Profile:   "linux-arm64-cgroupfs",
	Manifests: []Manifest{linuxARM64CgroupfsManifest},
	Rows: []Row{{
		Name: "lane-d-cgroupfs",
		About: text(
			"Lane D with the cgroupfs cgroup driver, the Docker Desktop VM's",
			"(docs/lanes.md#lane-d), on 29.1.4's tuple built for arm64."),
		Manifest:     linuxARM64CgroupfsManifest.File,
		Engine:       LaneD("ref-29.1.4", ""),
		Runner:       laneCRunner,
		DispatchOnly: true,
		Tuple:        arm64Controller(ref2914Tuple),
		CIGate:       Informational,
		ReleaseGate:  Informational,
	}},
}

var linuxARM64CgroupfsManifest = Manifest{
	File: "linux-arm64-cgroupfs.yaml",
	About: text(
		"Qualification catalogue of the `linux-arm64-cgroupfs` profile (arm64",
		"daemon and images, cgroup v2 with the cgroupfs cgroup driver: the shape of",
		"Docker Desktop's Linux VM on Apple Silicon; AppArmor docker-default,",
		"builtin seccomp, private cgroup namespaces) on lane D",
		"(docs/lanes.md#lane-d) with LANEC_CGROUP_DRIVER=cgroupfs: a Debian 12",
		"arm64 guest under qemu-system-aarch64 (TCG) whose dockerd, an Engine",
		"tuple built for arm64, uses the cgroupfs driver. The controller, the",
		"probe and the guest image are arm64 and run inside the guest, so the",
		"endpoint is the guest's own Engine socket.",
		"",
		"  make test-lane-d CGROUP_DRIVER=cgroupfs",
		"      (LANEC_ARCH=arm64 LANEC_CGROUP_DRIVER=cgroupfs scripts/lanec.sh run)",
		"",
		"Everything but the profile and admission's rejection equals",
		"manifests/linux-arm64.yaml."),
	Deadlines: EmulatedCPUDeadlines,
	Overrides: []Override{{Scenario: "admission", Params: []Param{
		{Key: "reject", YAML: "[linux-arm64]", Note: text(
			"linux-arm64 differs from this profile in the cgroup driver only:",
			"this Engine's cgroupfs driver refuses it.")},
		{Key: "mustFail", YAML: `["/info CgroupDriver"]`},
	}}, EmulatedCPUWarmPool},
}
