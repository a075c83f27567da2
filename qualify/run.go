package qualify

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/internal/exitcode"
	"github.com/qualbox/qualbox/profiles"
	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/evidence"
	"github.com/qualbox/qualbox/qualify/manifest"
	"github.com/qualbox/qualbox/qualify/scenario"
	"github.com/qualbox/qualbox/sandboxapi"
)

// Output file names: the report's file set is evidence.Layout.
const (
	EvidenceFile = evidence.RunFile
	SummaryFile  = evidence.SummaryFile
	JUnitFile    = evidence.JUnitFile
)

// Config is one run.
type Config struct {
	// Manifest is the parsed manifest.
	Manifest *manifest.Manifest
	// Output is the output directory; it must not exist or be empty.
	Output string
	// Registry resolves the manifest's scenario names.
	Registry scenario.Registry
	// Engine is a client of the manifest's Engine, used for read-only
	// absence checks. When nil (hermetic tests) the run header has no
	// Engine facts and resources are not checked.
	Engine *client.Client
	// ImageID is the exact guest image ID.
	ImageID string
	// ImageSource is "build", "archive" or "manifest" (evidence.Image).
	ImageSource string
	// ImageArchiveSHA256 and ImageArchiveID identify the guest image
	// archive of source "archive" (evidence.Image).
	ImageArchiveSHA256, ImageArchiveID string
	// EngineBuild is how the Engine was built (ReadEngineBuild), recorded
	// in the run header; nil records nothing.
	EngineBuild []string
	// ImageInputs is what the virtual machine image the run happens in
	// was assembled from (ReadImageInputs), recorded in the run header;
	// nil records nothing.
	ImageInputs []string
	// RemoveImage, when set, removes the image the run built; it runs after
	// the last scenario and its outcome is recorded in the run evidence.
	RemoveImage func(ctx context.Context) error
	// Stderr receives the plain progress lines (PlainProgress), each
	// ending in a newline, when Progress is nil; nil discards. Run prints
	// nothing else: the caller renders the Result.
	Stderr io.Writer
	// Progress, when set, receives the run's progress events instead of
	// the plain lines on Stderr (a terminal display, a test's recorder).
	// Run calls it from its scenario goroutines, one call at a time and
	// never after it returned; a call must not block for long (scenarios
	// wait for it) and must not call back into the run.
	Progress func(ProgressEvent)
	// Verbose emits scenario detail lines (ScenarioDetail events; on
	// Stderr by default).
	Verbose bool
	// SigningKey, when set, signs the complete report: Run writes
	// evidence.dsse.json (attest.EnvelopeFile) after every other file.
	SigningKey ed25519.PrivateKey
	// Repeat runs the manifest's scenarios this many times in one report;
	// 0 and 1 run them once. With Repeat > 1 every run has its own
	// directory and namespace, and each scenario's summary lists its runs
	// and counts its passes: one that passed some runs and failed others
	// is flaky (docs/qualification.md#evidence).
	Repeat int
	// Parallel runs up to this many scenarios of a repetition at once,
	// each in its own namespace and directory, with the same evidence as
	// one at a time; 0 and 1 run them one at a time. A scenario that
	// implements scenario.Exclusive runs alone. The report's Campaign
	// records the order in which they started.
	Parallel int
	// ScenarioTimeout bounds each scenario run, from its start; 0 means
	// DefaultScenarioTimeout. When it passes, the scenario's context is
	// cancelled with a *TimeLimitError, the goroutine stacks are written to
	// GoroutinesFile in its directory, and it fails once it returns.
	ScenarioTimeout time.Duration
	// ScenarioGrace is how long a scenario cancelled by its time limit
	// may take to clean up and return; 0 means twice the policy's cleanup
	// deadline plus a minute. A scenario
	// that does not return within it is abandoned: it fails, and the run
	// starts nothing more and writes its report.
	ScenarioGrace time.Duration
	// InterruptGrace is how long a scenario may take to return after an
	// interruption (also one after its time limit, when less is left of
	// ScenarioGrace); 0 means the smaller of ScenarioGrace and a minute.
	InterruptGrace time.Duration
	// Selection, when set, runs only the manifest entries it selects
	// (qualify run --only/--skip); the others are listed as skipped with
	// evidence.NotSelectedReason and no directory, and the report records
	// it as partial (docs/qualification.md#partial-reports).
	Selection *evidence.Selection
	// Heartbeat is the interval of the ScenarioHeartbeat events (the
	// "qualify: <scenario> still running after <d>" lines on Stderr) while
	// a scenario runs; 0 means DefaultHeartbeat.
	Heartbeat time.Duration
	// Host is the host filesystem the scenarios' cgroup observer reads
	// (/proc, /sys/fs/cgroup); nil means the real root. Tests substitute a
	// filesystem that misreports a counter.
	Host fs.FS
}

