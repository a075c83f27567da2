package evidence

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/qualbox/qualbox/driver"
)

// Schema identifies the evidence JSON layout of both Run and Scenario.
const Schema = "qualbox.evidence.v1"

// Kind is a scenario verdict kind.
type Kind string

// Verdict kinds (docs/qualification.md#evidence).
const (
	Passed        Kind = "passed"
	Failed        Kind = "failed"
	Skipped       Kind = "skipped"
	NotApplicable Kind = "not_applicable"
	// Flaky is a scenario of a repeated campaign whose runs did not all
	// reach the same verdict (some failed, some did not): it fails the run
	// and the gate like Failed (docs/qualification.md#gate).
	Flaky Kind = "flaky"
)

// Verdict is {"kind":"passed"}, {"kind":"failed"}, {"kind":"skipped",
// "reason":...} or {"kind":"not_applicable","reason":...}.
type Verdict struct {
	Kind   Kind   `json:"kind"`
	Reason string `json:"reason,omitempty"`
}

// OK reports whether the verdict does not fail the run: passed, skipped and
// not_applicable do not; failed and flaky do.
func (v Verdict) OK() bool { return v.Kind != Failed && v.Kind != Flaky }

// String renders "passed" or "skipped (reason)".
func (v Verdict) String() string {
	if v.Reason == "" {
		return string(v.Kind)
	}
	return string(v.Kind) + " (" + v.Reason + ")"
}

// Check is one comparison of what was requested (Want) with what was
// observed (Got), both rendered as text.
type Check struct {
	Name string `json:"name"`
	Want string `json:"want"`
	Got  string `json:"got"`
	OK   bool   `json:"ok"`
}

// Resource is one Engine resource a scenario's sandbox created, as recorded
// in its recovery record, and whether an exact-ID inspection after cleanup
// found it absent.
type Resource struct {
	// Sandbox is the owning sandbox ID.
	Sandbox string `json:"sandbox"`
	// Role is compute, storage, export or network.
	Role string `json:"role"`
	// Name is the resource's exact planned name.
	Name string `json:"name"`
	// Identity is planned, creating or identified.
	Identity string `json:"identity"`
	// ID is the Engine ID (the volume name for storage); empty unless
	// identified.
	ID string `json:"id,omitempty"`
	// Absent is true when the Engine answered 404 for the resource after
	// cleanup, false when it is still present, null when not checked.
	Absent *bool `json:"absentAfterCleanup"`
	// Probe says how absence was established, e.g. "GET container <id>: 404".
	Probe string `json:"probe,omitempty"`
}

// Timing is a wall-clock interval.
type Timing struct {
	Start      time.Time `json:"start"`
	End        time.Time `json:"end"`
	DurationMs int64     `json:"durationMs"`
}

// NewTiming returns the interval from start to end by the wall clock (a
// monotonic clock reading is dropped), so that DurationMs is exactly
// End - Start in whole milliseconds, as verification requires.
func NewTiming(start, end time.Time) Timing {
	start, end = start.Round(0).UTC(), end.Round(0).UTC()
	return Timing{Start: start, End: end, DurationMs: end.Sub(start).Milliseconds()}
}

// Duration returns End - Start.
func (t Timing) Duration() time.Duration { return time.Duration(t.DurationMs) * time.Millisecond }

// Scenario is one scenario's evidence (<output>/<nn>-<name>/evidence.json).
type Scenario struct {
	Schema string `json:"schema"`
	// Index is the 1-based position in the manifest.
	Index int    `json:"index"`
	Name  string `json:"name"`
	// Repeat is the 1-based repetition of a campaign run with --repeat N > 1
	// (Index then numbers every run of the campaign); 0 otherwise.
	Repeat int `json:"repeat,omitempty"`
	// Namespace is the scenario's own sandbox namespace.
	Namespace string `json:"namespace"`
	// Params are the manifest parameters as given.
	Params map[string]any `json:"params"`
	// Requested is what the scenario asked for (policy, profile, process).
	Requested map[string]any `json:"requested"`
	// Observed is what the Engine and the guest reported.
	Observed map[string]any `json:"observed"`
	Checks   []Check        `json:"checks"`
	Verdict  Verdict        `json:"verdict"`
	// Failure is the scenario's original error, kept apart from cleanup.
	Failure string `json:"failure,omitempty"`
	// CleanupErrors are failures of stop, destroy or absence checks that
	// happened after the scenario's own outcome was settled.
	CleanupErrors []string   `json:"cleanupErrors"`
	Resources     []Resource `json:"resources"`
	// Abandoned is set when the scenario did not return within its grace
	// period: it failed, and the run started nothing after it (the
	// scenarios that did not start are listed as not run).
	Abandoned bool   `json:"abandoned,omitempty"`
	Timing    Timing `json:"timing"`
}

// PassedChecks counts the checks that passed.
func (s *Scenario) PassedChecks() int {
	n := 0
	for _, c := range s.Checks {
		if c.OK {
			n++
		}
	}
	return n
}

// Controller describes the machine running the harness.
type Controller struct {
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	GoVersion string `json:"goVersion"`
	Hostname  string `json:"hostname,omitempty"`
}

