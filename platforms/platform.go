package platforms

// Platform is one profile with its manifests and rows.
type Platform struct {
	// Profile names the profile, profiles/profiles/<Profile>.yaml.
	Profile string
	// Manifests are the profile's manifests, in the order their rows are
	// listed; every one is run by at least one row.
	Manifests []Manifest
	// Rows are the profile's rows of the release matrix, in matrix order.
	Rows []Row
}

// Manifest is one manifest file of a platform: how a run of its profile
// is configured and which scenarios it runs with which parameters.
type Manifest struct {
	// File is the manifest's file name under manifests/, e.g.
	// "linux-x64.yaml".
	File string
	// About is the manifest's header comment, one line of text per line
	// (an empty line is a lone "#").
	About string
	// Endpoint is the Engine socket, "unix:///abs/path"; empty means
	// DefaultEndpoint.
	Endpoint string
	// Deadlines are the policy's startup and cleanup deadlines; zero
	// fields take DefaultDeadlines' values.
	Deadlines Deadlines
	// Only, when not empty, narrows the catalogue to these scenarios,
	// which still run in catalogue order; empty runs the whole catalogue.
	Only []string
	// Overrides change catalogue entries for this manifest, at most one
	// per scenario.
	Overrides []Override
}

// DefaultEndpoint is the Engine socket of a manifest that names none.
const DefaultEndpoint = "unix:///var/run/docker.sock"

// Deadlines are a sandbox policy's deadlines in milliseconds
// (docs/contract.md: policy.deadlines).
type Deadlines struct {
	StartupMs, CleanupMs int
}

// DefaultDeadlines are the deadlines of a manifest that sets none: a
// native CPU's.
var DefaultDeadlines = Deadlines{StartupMs: 60000, CleanupMs: 30000}

// EmulatedCPUDeadlines are the deadlines of a manifest whose Engine runs
// under QEMU TCG, where a hardened container start is about 13x slower
// than native (docs/lanes.md#lane-c).
var EmulatedCPUDeadlines = Deadlines{StartupMs: 300000, CleanupMs: 120000}

// EmulatedCPUWarmPool is warm-pool's entry in a manifest whose Engine runs
// under QEMU's TCG: a sandbox's start there takes seconds, so the expiry
// case's maxIdle is 30 s, well above the pool's fill.
var EmulatedCPUWarmPool = Override{Scenario: "warm-pool",
	Params: []Param{{Key: "size", YAML: "4"}, {Key: "idleMs", YAML: "30000"}},
	Note: `A pool of 4 sandboxes per case (docs/qualification.md#warm-pool);
the expiry case's maxIdle is 30 s, well above a start under TCG.`}

// Override changes one catalogue entry in one manifest.
type Override struct {
	// Scenario is the catalogue entry's name.
	Scenario string
	// Params, when not nil, replace the entry's parameters (an empty,
	// non-nil list drops them).
	Params []Param
	// Note, when not empty, replaces the entry's note; Unnoted drops it.
	Note    string
	Unnoted bool
}

// Row is one row of the release matrix: a profile's manifest run on one
// runner against one Engine, gated by the gate policies.
type Row struct {
	// Name names the row in the gate policies, the workflow and the gate
	// matrix, e.g. "lane-a".
	Name string
	// About is the row's comment in the gate policies and the workflow,
	// one line of text per line.
	About string
	// Manifest is the File of one of the platform's Manifests.
	Manifest string
	// Engine says how the row's Engine is brought up, which also decides
	// the workflow job that runs it and the key that signs its reports.
	Engine BringUp
	// Runner is the runs-on labels of the workflow job (one label for a
	// hosted runner, e.g. "ubuntu-24.04").
	Runner []string
	// DispatchOnly rows run only when the workflow is dispatched by hand
	// (their inputs rarely change; committed reports stand for them).
	DispatchOnly bool
	// Tuple pins the Engine tuple a report of the row must have, so that
	// the row's reports are told apart from other rows of the profile.
	Tuple Tuple
	// CIGate is the row's requirement in .github/gate-policy.yaml, which
	// gates every workflow run; every row has one.
	CIGate Requirement
	// ReleaseGate is the row's requirement in reports/gate-policy.yaml,
	// the release gate over the committed reports (Absent: not there).
	ReleaseGate Requirement
	// Waived are scenarios of the manifest the gates do not require of
	// the row (one that is not_applicable on its Engine), as About says.
	Waived []string
	// ReleaseRan, when set, is the manifest the row's committed reports
	// ran, from before the catalogue grew: the release gate pins it
	// beside the current manifest. The row still requires Required; the
	// gate requires of a report only the scenarios its own pinned
	// manifest lists (docs/qualification.md#gate), so a report of this
	// one is judged by what it ran and one of the current manifest by
	// everything. The next campaign's reports retire it.
	ReleaseRan *Ran
}

// Ran is a manifest that committed reports ran, kept byte for byte
// because the one generated now differs from it (reports record the
// manifest's digest, and the gate pins manifests by digest).
type Ran struct {
	// File is its name under reports/manifests/, e.g. "linux-x64.yaml".
	File string
	// Lacks are the scenarios the row's manifest runs now and this one
	// does not, in run order: the generator checks the file against them
	// and names them in the row's comment.
	Lacks []string
}

// Tuple is the part of a report's signed Engine tuple a row pins
// (docs/qualification.md#rows); empty fields match anything. The gate
// policies' row fields of the same names.
type Tuple struct {
	// Engine is the Engine version exactly ("29.1.4"), or a prefix of it
	// ending in "." or "-" ("20.10.", "2.0.0-").
	Engine string
	// EngineCommit is /version GitCommit ("08440b6"); Containerd and Runc
	// are the commits /info reports.
	EngineCommit, Containerd, Runc string
	// StorageDriver is /info Driver ("overlayfs").
	StorageDriver string
	// OperatingSystem is a prefix of /info OperatingSystem ("Ubuntu").
	OperatingSystem string
	// ControllerOS and ControllerArch are the controller's GOOS and
	// GOARCH.
	ControllerOS, ControllerArch string
}

// Requirement is how a gate policy holds a row.
type Requirement int

const (
	// Absent rows are not in the policy.
	Absent Requirement = iota
	// Informational rows are pending without a report, and their
	// failures do not fail the gate (`required: false`).
	Informational
	// Required rows fail the gate when their report is missing or fails
	// (`required: true`).
	Required
)

func (r Requirement) String() string {
	switch r {
	case Absent:
		return "absent"
	case Informational:
		return "informational"
	case Required:
		return "required"
	}
	return "Requirement(?)"
}