// Result is what Run did: the run evidence it wrote and where.
type Result struct {
	// Run is the run evidence, as written to evidence.json (or as far as
	// it got when writing or signing the report failed).
	*evidence.Run
	// Dir is the report directory, a canonical absolute path.
	Dir string
	// Envelope is the path of the signed report's envelope
	// (attest.EnvelopeFile in Dir) and KeyID the ID of the key that signed
	// it (attest.KeyID); both empty when the report is not signed.
	Envelope, KeyID string
}

// ExitCode maps a run to the CLI's exit status (internal/exitcode): an
// interruption first (exitcode.Interrupted), then err, a report that could
// not be completely written or signed (exitcode.Internal: the report on
// disk is not a complete one), then the run's verdict (exitcode.Failed
// unless it is OK). r nil (no report) is exitcode.Internal.
func ExitCode(r *evidence.Run, err error) int {
	switch {
	case r == nil:
		return exitcode.Internal
	case r.Interrupted:
		return exitcode.Interrupted
	case err != nil:
		return exitcode.Internal
	case !r.Verdict.OK():
		return exitcode.Failed
	}
	return exitcode.OK
}

// DefaultOutput is the default output directory for a run starting at t:
// reports/runs/<UTC timestamp>.
func DefaultOutput(t time.Time) string {
	return filepath.Join("reports", "runs", t.UTC().Format("20060102T150405Z"))
}

// CheckOutput reports whether dir could be used as a fresh output
// directory (absent or empty) without creating it, so a caller can refuse
// early and create it only once the run can start.
func CheckOutput(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	entries, err := os.ReadDir(abs)
	switch {
	case err == nil && len(entries) > 0:
		return fmt.Errorf("output directory %s is not empty: give a fresh directory", abs)
	case err == nil, errors.Is(err, os.ErrNotExist):
		return nil
	}
	return err
}

