package evidence

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/profiles"
	"github.com/qualbox/qualbox/qualify/manifest"
)

// Checks of a report's claims against their own sources
// (docs/qualification.md#evidence): the host facts against the profile,
// the stored tuple against the header, and the times against each other
// and the verifier's clock. Like the cross-checks, they hold a signer to
// what its own report says.

// MaxClockSkew is how far in the future of the verifier's clock a report's
// times may lie: a signing host's clock may run this much ahead.
const MaxClockSkew = 5 * time.Minute

// engineless reports whether r was made without an Engine (a hermetic
// run): no Engine facts and no admission at all.
func engineless(r *Run) bool {
	return reflect.DeepEqual(r.Engine, driver.EngineFacts{}) &&
		!r.Admission.OK && r.Admission.Error == "" && len(r.Admission.Checks) == 0
}

// admissionRefused reports whether r's header admission refused its
// profile (not ok, or an error); a run without an Engine made none.
func admissionRefused(r *Run) bool {
	return !engineless(r) && (!r.Admission.OK || r.Admission.Error != "")
}

// hostProblems re-evaluates the admission rules over the host facts r
// recorded (driver.CheckEngineFacts, driver.CheckController) and says
// where they contradict r's profile while r's admission does not record
// the refusal, and where the admission contradicts itself. In order: the
// controller, the admission's consistency with its facts
// (admissionFactsProblem), the OCI runtime (runtimeProblems), the
// admission's failed checks (admissionCheckProblems), the Engine facts
// (engineFactProblems).
func hostProblems(r *Run) []string {
	prof, err := profiles.Load(r.Profile)
	if err != nil {
		return []string{fmt.Sprintf("profile %q: %v", r.Profile, err)}
	}
	if engineless(r) {
		// A hermetic run (synthetic scenarios, no Engine) admitted
		// nothing, and may run on any controller.
		return nil
	}
	var out []string
	if c := driver.CheckController(prof, r.Controller.OS, r.Controller.Arch); !c.OK {
		out = append(out, fmt.Sprintf("controller %s contradicts profile %s: controller: want %s, got %s", c.Got, prof.Name, c.Want, c.Got))
	}
	noFacts := reflect.DeepEqual(r.Engine, driver.EngineFacts{})
	if why := admissionFactsProblem(r.Admission, noFacts); why != "" {
		out = append(out, why)
	}
	out = append(out, runtimeProblems(r, prof)...)
	out = append(out, admissionCheckProblems(r.Admission)...)
	if noFacts {
		return out
	}
	return append(out, engineFactProblems(prof, r.Engine, r.Admission)...)
}

// admissionFactsProblem says where admission a contradicts itself or the
// Engine facts' presence (noFacts: none recorded): ok with an error, ok
// without facts, facts without an admission.
func admissionFactsProblem(a Admission, noFacts bool) string {
	switch {
	case a.OK && a.Error != "":
		return fmt.Sprintf("admission ok, but with error %q", a.Error)
	case a.OK && noFacts:
		return "admission ok without Engine facts"
	case !noFacts && len(a.Checks) == 0 && a.Error == "":
		return "Engine facts recorded without an admission"
	}
	return ""
}

// runtimeProblems says where r's OCI runtime, when recorded, is not the
// one profile prof requests or not one the Engine lists.
func runtimeProblems(r *Run, prof profiles.Profile) []string {
	var out []string
	if r.Runtime != "" && r.Runtime != prof.Runtime {
		out = append(out, fmt.Sprintf("OCI runtime %q contradicts profile %s, whose sandboxes request %q", r.Runtime, prof.Name, prof.Runtime))
	}
	if r.Runtime != "" && len(r.Engine.Runtimes) > 0 && !slices.ContainsFunc(r.Engine.Runtimes, func(nv string) bool { return strings.SplitN(nv, "=", 2)[0] == r.Runtime }) {
		out = append(out, fmt.Sprintf("OCI runtime %q is not one the Engine lists (%s)", r.Runtime, strings.Join(r.Engine.Runtimes, ", ")))
	}
	return out
}

