package profiles

// Profile is one validated platform profile. Field names follow the YAML
// document (shown in backquotes); every field is required unless its comment
// says otherwise.
type Profile struct {
	// Name is the profile's name, equal to its file name without ".yaml"
	// (`name`), for example "linux-x64".
	Name string
	// BackendRevision is the driver revision bound into recovery records
	// (`backendRevision`), "engine-<min API>-v<N>-<name>", for example
	// "engine-1.52-v4-linux-x64" (docs/contract.md#recovery).
	// Revisions are unique across profiles.
	BackendRevision string
	// Controller is the platform of the process that talks to the Engine
	// (`controller`), in GOOS/GOARCH terms.
	Controller Platform
	// Daemon is what the Engine's /version and /info must report (`daemon`).
	Daemon Daemon
	// Image is the workload image's platform (`image`), checked against the
	// image inspect's Os ("linux") and Architecture.
	Image Image
	// Runtime is the OCI runtime every sandbox container requests as
	// HostConfig.Runtime and must read back (`runtime`): a name the
	// Engine's /info Runtimes lists, e.g. "runc"
	// (docs/contract.md#profiles-and-admission).
	Runtime string
	// Cgroup is the Engine's cgroup hierarchy (`cgroup`).
	Cgroup Cgroup
	// AppArmor is the AppArmor expectation (`appArmor`).
	AppArmor AppArmor
	// Seccomp lists the accepted seccomp security options (`seccomp`).
	Seccomp Seccomp
	// Datasets is what shared read-only datasets additionally require
	// (`datasets`; docs/contract.md#datasets). It applies only
	// when a caller attaches at least one dataset.
	Datasets DatasetRequirements
	// Qualification records whether qualbox evidence exists for the profile
	// (`qualification`).
	Qualification Qualification
}

// Platform is an operating system and CPU architecture in Go's GOOS/GOARCH
// vocabulary ("linux", "darwin"; "amd64", "arm64").
type Platform struct {
	// OS is the GOOS value (`os`).
	OS string
	// Architecture is the GOARCH value (`architecture`).
	Architecture string
}

// Daemon is the expected Docker Engine daemon
// (docs/contract.md#profiles-and-admission).
type Daemon struct {
	// Architecture is the required /version Arch (`architecture`), "amd64" or
	// "arm64". /version Os must be "linux" for every profile.
	Architecture string
	// InfoArchitectures lists the accepted /info Architecture values
	// (`infoArchitectures`), for example ["amd64", "x86_64"]; it includes
	// Architecture.
	InfoArchitectures []string
	// MinAPIVersion is the lowest Engine API version the profile admits
	// (`minAPIVersion`), "1.<minor>": /version ApiVersion must be at least
	// this and MinAPIVersion at most this.
	MinAPIVersion string
	// Desktop reports whether the daemon is Docker Desktop (`desktop`).
	Desktop bool
	// OperatingSystem is the /info OperatingSystem value Desktop requires
	// (`operatingSystem`), exactly "Docker Desktop" when Desktop is true and
	// absent (empty) otherwise; a non-Desktop profile rejects
	// "Docker Desktop".
	OperatingSystem string
}

// DesktopOperatingSystem is the /info OperatingSystem of Docker Desktop.
const DesktopOperatingSystem = "Docker Desktop"

// Image is the expected workload image platform
// (docs/contract.md#profiles-and-admission).
type Image struct {
	// Architecture is the required image inspect Architecture
	// (`architecture`), "amd64" or "arm64"; Os is always "linux".
	Architecture string
}

// Cgroup is the expected cgroup hierarchy as /info reports it.
type Cgroup struct {
	// Version is the /info CgroupVersion (`version`), 1 or 2.
	Version int
	// Driver is the /info CgroupDriver (`driver`), "systemd" or "cgroupfs".
	Driver string
	// Namespace says how private cgroup namespaces are established
	// (`namespace`).
	Namespace CgroupNamespace
}