// PrepareOutput creates dir (and parents) or accepts an existing empty
// directory, and returns its canonical absolute path. A non-empty existing
// directory is refused so evidence from two runs never mixes.
func PrepareOutput(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	entries, err := os.ReadDir(abs)
	switch {
	case err == nil && len(entries) > 0:
		return "", fmt.Errorf("output directory %s is not empty: give a fresh directory", abs)
	case err == nil:
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(abs, 0o755); err != nil {
			return "", err
		}
	default:
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

// Run executes the manifest's scenarios in order and writes the evidence.
// It returns what it wrote; the error is for problems that prevent a
// report (output directory: nil Result) or a complete one (writing or
// signing files: the Result holds the run as far as it got). Progress
// goes to cfg.Progress, else as plain lines to cfg.Stderr; rendering the
// Result is the caller's. Cancelling ctx marks the
// running scenario failed ("interrupted", after its cleanup ran) and the
// rest skipped ("not run"), then writes the partial report. A scenario
// past cfg.ScenarioTimeout fails and the run goes on; one that does not
// return after its cancellation is abandoned and the rest are skipped.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	m := cfg.Manifest
	progress := cfg.Progress
	if progress == nil {
		progress = PlainProgress(cfg.Stderr)
	}
	out, err := PrepareOutput(cfg.Output)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	policyJSON, _ := json.Marshal(m.Policy)
	host, _ := os.Hostname()
	run := &evidence.Run{
		Schema: evidence.Schema, Profile: m.Profile, Endpoint: m.Endpoint,
		Manifest:   evidence.Manifest{Path: m.Path, SHA256: m.SHA256},
		Controller: evidence.Controller{OS: runtime.GOOS, Arch: runtime.GOARCH, GoVersion: runtime.Version(), Hostname: host},
		Host:       HostFacts(ctx, "/"), EngineBuild: cfg.EngineBuild, ImageInputs: cfg.ImageInputs,
		Image:  evidence.Image{ID: cfg.ImageID, Source: cfg.ImageSource, ArchiveSHA256: cfg.ImageArchiveSHA256, ArchiveID: cfg.ImageArchiveID},
		Policy: policyJSON, User: m.User,
		Harness:   HarnessIdentity(),
		Selection: cfg.Selection,
		Scenarios: []evidence.ScenarioSummary{},
	}
	if cfg.Engine != nil {
		// Bounded like a sandbox start: an Engine that stops answering
		// fails the header's admission instead of holding the run.
		actx, cancel := context.WithTimeout(ctx, time.Duration(m.Policy.Deadlines.StartupMs)*time.Millisecond)
		run.Admission, run.Engine = admitHeader(actx, m, cfg.ImageID, out)
		cancel()
		// Every sandbox of the run requests its profile's runtime and
		// reads it back (driver.Backend).
		if prof, err := profiles.Load(m.Profile); err == nil {
			run.Runtime = prof.Runtime
		}
	}
	run.Tuple = evidence.TupleOf(run)
	posture := evidence.PostureOf(run, nil)
	run.Posture = &posture

	results, err := runCampaign(ctx, cfg, run, out, progress)
	if err != nil {
		return nil, err
	}

	if cfg.RemoveImage != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		err := cfg.RemoveImage(rctx)
		cancel()
		removed := err == nil
		run.Image.Removed = &removed
		if err != nil {
			run.Image.RemoveError = err.Error()
		}
	}

	// Failed on a failed scenario, a leaked guest image, a refused header
	// admission or an interruption: the rule verification recomputes.
	run.Verdict = evidence.RunVerdict(run)
	run.Timing = evidence.NewTiming(start, time.Now())
	res := &Result{Run: run, Dir: out}
	if err := evidence.WriteReport(out, run, results); err != nil {
		return res, err
	}
	if cfg.SigningKey != nil {
		// A scenario's spill directory (scenario.Env.Backend) is left
		// empty by a sandbox that spilled nothing; a signed report holds
		// no directory without a subject, so it goes before signing.
		if err := removeEmptyDirs(out); err != nil {
			return res, fmt.Errorf("sign report: %w", err)
		}
		// The test-result statement first: the report's own statement
		// then signs it as one of the report's files.
		if err := evidence.SignTestResult(context.WithoutCancel(ctx), out, cfg.SigningKey); err != nil {
			return res, fmt.Errorf("sign report: %w", err)
		}
		if err := evidence.SignRun(context.WithoutCancel(ctx), out, cfg.SigningKey, run); err != nil {
			// Only a signed report holds the test-result statement
			// (evidence.Layout): an unsigned one does not keep it.
			_ = os.Remove(filepath.Join(out, evidence.TestResultFile))
			return res, fmt.Errorf("sign report: %w", err)
		}
		res.Envelope = filepath.Join(out, attest.EnvelopeFile)
		res.KeyID = attest.KeyID(cfg.SigningKey.Public().(ed25519.PublicKey))
	}
	return res, nil
}

