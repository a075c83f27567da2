package platforms

// linuxX64 is the reference profile: lane C's guest on each Engine tuple,
// and GitHub's hosted x64 runner.
var linuxX64 = Platform{
	Profile:   "linux-x64",
	Manifests: []Manifest{linuxX64Manifest},
	Rows: []Row{
		{
			Name: "lane-c",
			About: text(
				"Lane C (docs/lanes.md#lane-c) is lane B's module build in lane C's",
				"guest: linux-x64 admits datasets only on a stable release >= 29.1.4,",
				"so datasets is not_applicable there."),
			Manifest:    linuxX64Manifest.File,
			Engine:      LaneC("lane-b"),
			Runner:      laneCRunner,
			Tuple:       Tuple{Engine: "2.0.0-"},
			CIGate:      Required,
			ReleaseGate: Required,
			Waived:      []string{"datasets"},
		},
		{
			Name: "ref-29.1.3",
			About: text(
				"Lane C on the reference's baseline tuple (docs/lanes.md#engine-tuples)",
				"in Debian's guest (operatingSystem tells it from a hosted Ubuntu",
				"runner on the same release). 29.1.3 is below 29.1.4, so datasets is",
				"not_applicable there, as the reference says."),
			Manifest:     linuxX64Manifest.File,
			Engine:       LaneC("ref-29.1.3"),
			Runner:       laneCRunner,
			DispatchOnly: true,
			Tuple: Tuple{Engine: "29.1.3", EngineCommit: "fbf3ed2", Containerd: containerd222, Runc: runc134,
				StorageDriver: "overlayfs", OperatingSystem: "Debian GNU/Linux"},
			CIGate:      Informational,
			ReleaseGate: Required,
			ReleaseRan:  beforeWarmPool(linuxX64Manifest.File),
			Waived:      []string{"datasets"},
		},
		{
			Name: "ref-29.1.4",
			About: text(
				"The reference's dataset composition in lane C's guest: 29.1.4 with",
				"containerd 2.2.2, runc 1.3.4 and the containerd image store."),
			Manifest:     linuxX64Manifest.File,
			Engine:       LaneC("ref-29.1.4"),
			Runner:       laneCRunner,
			DispatchOnly: true,
			Tuple:        ref2914Tuple,
			CIGate:       Informational,
			ReleaseGate:  Required,
			ReleaseRan:   beforeWarmPool(linuxX64Manifest.File),
		},
		{
			Name: "current-29.7.2",
			About: text(
				"The current row in lane C's guest: the newest stable 29.x release",
				"with current containerd and runc."),
			Manifest:     linuxX64Manifest.File,
			Engine:       LaneC("current-29.7.2"),
			Runner:       laneCRunner,
			DispatchOnly: true,
			Tuple: Tuple{Engine: "29.7.2", EngineCommit: "6a43e3d", Containerd: "module-v2.4.2", Runc: "module-v1.5.3",
				StorageDriver: "overlayfs", OperatingSystem: "Debian GNU/Linux"},
			CIGate:      Informational,
			ReleaseGate: Required,
			ReleaseRan:  beforeWarmPool(linuxX64Manifest.File),
		},
		{
			Name: "hosted-ubuntu",
			About: text(
				"GitHub's ubuntu-24.04 runner (Docker with cgroup v2, systemd, AppArmor)",
				"with Docker Engine 29.1.3 from Docker's apt repository",
				"(docs/lanes.md#hosted-runners): below 29.1.4, datasets is not_applicable."),
			Manifest:    linuxX64Manifest.File,
			Engine:      HostedDockerCE(hostedDockerCE),
			Runner:      []string{"ubuntu-24.04"},
			Tuple:       Tuple{OperatingSystem: "Ubuntu"},
			CIGate:      Informational,
			ReleaseGate: Absent,
			Waived:      []string{"datasets"},
		},
	},
}

// laneCRunner is the self-hosted runner of lanes C and D.
var laneCRunner = []string{"self-hosted", "linux", "x64", "qualbox-lane-c"}

// hostedDockerCE is the reference Engine the hosted rows install, Docker
// Engine 29.1.3 (the runner image's own is older than the profiles' API
// 1.52).
const hostedDockerCE = "5:29.1.3-1~ubuntu.24.04~noble"

// The reference's containerd 2.2.2 and runc 1.3.4, by commit.
const (
	containerd222 = "301b2dac98f15c27117da5c8af12118a041a31d9"
	runc134       = "d6d73eb8c60246978da649ffe75ce5c8bca8f856"
)

// ref2914Tuple is Docker Engine 29.1.4 with containerd 2.2.2 and runc
// 1.3.4 in Debian's guest, lane C's or lane D's.
var ref2914Tuple = Tuple{Engine: "29.1.4", EngineCommit: "08440b6", Containerd: containerd222, Runc: runc134,
	StorageDriver: "overlayfs", OperatingSystem: "Debian GNU/Linux"}

var linuxX64Manifest = Manifest{
	File: "linux-x64.yaml",
	About: text(
		"Qualification catalogue of the `linux-x64` profile (cgroup v2, systemd",
		"cgroup driver, AppArmor docker-default, builtin seccomp, private cgroup",
		"namespaces) on lane C (docs/lanes.md#lane-c): a Debian 12 guest under QEMU",
		"TCG running lane B's pinned dockerd and runc with the systemd cgroup",
		"driver. The controller runs inside the guest, so the endpoint is the",
		"guest's own Engine socket.",
		"",
		"  make qualify-linux-x64        (scripts/lanec.sh run)",
		"",
		"Everything below the deadlines equals manifests/linux-x64-cgroupv1.yaml but",
		"engine-restart's restart command (the guest's docker.service) and",
		"warm-pool's maxIdle.",
		"The deadlines are policy data for an emulated CPU: under TCG a hardened",
		"container start is about 13x slower than native, so startup and cleanup",
		"get 300 s and 120 s."),
	Deadlines: EmulatedCPUDeadlines,
	Overrides: []Override{
		{Scenario: "admission", Params: []Param{
			{Key: "reject", YAML: "[linux-x64-cgroupv1]", Note: text(
				"This Engine is cgroup v2/systemd with AppArmor: the cgroup v1",
				"profile must be refused.")},
			{Key: "mustFail", YAML: `["/info CgroupVersion", "/info CgroupDriver"]`},
		}},
		EmulatedCPUWarmPool,
	},
}
