package platforms

// linuxARM64EmulatedAMD64 is lane D running amd64 images through
// qemu-user, the analogue of Docker Desktop's Rosetta profile.
var linuxARM64EmulatedAMD64 = Platform{
	Profile:   "linux-arm64-emulated-amd64",
	Manifests: []Manifest{linuxARM64EmulatedAMD64Manifest},
	Rows: []Row{{
		Name: "lane-d-emulated-amd64",
		About: text(
			"Lane D with qemu-user: amd64 images on the arm64 Engine",
			"(docs/lanes.md#lane-d). Informational: emulation may change results."),
		Manifest:     linuxARM64EmulatedAMD64Manifest.File,
		Engine:       LaneD("ref-29.1.4", "amd64"),
		Runner:       laneCRunner,
		DispatchOnly: true,
		Tuple:        arm64Controller(ref2914Tuple),
		CIGate:       Informational,
		ReleaseGate:  Informational,
	}},
}

var linuxARM64EmulatedAMD64Manifest = Manifest{
	File: "linux-arm64-emulated-amd64.yaml",
	About: text(
		"Qualification catalogue of the `linux-arm64-emulated-amd64` profile on",
		"lane D with an emulator (docs/lanes.md#lane-d): linux/amd64 guest images",
		"on the arm64 guest's Engine, whose amd64 code runs through qemu-user",
		"(binfmt_misc, F flag), the analogue of Docker Desktop's Rosetta profile.",
		"The controller is arm64 and runs inside the guest; the workload is x86_64",
		"code, about 23x slower than arm64 code under the same TCG, so this runs",
		"the Docker Desktop Rosetta manifest's scenarios and the exhaustion",
		"scenarios, whose results show what emulation changes (the emulator's own",
		"memory and threads count in the sandbox's cgroup).",
		"",
		"  LANEC_EMULATE=amd64 make test-lane-d",
		""),
	Deadlines: EmulatedCPUDeadlines,
	Overrides: []Override{arm64Admission, EmulatedCPUWarmPool},
}