// Host is the controller host's kernel, init, AppArmor and cgroup
// facts, each as read there ("" when it could not be read).
type Host struct {
	// Kernel is the kernel release, "6.1.0-50-amd64"
	// (/proc/sys/kernel/osrelease), and KernelBuild its build line,
	// "#1 SMP PREEMPT_DYNAMIC Debian 6.1.158-1 (2026-11-10)"
	// (/proc/sys/kernel/version).
	Kernel      string `json:"kernel"`
	KernelBuild string `json:"kernelBuild"`
	// Systemd is the first line of `systemctl --version` when PID 1 is
	// systemd, "systemd 252 (252.39-1~deb12u1)"; "" when PID 1 is not.
	Systemd string `json:"systemd"`
	// AppArmor is "enabled", "disabled" or "absent" (the kernel module's
	// enabled parameter), then the first line of `apparmor_parser
	// --version` when that parser is installed.
	AppArmor string `json:"appArmor"`
	// LSM is the kernel's active security modules in order
	// (/sys/kernel/security/lsm), "lockdown,capability,apparmor".
	LSM string `json:"lsm"`
	// Cgroup is "2" for a unified hierarchy at /sys/fs/cgroup, "1" for
	// cgroup v1 (with " hybrid" when a cgroup2 hierarchy is mounted at
	// /sys/fs/cgroup/unified); CgroupControllers lists the controllers
	// available there, space-separated.
	Cgroup            string `json:"cgroup"`
	CgroupControllers string `json:"cgroupControllers"`
	// Binfmt lists the enabled binfmt_misc handlers of the host's kernel,
	// one "<name> <interpreter> flags <flags>" each (for example
	// "qemu-x86_64 /usr/bin/qemu-x86_64-static flags F"): the user-mode
	// emulators through which an Engine there runs other architectures'
	// images. Empty when there are none or binfmt_misc is not mounted.
	Binfmt []string `json:"binfmt,omitempty"`
	// BinfmtHandlers are the same handlers with their match (offset,
	// magic, mask), from which the verifier derives which architecture's
	// executables each one runs (BinfmtHandler.ELFArchitecture).
	BinfmtHandlers []BinfmtHandler `json:"binfmtHandlers,omitempty"`
	// BinfmtMisc is the state of the kernel's binfmt_misc as read at
	// /proc/sys/fs/binfmt_misc: "enabled" or "disabled" (its status file,
	// which switches every handler), "not mounted" (no status file
	// there), or "unreadable (...)" naming the file that could not be read
	// and why. Only "enabled" and "disabled" say that Binfmt lists every
	// enabled handler, so "enabled" with an empty Binfmt is a host
	// without handlers, and "unreadable" one whose handlers are not
	// known. "" in reports made before it was recorded.
	BinfmtMisc string `json:"binfmtMisc,omitempty"`
}

// Manifest identifies the manifest a run executed.
type Manifest struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// Image identifies the guest image a run used.
type Image struct {
	// ID is the exact "sha256:" image ID.
	ID string `json:"id"`
	// Source is "build" when the run built it, "archive" when the run
	// took it from a guest image archive (qualify run --image-archive, for
	// a manifest that says "image: build"), "manifest" when the manifest
	// named it.
	Source string `json:"source"`
	// ArchiveSHA256 and ArchiveID, for source "archive", are the hex
	// SHA-256 of the archive file the run checked and loaded, and the
	// image ID (config digest) it declares, which dist/GUEST-IMAGES lists:
	// what ties the loaded image to a release.
	ArchiveSHA256 string `json:"archiveSha256,omitempty"`
	ArchiveID     string `json:"archiveId,omitempty"`
	// Removed is set when the run built or loaded the image and then
	// removed it (true) or failed to (false, with RemoveError); null when
	// it was kept, or was on the Engine before the run.
	Removed     *bool  `json:"removed,omitempty"`
	RemoveError string `json:"removeError,omitempty"`
}

// Admission is the run header's admission of the manifest profile.
type Admission struct {
	OK     bool           `json:"ok"`
	Checks []driver.Check `json:"checks"`
	Error  string         `json:"error,omitempty"`
}

// ScenarioSummary is one scenario's line in the run evidence.
type ScenarioSummary struct {
	Index      int     `json:"index"`
	Name       string  `json:"name"`
	Dir        string  `json:"dir"`
	Verdict    Verdict `json:"verdict"`
	Checks     int     `json:"checks"`
	Passed     int     `json:"checksPassed"`
	DurationMs int64   `json:"durationMs"`
	// Detail is the first line of the failure, or the first failed check.
	Detail string `json:"detail,omitempty"`
	// Repeat is the 1-based repetition of a campaign run with --repeat
	// N > 1, whose Scenarios list every run of every manifest entry; 0
	// otherwise.
	Repeat int `json:"repeat,omitempty"`
	// Abandoned is the scenario evidence's Abandoned.
	Abandoned bool `json:"abandoned,omitempty"`
}

