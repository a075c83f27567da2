package evidence

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"golang.org/x/mod/semver"

	"github.com/qualbox/qualbox/driver"
)

// Posture is the host's runtime security posture as a run's header
// records it (docs/qualification.md#posture): the OCI runtime and
// containerd versions the Engine reports, and the known advisories of the
// qualify build that made the run those version numbers fall under. It
// is derived from the header's Engine facts (PostureOf), which
// verification recomputes (postureProblems); the gate judges the Engine
// facts against its own advisory list and floors, not this record, and
// verify and merge show readers their own reading (ReadPosture).
type Posture struct {
	// DefaultRuntime is /info DefaultRuntime ("runc"); "" in reports
	// made before it was recorded.
	DefaultRuntime string `json:"defaultRuntime"`
	// Runtimes are /info Runtimes, "name=path" sorted by name.
	Runtimes []string `json:"runtimes"`
	// Components are runc's and containerd's versions, in that order.
	Components []Component `json:"components"`
	// Advisories are the entries of KnownAdvisories the components'
	// upstream versions fall under.
	Advisories []AdvisoryMatch `json:"advisories"`
}

// Component is one runtime component's version as the Engine reports it.
type Component struct {
	// Name is "runc" or "containerd".
	Name string `json:"name"`
	// Version is the /version component's Version ("1.1.5+ds1",
	// "1.3.3"); "" when the Engine lists no such component.
	Version string `json:"version"`
	// Build is /info's RuncCommit or ContainerdCommit ID: a distribution
	// package version ("1.1.5+ds1-1+deb12u1") or an upstream commit
	// ("v1.3.3-0-gd842d771").
	Build string `json:"build"`
	// Upstream is the upstream release Version names, in semantic
	// version form ("1.1.5", "1.4.0-rc.3"); "" when Version does not
	// start with one.
	Upstream string `json:"upstream"`
	// Distribution is Version's text after the upstream release
	// ("+ds1", "-0ubuntu3"): a distribution's build, which may carry
	// fixes backported from later releases, so that an advisory matched
	// by version number alone may not apply (its package changelog
	// says).
	Distribution string `json:"distribution,omitempty"`
}

// Advisory is a published vulnerability of a runtime component and the
// releases that fix it.
type Advisory struct {
	ID        string
	Component string
	Summary   string
	// Fixed are the first fixed release of each release line
	// (major.minor) that has one, in semantic version form.
	Fixed []string
}

// AdvisoryMatch is an advisory a recorded component version falls under.
type AdvisoryMatch struct {
	ID        string   `json:"id"`
	Component string   `json:"component"`
	Version   string   `json:"version"`
	Summary   string   `json:"summary"`
	Fixed     []string `json:"fixed"`
	// Backports is set when the version is a distribution's build: the
	// match is by version number and the build may carry the fix.
	Backports bool `json:"backports,omitempty"`
}

// KnownAdvisories are the runtime advisories this qualify build knows of
// (container escapes and host writes from a container; docs/qualification.md#posture).
var KnownAdvisories = []Advisory{
	{"CVE-2024-21626", "runc", "container breakout through a file descriptor leaked into the container (working directory in /proc/self/fd)", []string{"1.1.12"}},
	{"CVE-2025-31133", "runc", "container escape through a maskedPaths bind mount of a /dev/null replaced by a symlink", []string{"1.2.8", "1.3.3", "1.4.0-rc.3"}},
	{"CVE-2025-52565", "runc", "container escape through the /dev/console bind mount racing a symlink", []string{"1.2.8", "1.3.3", "1.4.0-rc.3"}},
	{"CVE-2025-52881", "runc", "writes redirected to host procfs files, bypassing LSM labels (container escape, host denial of service)", []string{"1.2.8", "1.3.3", "1.4.0-rc.3"}},
	{"CVE-2026-41579", "runc", "limited writes to the host filesystem from an image with a /dev symlink", []string{"1.3.6", "1.4.3", "1.5.0-rc.3"}},
}

// upstreamRE is an upstream release at the start of a component version:
// "1.1.5", "v1.3.3", "1.4.0-rc.3" or "1.4.0-rc3".
var upstreamRE = regexp.MustCompile(`^v?(\d+\.\d+\.\d+)(-rc\.?(\d+))?`)