// removeEmptyDirs removes every directory under out (not out itself) that
// holds no file at any depth, deepest first.
func removeEmptyDirs(out string) error {
	_, dirs, err := attest.Tree(out)
	if err != nil {
		return err
	}
	for _, d := range slices.Backward(dirs) {
		p := filepath.Join(out, filepath.FromSlash(d))
		entries, err := os.ReadDir(p)
		if err != nil {
			return err
		}
		if len(entries) == 0 {
			if err := os.Remove(p); err != nil {
				return err
			}
		}
	}
	return nil
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// scenarioNamespace returns "<prefix>-<scenario>-<8 hex>", shortening the
// scenario part so the result fits sandboxapi.MaxNamespaceBytes.
func scenarioNamespace(prefix, name string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	suffix := "-" + hex.EncodeToString(b[:])
	room := sandboxapi.MaxNamespaceBytes - len(prefix) - len(suffix) - 1
	if len(name) > room {
		name = name[:max(room, 0)]
	}
	return prefix + "-" + name + suffix
}

// admitHeader admits the manifest profile for the run header. Failures are
// recorded, not fatal: the admission scenario judges them.
func admitHeader(ctx context.Context, m *manifest.Manifest, imageID, out string) (evidence.Admission, driver.EngineFacts) {
	var a evidence.Admission
	b, err := driver.New(driver.Config{
		Profile: m.Profile, Endpoint: m.Endpoint, Namespace: scenarioNamespace(m.Namespace, "run"),
		SpillDirectory: out, ImageID: imageID, User: m.User,
	})
	if err != nil {
		a.Error = err.Error()
		return a, driver.EngineFacts{}
	}
	defer b.Close()
	adm, err := b.Admit(ctx)
	if err != nil {
		a.Error = err.Error()
	}
	if adm == nil {
		return a, driver.EngineFacts{}
	}
	a.OK, a.Checks = err == nil, adm.Checks
	return a, adm.Engine
}

// runScenario runs one scenario, bounded by l (superviseScenario), and
// turns its record into evidence. A panic becomes the scenario's failure;
// a scenario past its time limit fails with a *TimeLimitError, not as
// interrupted. abandoned reports a scenario that did not return within
// the grace period: its evidence holds the checks recorded so far and no
// absence checks (it may still hold what it created), and the caller must
// not start another scenario.
func runScenario(ctx context.Context, sc scenario.Scenario, env *scenario.Env, idx int, e manifest.Entry, cli *client.Client, l scenarioLimits) (ev *evidence.Scenario, abandoned bool) {
	rec := scenario.NewRecord()
	start := time.Now()
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan error, 1)
	go func() {
		var failure error
		defer func() {
			if p := recover(); p != nil {
				failure = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
			}
			done <- failure
		}()
		if sc == nil {
			failure = fmt.Errorf("scenario %q is not registered", e.Name)
			return
		}
		failure = sc.Run(sctx, env, e.Params, rec)
	}()
	sv := superviseScenario(ctx, cancel, done, e.Name, env.Dir, l)
	failure := sv.failure
	// Judged when Run returns: a signal during the absence checks below
	// does not turn a completed scenario into an interrupted one.
	interrupted := ctx.Err() != nil
	if sv.timedOut || sv.abandoned {
		failure = limitFailure(context.Cause(sctx), sv)
	}
	if sv.abandoned {
		return abandonedEvidence(rec, env, idx, e, start, failure, interrupted), true
	}
	snap := rec.Snapshot()
	encodable(snap.Requested)
	encodable(snap.Observed)
	ev = newEvidence(snap, env, idx, e)
	ev.Requested, ev.Observed = snap.Requested, snap.Observed
	// Each absence check is bounded by the cleanup deadline; after an
	// interruption all of them together get interruptChecks, so that the
	// report still comes out before whoever interrupted gives up.
	checksEnd := time.Time{}
	if interrupted {
		checksEnd = time.Now().Add(interruptChecks)
	}
	for _, owner := range snap.Owners {
		for _, r := range scenario.Resources(owner) {
			if cli != nil {
				bound := time.Duration(env.Policy.Deadlines.CleanupMs) * time.Millisecond
				if !checksEnd.IsZero() {
					bound = min(bound, time.Until(checksEnd))
				}
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
				absent, probe, err := scenario.CheckAbsent(cctx, cli, r)
				cancel()
				if err != nil {
					ev.CleanupErrors = append(ev.CleanupErrors, fmt.Sprintf("absence check of %s %s: %v", r.Role, r.Name, err))
				} else {
					r.Absent, r.Probe = &absent, probe
					if !absent {
						ev.CleanupErrors = append(ev.CleanupErrors, fmt.Sprintf("%s resource %s (%s) is still present after cleanup", r.Role, r.Name, r.ID))
					}
				}
			}
			ev.Resources = append(ev.Resources, r)
		}
	}
	switch {
	case interrupted && failure != nil:
		ev.Failure = "interrupted: " + failure.Error()
	case interrupted:
		ev.Failure = "interrupted: " + context.Cause(ctx).Error()
	case failure != nil:
		ev.Failure = failure.Error()
	case len(ev.Checks) == 0 && snap.Verdict == nil:
		// A scenario that checked nothing proved nothing: it cannot pass.
		ev.Failure = evidence.NoChecksReason
	}
	ev.Verdict = evidence.ScenarioVerdict(ev, snap.Verdict, interrupted)
	ev.Timing = evidence.NewTiming(start, time.Now())
	return ev, false
}