// Campaign says how the scenarios of a run were executed.
type Campaign struct {
	// Repeat is how many times the manifest's scenarios ran (>= 1).
	Repeat int `json:"repeat"`
	// Parallel is the most scenarios that ran at once (>= 1).
	Parallel int `json:"parallel"`
	// Rounds are the repetitions in order, each with the order in which its
	// scenarios started.
	Rounds []CampaignRound `json:"rounds"`
	// Scenarios count, per manifest entry, its runs and passes, with the
	// verdict they combine to (CombineRuns): flaky when some runs failed
	// and others did not.
	Scenarios []CampaignScenario `json:"scenarios"`
}

// String renders "isolation: passed 20/20" or "lifecycle: flaky (passed
// 19 of 20)".
func (t CampaignScenario) String() string {
	if t.Verdict.Kind == Flaky {
		return fmt.Sprintf("%s: %s", t.Name, t.Verdict)
	}
	return fmt.Sprintf("%s: %s %d/%d", t.Name, t.Verdict.Kind, t.Passes, t.Runs)
}

// CampaignScenario is one manifest entry's tally over a campaign's runs.
type CampaignScenario struct {
	// Index is the 1-based position in the manifest.
	Index   int     `json:"index"`
	Name    string  `json:"name"`
	Runs    int     `json:"runs"`
	Passes  int     `json:"passes"`
	Verdict Verdict `json:"verdict"`
}

// String renders "repeat 20, parallel 1".
func (c *Campaign) String() string {
	return fmt.Sprintf("repeat %d, parallel %d", c.Repeat, c.Parallel)
}

// CampaignRound is one repetition of the manifest's scenarios.
type CampaignRound struct {
	Repeat int `json:"repeat"`
	// Order lists the scenario directories in the order they started.
	Order []string `json:"order"`
	// Exclusive lists the directories that ran alone because their
	// scenario shares something with others (scenario.Exclusive).
	Exclusive []string `json:"exclusive,omitempty"`
}

// Run is the run-level evidence (<output>/evidence.json).
type Run struct {
	Schema     string     `json:"schema"`
	Profile    string     `json:"profile"`
	Endpoint   string     `json:"endpoint"`
	Manifest   Manifest   `json:"manifest"`
	Controller Controller `json:"controller"`
	// Host is what the controller read of the host it runs on (Linux
	// controllers; nil elsewhere and in reports made before it was
	// recorded). Where the Engine runs on the same kernel (every Linux
	// lane, the lane C guest, a hosted runner) it is the Engine's host.
	Host   *Host              `json:"host,omitempty"`
	Engine driver.EngineFacts `json:"engine"`
	// Runtime is the OCI runtime every sandbox of the run requested and
	// read back (HostConfig.Runtime): the profile's `runtime`, e.g. "runc".
	// Empty in a run without an Engine and in reports made before it was
	// recorded.
	Runtime string `json:"runtime,omitempty"`
	// EngineBuild says how the Engine was built, as the operator recorded
	// it (`qualify run --engine-build`; lane C gives its Engine tuple's
	// VERSIONS, docs/lanes.md#engine-tuples): one line per binary. It is a
	// signed statement of the run's operator, not read from the Engine.
	EngineBuild []string `json:"engineBuild,omitempty"`
	// ImageInputs say what the virtual machine image the Engine and the
	// controller ran in was assembled from, as the operator recorded it
	// (`qualify run --image-inputs`; lanes C and D give their guest's
	// /etc/qualbox-image-inputs): suite, architecture, cgroup driver,
	// package list, recipe digest, kernel package, Engine tuple digest,
	// cache key, then the installed packages' versions, one
	// "<name> <value>" line each (ImageInputs, docs/lanes.md#image-inputs).
	// A signed statement of the run's operator; verification checks its
	// shape and its agreement with the rest of the header.
	ImageInputs []string  `json:"imageInputs,omitempty"`
	Admission   Admission `json:"admission"`
	Image       Image     `json:"image"`
	// Tuple is the platform tuple this run qualifies (derived from the
	// fields above with TupleOf).
	Tuple Tuple `json:"tuple"`
	// Posture is the runtime posture derived from Engine with the
	// advisories this qualify build knows (PostureOf); nil in reports
	// made before it was recorded.
	Posture *Posture `json:"posture,omitempty"`
	// Policy is the manifest's normalized policy.
	Policy json.RawMessage `json:"policy"`
	User   driver.User     `json:"user"`
	// Harness identifies the qualify build and scenario catalogue that
	// made the run; absent in reports made before it was recorded.
	Harness *Harness `json:"harness,omitempty"`
	// Interrupted is set when a signal cancelled the run.
	Interrupted bool `json:"interrupted,omitempty"`
	// Selection is set when qualify run --only or --skip left scenarios
	// out: the report is partial (docs/qualification.md#partial-reports).
	Selection *Selection        `json:"selection,omitempty"`
	Scenarios []ScenarioSummary `json:"scenarios"`
	// Campaign says how the scenarios ran (repeat count, parallelism and
	// per-round order); nil for a plain sequential run of each once.
	Campaign *Campaign `json:"campaign,omitempty"`
	// Verdict is failed when any scenario failed, passed otherwise.
	Verdict Verdict `json:"verdict"`
	Timing  Timing  `json:"timing"`
}