// CgroupNamespace says how a profile establishes the private cgroup
// namespace every profile requires.
type CgroupNamespace struct {
	// SecurityOption requires "name=cgroupns" in /info SecurityOptions
	// (`securityOption`). cgroup v1 daemons never report it, so it must be
	// false for cgroup version 1.
	SecurityOption bool
	// PerContainerReadback requires each container to be created with
	// HostConfig.CgroupnsMode "private" and read back as such
	// (`perContainerReadback`). It must be true: no profile admits a shared
	// cgroup namespace.
	PerContainerReadback bool
}

// AppArmor is the AppArmor expectation.
type AppArmor struct {
	// Daemon is "enabled" ("name=apparmor" must be in /info
	// SecurityOptions) or "absent" (it must not be) (`daemon`).
	Daemon string
	// WorkloadProfile is the running container's AppArmorProfile
	// (`workloadProfile`): non-empty, for example "docker-default", when
	// Daemon is "enabled", and "" when it is "absent".
	WorkloadProfile string
}

// AppArmor daemon expectations.
const (
	AppArmorEnabled = "enabled"
	AppArmorAbsent  = "absent"
)

// Seccomp lists the accepted seccomp security options.
type Seccomp struct {
	// SecurityOptions are the /info SecurityOptions entries of which at
	// least one must be present (`securityOptions`), each
	// "name=seccomp,profile=<default profile name>". Engines before 25
	// report "profile=default", later ones "profile=builtin"; both mean the
	// Engine's built-in default profile.
	SecurityOptions []string
}

// DatasetRequirements is what shared read-only dataset attachments require
// beyond the execution profile (docs/contract.md#datasets).
type DatasetRequirements struct {
	// MinEngineVersion is the lowest stable /version Version,
	// "<major>.<minor>.<patch>" (`minEngineVersion`), for example "29.1.4".
	MinEngineVersion string
	// MinAPIVersion is the lowest Engine API version with the needed
	// `type: image` mounts (`minAPIVersion`), at least "1.48".
	MinAPIVersion string
	// StorageDriver is the required /info Driver (`storageDriver`), for
	// example "overlayfs".
	StorageDriver string
	// DriverType is the required value of the single "driver-type" entry in
	// /info DriverStatus (`driverType`), for example
	// "io.containerd.snapshotter.v1".
	DriverType string
	// ModuleBuilds pins Engines built from the Moby Go module that the
	// profile admits for datasets besides stable releases
	// (`moduleBuilds`, optional, default none). Such a build reports the
	// module and its version in /version's Engine component details
	// ("Module", "ModuleVersion"); its Version is the module version
	// without "v" when stamped. A pinned build is admitted by exact match
	// only, never by ordering: a pre-release such as "v2.0.0-beta.24" is
	// not comparable with a stable Engine release, so it is never read as
	// one (docs/contract.md#profiles-and-admission).
	ModuleBuilds []ModuleBuild
}

// ModuleBuild is one exact Moby Go module build.
type ModuleBuild struct {
	// Module is the module path (`module`), "github.com/moby/moby/v2".
	Module string
	// Version is the exact module version (`version`), for example
	// "v2.0.0-beta.24".
	Version string
}

// Qualification is a profile's qualification state in qualbox.
type Qualification struct {
	// Status is "pending" (no committed qualbox campaign report) or
	// "qualified" (`status`).
	Status string
	// Note says what evidence exists or is missing (`note`), free text.
	Note string
}

// Qualification statuses.
const (
	StatusPending   = "pending"
	StatusQualified = "qualified"
)

// UnameMachine is uname(2)'s machine name of a GOARCH, as a workload of
// that architecture sees it (natively or through an emulator): "x86_64"
// for amd64, "aarch64" for arm64, else the GOARCH itself.
func UnameMachine(goarch string) string {
	switch goarch {
	case "amd64":
		return "x86_64"
	case "arm64":
		return "aarch64"
	}
	return goarch
}