// newEvidence is a scenario's evidence with its identity, checks and
// cleanup errors from snap, empty facts and no resources (never nil
// slices or maps: the evidence schema wants them present).
func newEvidence(snap scenario.Snapshot, env *scenario.Env, idx int, e manifest.Entry) *evidence.Scenario {
	ev := &evidence.Scenario{
		Schema: evidence.Schema, Index: idx, Name: e.Name, Namespace: env.Namespace, Params: e.Params,
		Requested: map[string]any{}, Observed: map[string]any{}, Checks: snap.Checks,
		CleanupErrors: snap.CleanupErrors, Resources: []evidence.Resource{},
	}
	if ev.Checks == nil {
		ev.Checks = []evidence.Check{}
	}
	if ev.CleanupErrors == nil {
		ev.CleanupErrors = []string{}
	}
	return ev
}

// limitFailure is the failure of a scenario that ran past its time limit
// or was abandoned (sv), cause being its context's cause: what happened,
// where the goroutine stacks are, and the scenario's own error when it
// returned one.
func limitFailure(cause error, sv supervision) error {
	var err error
	if sv.timedOut {
		err = cause
	}
	if sv.abandoned {
		what := "after its time limit"
		if sv.afterInterrupt {
			what = "after the run was interrupted"
		}
		a := fmt.Errorf("did not return within %s %s; abandoned, so the run stops here (what it created may still exist)", sv.grace, what)
		if err != nil {
			a = fmt.Errorf("%w; %w", err, a)
		}
		err = a
	}
	if sv.dumpErr != nil {
		err = fmt.Errorf("%w (writing %s: %v)", err, GoroutinesFile, sv.dumpErr)
	} else {
		err = fmt.Errorf("%w (goroutine stacks in %s)", err, GoroutinesFile)
	}
	if sv.failure != nil {
		err = fmt.Errorf("%w; then: %w", err, sv.failure)
	}
	return err
}

// abandonedEvidence is the evidence of a scenario that never returned,
// marked Abandoned (which licenses the not-run scenarios after it): its
// checks and cleanup errors so far, the resources its owners recorded
// (not checked for absence: the scenario may still hold them), and no
// facts (the scenario may still be writing them).
func abandonedEvidence(rec *scenario.Record, env *scenario.Env, idx int, e manifest.Entry, start time.Time, failure error, interrupted bool) *evidence.Scenario {
	snap := rec.Snapshot()
	ev := newEvidence(snap, env, idx, e)
	ev.Abandoned = true
	ev.CleanupErrors = append(ev.CleanupErrors, "resources not checked: the scenario was abandoned while running")
	ev.Failure = failure.Error()
	// What its owners had recorded so far, unchecked (Absent stays unset).
	for _, owner := range snap.Owners {
		ev.Resources = append(ev.Resources, scenario.Resources(owner)...)
	}
	if interrupted {
		ev.Failure = "interrupted: " + ev.Failure
	}
	ev.Verdict = evidence.ScenarioVerdict(ev, nil, interrupted)
	ev.Timing = evidence.NewTiming(start, time.Now())
	return ev
}

// detail is the one-line reason shown in the table for a scenario.
func detail(ev *evidence.Scenario) string {
	if ev.Failure != "" {
		line, _, _ := strings.Cut(ev.Failure, "\n")
		return line
	}
	for _, c := range ev.Checks {
		if !c.OK {
			return fmt.Sprintf("%s: want %s, got %s", c.Name, c.Want, c.Got)
		}
	}
	if len(ev.CleanupErrors) > 0 {
		return "cleanup: " + ev.CleanupErrors[0]
	}
	return ""
}

// encodable replaces values that cannot be encoded as JSON with a note, so
// one bad observation never loses the scenario's evidence.
func encodable(m map[string]any) {
	for k, v := range m {
		if _, err := json.Marshal(v); err != nil {
			m[k] = "unencodable: " + err.Error()
		}
	}
}