// admissionCheckProblems says where admission a is ok with a failed
// check.
func admissionCheckProblems(a Admission) []string {
	var out []string
	for _, c := range a.Checks {
		if a.OK && !c.OK {
			out = append(out, fmt.Sprintf("admission ok, but its check %q failed: want %s, got %s", c.Name, c.Want, c.Got))
		}
	}
	return out
}

// engineFactProblems says where Engine facts e contradict profile prof
// while admission a does not record the refusal.
func engineFactProblems(prof profiles.Profile, e driver.EngineFacts, a Admission) []string {
	recorded := map[string]driver.Check{}
	for _, c := range a.Checks {
		recorded[c.Name] = c
	}
	var out []string
	for _, c := range driver.CheckEngineFacts(prof, e) {
		if c.OK {
			continue
		}
		// A refusal the admission records (not ok, the check failed or
		// not made) is consistent: the run verdict must then fail.
		if rc, made := recorded[c.Name]; a.OK || (made && rc.OK) {
			out = append(out, fmt.Sprintf("Engine facts contradict profile %s, which its admission does not record: %s: want %s, got %s", prof.Name, c.Name, c.Want, c.Got))
		}
	}
	return out
}

// tupleProblems compares the stored tuple with TupleOf(r), field by field.
func tupleProblems(r *Run) []string {
	want, _ := json.Marshal(TupleOf(r))
	got, _ := json.Marshal(r.Tuple)
	var w, g map[string]any
	_ = json.Unmarshal(want, &w)
	_ = json.Unmarshal(got, &g)
	var keys []string
	for k := range w {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []string
	for _, k := range keys {
		if !reflect.DeepEqual(w[k], g[k]) {
			wj, _ := json.Marshal(w[k])
			gj, _ := json.Marshal(g[k])
			out = append(out, fmt.Sprintf("tuple %s is %s, but the run header gives %s", k, gj, wj))
		}
	}
	return out
}

// imageProblems says where r's image cleanup record contradicts itself.
func imageProblems(r *Run) []string {
	i := r.Image
	switch {
	case i.Removed != nil && !*i.Removed && i.RemoveError == "":
		return []string{"image removed false without a removeError"}
	case i.RemoveError != "" && (i.Removed == nil || *i.Removed):
		return []string{fmt.Sprintf("image removeError %q, but removed is not false", i.RemoveError)}
	}
	return nil
}

// timingProblems says why t (named what) is not an interval that ended
// by now plus MaxClockSkew with DurationMs = End - Start.
func timingProblems(what string, t Timing, now time.Time) []string {
	var out []string
	switch {
	case t.Start.IsZero():
		out = append(out, what+" has no start time")
	case t.End.Before(t.Start):
		out = append(out, fmt.Sprintf("%s ends at %s, before it starts at %s", what, stamp(t.End), stamp(t.Start)))
	}
	if d := t.End.Sub(t.Start).Milliseconds(); d != t.DurationMs {
		out = append(out, fmt.Sprintf("%s durationMs %d, but end - start is %d ms", what, t.DurationMs, d))
	}
	if limit := now.Add(MaxClockSkew); t.End.After(limit) || t.Start.After(limit) {
		out = append(out, fmt.Sprintf("%s ends at %s, in the future of the verifier's clock %s by more than the allowed skew %s", what, stamp(t.End), stamp(now), MaxClockSkew))
	}
	return out
}

// scenarioTimeProblems says why scenario evidence s (summary sum) is not
// timed inside r's interval, or its summary's duration differs.
func scenarioTimeProblems(r *Run, sum ScenarioSummary, s *Scenario, now time.Time) []string {
	out := timingProblems("scenario", s.Timing, now)
	if s.Timing.Start.Before(r.Timing.Start) || s.Timing.End.After(r.Timing.End) {
		out = append(out, fmt.Sprintf("scenario runs %s to %s, outside the run's %s to %s", stamp(s.Timing.Start), stamp(s.Timing.End), stamp(r.Timing.Start), stamp(r.Timing.End)))
	}
	if sum.DurationMs != s.Timing.DurationMs {
		out = append(out, fmt.Sprintf("durationMs %d, but evidence.json says %d", s.Timing.DurationMs, sum.DurationMs))
	}
	return out
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// ManifestProblems compares a verified report with the pinned manifest m
// whose digest it records (docs/qualification.md#gate): its scenario
// names in order (a campaign of repeat N lists m's entries N times, each
// run with its repeat number), each scenario evidence file's params with
// its entry's (canonical JSON), the run's policy with m's policy encoded
// as the runner encodes it, its profile, user and image
// source, and that its Engine endpoint is a Unix socket (qualify run
// --endpoint may name another than m's). It returns one line per difference, nil when the report is what
// m says.
func ManifestProblems(s *Signed, m *manifest.Manifest) []string {
	out := scenarioListProblems(s, m)
	return append(out, runHeaderProblems(s.Run, m)...)
}

// scenarioListProblems compares the report's scenario runs with m's
// entries, repeated: the count, then each run's name, repeat number and
// recorded params.
func scenarioListProblems(s *Signed, m *manifest.Manifest) []string {
	r := s.Run
	var out []string
	repeat := 1
	if r.Campaign != nil && r.Campaign.Repeat > 1 {
		repeat = r.Campaign.Repeat
	}
	n := len(m.Scenarios)
	if len(r.Scenarios) != repeat*n {
		out = append(out, fmt.Sprintf("lists %d scenario run(s), but manifest %s names %d scenario(s), run %d time(s)", len(r.Scenarios), m.Path, n, repeat))
	}
	for i, sum := range r.Scenarios {
		if i >= repeat*n {
			out = append(out, fmt.Sprintf("scenario %d %q is not in manifest %s", sum.Index, sum.Name, m.Path))
			continue
		}
		e := m.Scenarios[i%n]
		if sum.Name != e.Name {
			out = append(out, fmt.Sprintf("scenario %d is %q, but manifest %s entry %d is %q", sum.Index, sum.Name, m.Path, i%n+1, e.Name))
			continue
		}
		if wantRepeat := i/n + 1; repeat > 1 && sum.Repeat != wantRepeat {
			out = append(out, fmt.Sprintf("scenario %d %q is repeat %d, want %d", sum.Index, sum.Name, sum.Repeat, wantRepeat))
		}
		if i >= len(s.Scenarios) || s.Scenarios[i] == nil {
			continue // not run: no params recorded
		}
		got, want := canonicalJSON(s.Scenarios[i].Params), canonicalJSON(e.Params)
		if got != want {
			out = append(out, fmt.Sprintf("scenario %d %q params %s, but manifest %s entry %d params %s", sum.Index, sum.Name, got, m.Path, i%n+1, want))
		}
	}
	return out
}

// runHeaderProblems compares the run header with m: policy, profile, a
// Unix socket endpoint, user and image source.
func runHeaderProblems(r *Run, m *manifest.Manifest) []string {
	var out []string
	if got, want := canonicalJSON(r.Policy), canonicalJSON(m.Policy); got != want {
		out = append(out, fmt.Sprintf("policy %s, but manifest %s policy %s", got, m.Path, want))
	}
	if r.Profile != m.Profile {
		out = append(out, fmt.Sprintf("profile %q, but manifest %s profile %q", r.Profile, m.Path, m.Profile))
	}
	// qualify run --endpoint may replace the manifest's socket (a host path,
	// outside the pinned digest); the Engine facts, checked against the
	// profile, identify the Engine. It is still a local Unix socket.
	if err := manifest.CheckEndpoint(r.Endpoint); err != nil {
		out = append(out, fmt.Sprintf("endpoint: %v (manifest %s names %q)", err, m.Path, m.Endpoint))
	}
	if r.User != m.User {
		out = append(out, fmt.Sprintf("user %d:%d, but manifest %s user %d:%d", r.User.UID, r.User.GID, m.Path, m.User.UID, m.User.GID))
	}
	switch {
	case m.Image == manifest.ImageBuild && r.Image.Source != "build" && r.Image.Source != "archive":
		out = append(out, fmt.Sprintf("image source %q, but manifest %s builds its image", r.Image.Source, m.Path))
	case m.Image != manifest.ImageBuild && (r.Image.Source != "manifest" || r.Image.ID != m.Image):
		out = append(out, fmt.Sprintf("image %s (source %q), but manifest %s names image %s", r.Image.ID, r.Image.Source, m.Path, m.Image))
	}
	return out
}

// canonicalJSON renders v as JSON with sorted keys and numbers as
// written, so two encodings of the same value compare equal; a value that
// does not encode renders as its error.
func canonicalJSON(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return "unencodable: " + err.Error()
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return "undecodable: " + err.Error()
	}
	data, _ = json.Marshal(x)
	return string(data)
}

// resourceProblems says which of s's resources a run with an Engine left
// unchecked: the runner checks every resource of a scenario that returned
// for absence after cleanup and records a cleanup error when it cannot,
// so an unchecked resource without one hides the check's outcome.
func resourceProblems(r *Run, s *Scenario) []string {
	if engineless(r) || s.Abandoned || len(s.CleanupErrors) > 0 {
		return nil
	}
	var out []string
	for _, res := range s.Resources {
		if res.Absent == nil {
			out = append(out, fmt.Sprintf("resource %s %s was not checked for absence after cleanup, and no cleanup error says why", res.Role, res.Name))
		}
	}
	return out
}

// machineProblems re-derives isolation's "uname machine" check
// (docs/lanes.md#lane-d) where a report records it: its want must be
// uname(2)'s machine name of the verifier's profile's image architecture
// (aarch64 for linux-arm64), its got the machine of the probe facts the
// scenario observed, and its ok whether they are equal. A passed
// isolation must have the check under a profile whose workload is not
// amd64 code on an amd64 Engine (an arm64 image, or an image of another
// architecture than the daemon's): what such a row stands for is the
// architecture its workload ran as. The rule does not go by the
// catalogue version the report claims, which its signer writes. Without
// it a key holder could record an x86_64 workload under an arm64 row as
// passed, since the verdict alone follows from ok.
func machineProblems(r *Run, s *Scenario) []string {
	const name = "uname machine"
	if s.Name != "isolation" || engineless(r) {
		return nil
	}
	prof, err := profiles.Load(r.Profile)
	if err != nil {
		return nil // hostProblems names the unknown profile
	}
	i := slices.IndexFunc(s.Checks, func(c Check) bool { return c.Name == name })
	if i < 0 {
		img := prof.Image.Architecture
		if s.Verdict.Kind == Passed && (img != "amd64" || prof.Daemon.Architecture != img) {
			return []string{fmt.Sprintf("isolation passed without its %q check, which profile %s (images %s, daemon %s) requires", name, prof.Name, img, prof.Daemon.Architecture)}
		}
		return nil
	}
	c := s.Checks[i]
	var out []string
	if want := profiles.UnameMachine(prof.Image.Architecture); c.Want != want {
		out = append(out, fmt.Sprintf("check %q wants %s, but profile %s's image architecture %s is %s", name, c.Want, prof.Name, prof.Image.Architecture, want))
	}
	if f, ok := s.Observed["facts"].(map[string]any); ok {
		if m, _ := f["machine"].(string); m != c.Got {
			out = append(out, fmt.Sprintf("check %q got %s, but the probe facts it observed say machine %q", name, c.Got, m))
		}
	}
	if c.OK != (c.Want == c.Got) {
		out = append(out, fmt.Sprintf("check %q is ok %t with want %s and got %s", name, c.OK, c.Want, c.Got))
	}
	return out
}