// ParseUpstream splits a component version into its upstream release in
// semantic version form and the distribution's suffix after it; ok is
// false when version does not start with a release.
func ParseUpstream(version string) (upstream, distribution string, ok bool) {
	m := upstreamRE.FindStringSubmatchIndex(version)
	if m == nil {
		return "", "", false
	}
	upstream = version[m[2]:m[3]]
	if m[6] >= 0 {
		upstream += "-rc." + version[m[6]:m[7]]
	}
	rest := version[m[1]:]
	// A suffix that may be a pre-release (Debian's "~rc1", "-beta",
	// "-dev"), a fourth number or free text does not name the release:
	// the version is unparsed, so a floor fails closed on it.
	if strings.ContainsFunc(rest, unicode.IsSpace) || strings.HasPrefix(rest, ".") ||
		(strings.HasPrefix(rest, "~") && !strings.HasPrefix(rest, "~ds")) ||
		(strings.HasPrefix(rest, "-") && (len(rest) < 2 || !unicode.IsDigit(rune(rest[1])))) {
		return "", "", false
	}
	return upstream, rest, true
}

// Affected reports whether the upstream release v (semantic version form,
// no "v") falls under a: below the fix of its own release line where that
// line has one, else below the highest fix (a line below it without its
// own fix is taken as unfixed); every release when nothing is fixed yet.
func (a Advisory) Affected(v string) bool {
	sv := "v" + v
	if !semver.IsValid(sv) {
		return false
	}
	if len(a.Fixed) == 0 {
		return true // no fixed release yet
	}
	highest := ""
	for _, f := range a.Fixed {
		fv := "v" + f
		if semver.MajorMinor(fv) == semver.MajorMinor(sv) {
			return semver.Compare(sv, fv) < 0
		}
		if highest == "" || semver.Compare(fv, highest) > 0 {
			highest = fv
		}
	}
	return highest != "" && semver.Compare(sv, highest) < 0
}

// PostureOf derives the posture from a run's Engine facts, matching the
// components against advisories (KnownAdvisories when nil).
func PostureOf(r *Run, advisories []Advisory) Posture {
	return postureOf(r.Engine, advisories)
}

func postureOf(e driver.EngineFacts, advisories []Advisory) Posture {
	if advisories == nil {
		advisories = KnownAdvisories
	}
	p := Posture{DefaultRuntime: e.DefaultRuntime, Runtimes: slices.Clone(e.Runtimes)}
	if p.Runtimes == nil {
		p.Runtimes = []string{}
	}
	p.Advisories = []AdvisoryMatch{}
	for _, c := range []Component{{Name: "runc", Build: e.RuncCommit}, {Name: "containerd", Build: e.ContainerdCommit}} {
		for _, line := range e.Components {
			if v, ok := strings.CutPrefix(line, c.Name+" "); ok {
				c.Version = v
				break
			}
		}
		c.Upstream, c.Distribution, _ = ParseUpstream(c.Version)
		p.Components = append(p.Components, c)
		for _, a := range advisories {
			if a.Component == c.Name && a.Affected(c.Upstream) {
				p.Advisories = append(p.Advisories, AdvisoryMatch{ID: a.ID, Component: c.Name, Version: c.Version,
					Summary: a.Summary, Fixed: slices.Clone(a.Fixed), Backports: c.Distribution != ""})
			}
		}
	}
	return p
}

// Component returns the named component; ok is false when absent.
func (p Posture) Component(name string) (Component, bool) {
	i := slices.IndexFunc(p.Components, func(c Component) bool { return c.Name == name })
	if i < 0 {
		return Component{}, false
	}
	return p.Components[i], true
}

// Lines renders the posture for report headers: the runtimes, each
// component and each advisory matched.
func (p Posture) Lines() []string {
	return postureLines(runtimeLine(p.DefaultRuntime, p.Runtimes), p.Components, p.Advisories, nil)
}

// Brief renders the posture in two lines for a run's stdout: the
// runtimes, and the advisories matched by component (Lines has each).
func (p Posture) Brief() []string {
	return postureBrief(runtimeLine(p.DefaultRuntime, p.Runtimes), p.Components, p.Advisories)
}

// runtimeLine is the first line of Lines and Brief.
func runtimeLine(defaultRuntime string, runtimes []string) string {
	if defaultRuntime == "" {
		defaultRuntime = "(not recorded)"
	}
	return fmt.Sprintf("runtime: %s (of %s)", defaultRuntime, strings.Join(runtimes, ", "))
}

// postureLines renders Lines after the runtime line rt; flags, when not
// nil, has a note for each advisory ("" for none), shown after it in
// parentheses.
func postureLines(rt string, components []Component, advisories []AdvisoryMatch, flags []string) []string {
	out := []string{rt}
	for _, c := range components {
		up := c.Upstream
		if up == "" {
			up = "unknown"
		}
		s := fmt.Sprintf("%s: %s (upstream %s", c.Name, orNone(c.Version), up)
		if c.Distribution != "" {
			s += ", distribution build " + c.Build
		}
		out = append(out, s+")")
	}
	if len(advisories) == 0 {
		return append(out, "advisories: none known for these versions")
	}
	for i, a := range advisories {
		s := fmt.Sprintf("advisory: %s %s %s (fixed in %s): %s", a.ID, a.Component, a.Version, strings.Join(a.Fixed, ", "), a.Summary)
		if a.Backports {
			s += "; matched by version number, the distribution may have backported the fix"
		}
		if i < len(flags) && flags[i] != "" {
			s += " (" + flags[i] + ")"
		}
		out = append(out, s)
	}
	return out
}

// postureBrief renders Brief after the runtime line rt.
func postureBrief(rt string, components []Component, advisories []AdvisoryMatch) []string {
	out := []string{rt}
	var parts []string
	for _, c := range components {
		var ids []string
		for _, a := range advisories {
			if a.Component == c.Name {
				ids = append(ids, a.ID)
			}
		}
		if len(ids) == 0 {
			continue
		}
		s := fmt.Sprintf("%s %s: %s", c.Name, c.Version, strings.Join(ids, ", "))
		if c.Distribution != "" {
			s += " by version number (a distribution build: fixes may be backported)"
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return append(out, "advisories: none known for these versions")
	}
	return append(out, "advisories: "+strings.Join(parts, "; "))
}

// Notes on a PostureReading's advisories, as Lines and Brief show them.
const (
	// NotRecordedNote marks an advisory of this build's list that the
	// report's recorded posture leaves out.
	NotRecordedNote = "not recorded by the report; this verifier's list"
	// RecordedOnlyNote marks an advisory the report records that this
	// build's list does not put the version under (a harness with a
	// longer or other list recorded it).
	RecordedOnlyNote = "recorded by the report; not this verifier's list"
)

// PostureReading is a verified report's posture as this qualify build
// reads it (docs/qualification.md#posture): the runtimes and components
// its Engine facts give, the advisories of this build's KnownAdvisories
// they fall under, and beside them any other advisory the report's
// recorded posture lists, each marked with whether the record lists it
// and whether this build's list has it. Verification accepts a record
// that lists fewer advisories than this build knows (an older harness
// knew fewer), so a record alone could say "none known" over a runc this
// build knows to be affected; what verify and merge show a reader is
// this reading, the record staying what the harness said (Run.Posture).
type PostureReading struct {
	DefaultRuntime string      `json:"defaultRuntime"`
	Runtimes       []string    `json:"runtimes"`
	Components     []Component `json:"components"`
	// Advisories are this build's matches in KnownAdvisories order, then
	// those only the record lists, in its order.
	Advisories []ReadAdvisory `json:"advisories"`
	// Recorded is false when the report records no posture (made before
	// catalogue version 9).
	Recorded bool `json:"recorded"`
}

// ReadAdvisory is one advisory of a PostureReading.
type ReadAdvisory struct {
	AdvisoryMatch
	// Recorded is whether the report's recorded posture lists it.
	Recorded bool `json:"recorded"`
	// Known is whether this build's KnownAdvisories put the version
	// under it.
	Known bool `json:"known"`
}

// Note is how Lines and Brief mark a: NotRecordedNote, RecordedOnlyNote
// or "" when the record and this build agree.
func (a ReadAdvisory) Note() string {
	switch {
	case !a.Recorded:
		return NotRecordedNote
	case !a.Known:
		return RecordedOnlyNote
	}
	return ""
}

// ReadPosture reads r's posture with this build's KnownAdvisories
// (PostureReading); nil for a run without an Engine, which has no
// runtime to read. r must be verified: an advisory its record lists is
// taken as verification checked it, following from the Engine facts.
func ReadPosture(r *Run) *PostureReading {
	if engineless(r) {
		return nil
	}
	p := PostureOf(r, nil)
	out := &PostureReading{DefaultRuntime: p.DefaultRuntime, Runtimes: p.Runtimes, Components: p.Components,
		Advisories: []ReadAdvisory{}, Recorded: r.Posture != nil}
	var recorded []AdvisoryMatch
	if r.Posture != nil {
		recorded = r.Posture.Advisories
	}
	same := func(a, b AdvisoryMatch) bool { return a.ID == b.ID && a.Component == b.Component }
	for _, a := range p.Advisories {
		out.Advisories = append(out.Advisories, ReadAdvisory{AdvisoryMatch: a, Known: true,
			Recorded: slices.ContainsFunc(recorded, func(m AdvisoryMatch) bool { return same(a, m) })})
	}
	for _, m := range recorded {
		if !slices.ContainsFunc(p.Advisories, func(a AdvisoryMatch) bool { return same(a, m) }) {
			out.Advisories = append(out.Advisories, ReadAdvisory{AdvisoryMatch: m, Recorded: true})
		}
	}
	return out
}

// Unrecorded are the IDs of the advisories this build finds that the
// report's record leaves out, in order.
func (p *PostureReading) Unrecorded() []string {
	var ids []string
	for _, a := range p.Advisories {
		if !a.Recorded {
			ids = append(ids, a.ID)
		}
	}
	return ids
}

func (p *PostureReading) matches() (ms []AdvisoryMatch, notes []string) {
	for _, a := range p.Advisories {
		ms = append(ms, a.AdvisoryMatch)
		notes = append(notes, a.Note())
	}
	return ms, notes
}

// runtimeLine is Posture's runtime line, or says that the Engine facts
// have no runtimes (a report made before they were recorded).
func (p *PostureReading) runtimeLine() string {
	if p.DefaultRuntime == "" && len(p.Runtimes) == 0 {
		return "runtime: not in the Engine facts"
	}
	return runtimeLine(p.DefaultRuntime, p.Runtimes)
}

// source is the first line of Lines and Brief: whose reading this is,
// and how the report's record compares.
func (p *PostureReading) source() string {
	const head = "posture: this verifier's reading of the Engine facts; "
	switch {
	case !p.Recorded:
		return head + "the report records none"
	case slices.ContainsFunc(p.Advisories, func(a ReadAdvisory) bool { return a.Note() != "" }):
		return head + "the report's record differs (each difference marked)"
	}
	return head + "the report's record agrees"
}

// Lines renders the reading as Posture.Lines does, after a line saying
// whose it is, each advisory with its Note.
func (p *PostureReading) Lines() []string {
	ms, notes := p.matches()
	return append([]string{p.source()}, postureLines(p.runtimeLine(), p.Components, ms, notes)...)
}

// Brief renders the reading as Posture.Brief does, after a line saying
// whose it is, then a line naming the advisories the record leaves out
// and one naming those only the record lists, when there are any.
func (p *PostureReading) Brief() []string {
	ms, _ := p.matches()
	out := append([]string{p.source()}, postureBrief(p.runtimeLine(), p.Components, ms)...)
	var only []string
	for _, a := range p.Advisories {
		if a.Note() == RecordedOnlyNote {
			only = append(only, a.ID)
		}
	}
	if ids := p.Unrecorded(); len(ids) > 0 {
		out = append(out, "not recorded by the report (this verifier's list): "+strings.Join(ids, ", "))
	}
	if len(only) > 0 {
		out = append(out, "recorded by the report (not this verifier's list): "+strings.Join(only, ", "))
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "(none reported)"
	}
	return s
}

// postureProblems says where r's recorded posture contradicts its Engine
// facts: its runtimes and components must be those the facts give, and
// each advisory it lists must be one its own fixed releases make the
// recorded version fall under. A shorter list than this build's is not a
// problem (an older harness knew fewer): verify and merge show readers
// ReadPosture, which marks what the record leaves out, and the gate
// judges the facts with its own list (FloorProblems). A header without a posture (made before it was
// recorded) has none, unless it claims catalogue version 9 or later,
// whose runs all record it: dropping it would leave a reader of
// summary.md and report.html no account of the runtime.
func postureProblems(r *Run) []string {
	if r.Posture == nil {
		if claimsCatalogue(r, probeChecksCatalogue) && !engineless(r) {
			return []string{fmt.Sprintf("no posture, which a run of catalogue v%d records", r.Harness.CatalogueVersion)}
		}
		return nil
	}
	got := *r.Posture
	var out []string
	want := PostureOf(r, []Advisory{})
	if !slices.Equal(got.Runtimes, want.Runtimes) || got.DefaultRuntime != want.DefaultRuntime {
		out = append(out, fmt.Sprintf("posture runtimes %s of %q, but the Engine facts give %s of %q", got.DefaultRuntime, got.Runtimes, want.DefaultRuntime, want.Runtimes))
	}
	if !slices.Equal(got.Components, want.Components) {
		out = append(out, fmt.Sprintf("posture components %+v, but the Engine facts give %+v", got.Components, want.Components))
	}
	for _, m := range got.Advisories {
		c, ok := want.Component(m.Component)
		a := Advisory{ID: m.ID, Component: m.Component, Fixed: m.Fixed}
		if !ok || c.Version != m.Version || !a.Affected(c.Upstream) || m.Backports != (c.Distribution != "") {
			out = append(out, fmt.Sprintf("posture advisory %s for %s %q does not follow from the Engine facts (fixed in %s)", m.ID, m.Component, m.Version, strings.Join(m.Fixed, ", ")))
		}
	}
	return out
}

// Floor is a release gate's lowest accepted version of a runtime
// component (docs/qualification.md#gate): a report whose Engine reports
// the component below Minimum fails the gate unless its exact build is
// one of Builds.
type Floor struct {
	// Component is "runc" or "containerd".
	Component string `yaml:"component" json:"component"`
	// Minimum is the lowest accepted upstream release, in semantic
	// version form without "v" ("1.2.8", "1.4.0-rc.3").
	Minimum string `yaml:"minimum" json:"minimum"`
	// Builds are exact builds (/info RuncCommit or ContainerdCommit IDs,
	// "1.1.5+ds1-1+deb12u1") accepted below Minimum: a distribution's
	// package whose changelog the release manager read and found to carry
	// the fixes the floor stands for.
	Builds []string `yaml:"builds,omitempty" json:"builds,omitempty"`
}

// FloorComponents are the components a Floor can name.
var FloorComponents = []string{"runc", "containerd"}

// validate says what is wrong with f, "" when nothing.
func (f Floor) validate() string {
	switch {
	case !slices.Contains(FloorComponents, f.Component):
		return fmt.Sprintf("component %q: want one of %v", f.Component, FloorComponents)
	case f.Minimum == "":
		return "minimum is required (an upstream release, e.g. 1.2.8)"
	}
	up, dist, ok := ParseUpstream(f.Minimum)
	if !ok || dist != "" || up != f.Minimum || !semver.IsValid("v"+up) {
		return fmt.Sprintf("minimum %q: want an upstream release such as 1.2.8 or 1.4.0-rc.3", f.Minimum)
	}
	for i, b := range f.Builds {
		switch {
		case strings.TrimSpace(b) == "":
			return fmt.Sprintf("builds[%d] is empty", i)
		case slices.Contains(f.Builds[:i], b):
			return fmt.Sprintf("builds[%d] %q is listed twice", i, b)
		}
	}
	return ""
}

// buildReleaseRE is an upstream release named in a build after a
// separator or at its start: "1.1.5+ds1-1+deb12u1", "v1.3.3-0-gd842d771",
// "module-v1.3.4", "1.1.12-0ubuntu2~22.04.1" (the first release wins).
var buildReleaseRE = regexp.MustCompile(`(?:^|[^0-9A-Za-z.])v?(\d+\.\d+\.\d+)(?:-rc\.?(\d+))?`)

// commitRE is a bare commit ID, which names no release.
var commitRE = regexp.MustCompile(`^[0-9a-f]{7,64}$`)

// buildRelease returns the upstream release (semantic version form) a
// component's build names, "" for none; why says why the build cannot be
// judged: white space or control characters, or text that names no
// release and is not a commit ID (an empty build names nothing and is
// fine).
func buildRelease(build string) (upstream, why string) {
	if strings.ContainsFunc(build, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return "", "the build has white space or control characters"
	}
	if m := buildReleaseRE.FindStringSubmatch(build); m != nil {
		upstream = m[1]
		if m[2] != "" {
			upstream += "-rc." + m[2]
		}
		return upstream, ""
	}
	if build == "" || commitRE.MatchString(build) {
		return "", ""
	}
	return "", "the build names no release and is not a commit ID"
}

// componentLines counts the lines of components that name component (the
// first white-space-separated field, any case) and says whether one of
// them is not exactly "<component> <version>" (one ASCII space, a version
// without white space): PostureOf reads only that form, so any other
// spelling would hide a second version from it.
func componentLines(components []string, component string) (n int, odd bool) {
	for _, line := range components {
		fields := strings.FieldsFunc(line, unicode.IsSpace)
		if len(fields) == 0 || !strings.EqualFold(fields[0], component) {
			continue
		}
		n++
		if len(fields) != 2 || line != component+" "+fields[1] {
			odd = true
		}
	}
	return n, odd
}

// FloorProblems judges r's Engine facts (not its recorded posture) by
// floors: one line per floor that fails, nil when every floor holds. A
// floor fails when the component's version is below its minimum or falls
// under one of this build's KnownAdvisories (fixes come per release line,
// so a later line can lack a fix an earlier one has), unless its build is
// one the floor accepts and names the same upstream release; it also
// fails, accepted build or not, when the Engine lists the component
// twice (in any case or spacing) or in another form than "<name>
// <version>", when version and build name different releases, when the
// build names no release and is not a commit ID, when the version names
// no release, and (for runc) when the default runtime is another one or
// not recorded, so that runc's version is not shown to be the runtime's.
func FloorProblems(r *Run, floors []Floor) []string {
	p := PostureOf(r, nil)
	var out []string
	for _, f := range floors {
		if why := floorProblem(r, p, f); why != "" {
			out = append(out, why)
		}
	}
	return out
}

// floorProblem is floor f's line of FloorProblems, "" when it holds: the
// component must be shown to be one version of the runtime in use
// (floorUnshown), then be an accepted build or at or above the minimum
// and under none of its advisories (floorBelow).
func floorProblem(r *Run, p Posture, f Floor) string {
	c, _ := p.Component(f.Component)
	why := floorUnshown(r, p, f, c)
	if why == "" {
		why = floorBelow(p, f, c)
	}
	if why == "" {
		return ""
	}
	return fmt.Sprintf("%s %s (build %s): ", f.Component, strconv.Quote(c.Version), strconv.Quote(c.Build)) + why
}

// floorUnshown says why floor f cannot be shown to hold of component c:
// it is listed twice or oddly, its version or build names no release, or
// they name different ones, or (runc) the default runtime is not runc.
func floorUnshown(r *Run, p Posture, f Floor, c Component) string {
	n, odd := componentLines(r.Engine.Components, f.Component)
	buildUp, buildWhy := buildRelease(c.Build)
	switch {
	case n > 1:
		return fmt.Sprintf("the Engine lists %s %d times, so the policy's floor %s cannot be shown to hold", f.Component, n, f.Minimum)
	case odd:
		return fmt.Sprintf("the Engine lists %s in another form than \"%s <version>\", so the policy's floor %s cannot be shown to hold", f.Component, f.Component, f.Minimum)
	case c.Upstream == "":
		return fmt.Sprintf("the version names no upstream release, so the policy's floor %s cannot be shown to hold", f.Minimum)
	case buildWhy != "":
		return fmt.Sprintf("%s, so the policy's floor %s cannot be shown to hold", buildWhy, f.Minimum)
	case buildUp != "" && buildUp != c.Upstream:
		return fmt.Sprintf("the version names %s and the build %s, so the policy's floor %s cannot be shown to hold", c.Upstream, buildUp, f.Minimum)
	case f.Component == "runc" && p.DefaultRuntime == "":
		return fmt.Sprintf("the Engine facts record no default runtime, so the policy's runc floor %s cannot be shown to be of the runtime in use", f.Minimum)
	case f.Component == "runc" && p.DefaultRuntime != "runc":
		return fmt.Sprintf("the default runtime is %q, not runc, so the policy's runc floor %s says nothing of the runtime in use", p.DefaultRuntime, f.Minimum)
	}
	return ""
}

// floorBelow says why component c, shown to be one release, fails floor
// f: not an accepted build (naming a release), and below the minimum or
// under one of this build's advisories for it by version number.
func floorBelow(p Posture, f Floor, c Component) string {
	if buildUp, _ := buildRelease(c.Build); slices.Contains(f.Builds, c.Build) && buildUp != "" {
		return ""
	}
	var ids []string
	for _, a := range p.Advisories {
		if a.Component == f.Component {
			ids = append(ids, a.ID)
		}
	}
	below := semver.Compare("v"+c.Upstream, "v"+f.Minimum) < 0
	switch {
	case below && len(ids) > 0:
		return fmt.Sprintf("below the policy's floor %s and not one of its accepted builds; by version number it falls under %s", f.Minimum, strings.Join(ids, ", "))
	case below:
		return fmt.Sprintf("below the policy's floor %s and not one of its accepted builds", f.Minimum)
	case len(ids) > 0:
		return fmt.Sprintf("at or above the policy's floor %s, but by version number it falls under %s and is not one of its accepted builds", f.Minimum, strings.Join(ids, ", "))
	}
	return ""
}
