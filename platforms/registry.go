package platforms

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/qualbox/qualbox/profiles"
)

// registry is every platform, in the gate matrix's column order: the
// generated policies and workflow list the rows in this order.
var registry = []Platform{
	linuxX64CgroupV1,
	linuxX64,
	linuxARM64,
	linuxARM64EmulatedAMD64,
	desktopNativeARM64,
	desktopRosettaAMD64,
	linuxARM64Cgroupfs,
	// A new platform: one line here, its Platform in a file of its own.
}

// All returns every platform in matrix order. The result is a deep copy:
// changing it changes nothing else.
func All() []Platform {
	out := make([]Platform, len(registry))
	for i, p := range registry {
		out[i] = p.clone()
	}
	return out
}

func (p Platform) clone() Platform {
	p.Manifests = slices.Clone(p.Manifests)
	for i, m := range p.Manifests {
		m.Only = slices.Clone(m.Only)
		m.Overrides = slices.Clone(m.Overrides)
		for k, o := range m.Overrides {
			m.Overrides[k].Params = slices.Clone(o.Params)
		}
		p.Manifests[i] = m
	}
	p.Rows = slices.Clone(p.Rows)
	for i, r := range p.Rows {
		r.Runner = slices.Clone(r.Runner)
		r.Waived = slices.Clone(r.Waived)
		if r.ReleaseRan != nil {
			ran := *r.ReleaseRan
			ran.Lacks = slices.Clone(ran.Lacks)
			r.ReleaseRan = &ran
		}
		p.Rows[i] = r
	}
	return p
}

// Entry is a row with its profile and its manifest's scenarios.
type Entry struct {
	Row
	// Profile is the row's platform's profile.
	Profile string
	// Scenarios are the row's manifest's entries (Manifest.Scenarios).
	Scenarios []Scenario
}

// Entries returns every row of platforms, in order, with its profile and
// its manifest's resolved scenario list; it returns Check's error when
// the platforms are not consistent.
func Entries(platforms []Platform) ([]Entry, error) {
	if err := Check(platforms, nil); err != nil {
		return nil, err
	}
	var out []Entry
	for _, p := range platforms {
		for _, r := range p.Rows {
			m, _ := p.manifest(r.Manifest)
			scenarios, _ := m.Scenarios()
			out = append(out, Entry{Row: r, Profile: p.Profile, Scenarios: scenarios})
		}
	}
	return out, nil
}

// Rows returns every row of the registry with its profile and scenarios.
// It panics if the registry is inconsistent, which a test of this package
// rules out.
func Rows() []Entry {
	e, err := Entries(All())
	if err != nil {
		panic(err)
	}
	return e
}

// RowNames returns the names of the registry's rows for which keep
// returns true (every row when keep is nil), in matrix order.
func RowNames(keep func(Entry) bool) []string {
	var names []string
	for _, e := range Rows() {
		if keep == nil || keep(e) {
			names = append(names, e.Name)
		}
	}
	return names
}

// Required returns the scenarios the gates require of the row: its
// manifest's, in run order, less the waived ones.
func (e Entry) Required() []string {
	var out []string
	for _, s := range e.Scenarios {
		if !slices.Contains(e.Waived, s.Name) {
			out = append(out, s.Name)
		}
	}
	return out
}

func (p Platform) manifest(file string) (Manifest, bool) {
	i := slices.IndexFunc(p.Manifests, func(m Manifest) bool { return m.File == file })
	if i < 0 {
		return Manifest{}, false
	}
	return p.Manifests[i], true
}

// Scenarios returns the manifest's scenario list: the catalogue's
// entries, narrowed to Only when it is set, in catalogue order, with the
// Overrides applied. It returns an error naming an Only or Override
// scenario the catalogue does not have, or one overridden twice.
func (m Manifest) Scenarios() ([]Scenario, error) {
	names := make([]string, len(Catalogue))
	for i, s := range Catalogue {
		names[i] = s.Name
	}
	for _, n := range m.Only {
		if !slices.Contains(names, n) {
			return nil, fmt.Errorf("only: %q is not a scenario of the catalogue (%s)", n, strings.Join(names, ", "))
		}
	}
	for i, o := range m.Overrides {
		if !slices.Contains(names, o.Scenario) {
			return nil, fmt.Errorf("overrides[%d]: %q is not a scenario of the catalogue (%s)", i, o.Scenario, strings.Join(names, ", "))
		}
		if slices.ContainsFunc(m.Overrides[:i], func(p Override) bool { return p.Scenario == o.Scenario }) {
			return nil, fmt.Errorf("overrides[%d]: %q is overridden twice", i, o.Scenario)
		}
		if len(m.Only) > 0 && !slices.Contains(m.Only, o.Scenario) {
			return nil, fmt.Errorf("overrides[%d]: %q is not one of the scenarios the manifest runs (only: %s)", i, o.Scenario, strings.Join(m.Only, ", "))
		}
		if o.Unnoted && o.Note != "" {
			return nil, fmt.Errorf("overrides[%d] (%s): a note and unnoted", i, o.Scenario)
		}
	}
	var out []Scenario
	for _, s := range Catalogue {
		if len(m.Only) > 0 && !slices.Contains(m.Only, s.Name) {
			continue
		}
		s.Params = slices.Clone(s.Params)
		if i := slices.IndexFunc(m.Overrides, func(o Override) bool { return o.Scenario == s.Name }); i >= 0 {
			o := m.Overrides[i]
			if o.Params != nil {
				s.Params = slices.Clone(o.Params)
			}
			switch {
			case o.Unnoted:
				s.Note = ""
			case o.Note != "":
				s.Note = o.Note
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// Error lists what is wrong with a registry, one problem per line, each
// naming the platform, and the row or manifest, it concerns.
type Error struct {
	Problems []string
}

var _ error = (*Error)(nil)

func (e *Error) Error() string {
	return "platforms: " + strings.Join(e.Problems, "\n\t")
}

// Check returns *Error listing every inconsistency of platforms: a
// profile that is not one of profileNames (nil skips that check) or
// that two platforms claim, a duplicate manifest file, a row name that
// is empty, not of the charset rowName allows or given twice, a manifest
// no row runs or a row naming no manifest of its platform, a scenario
// list that does not resolve (Manifest.Scenarios), a waived scenario the
// manifest does not run, a row without runner labels, with one empty,
// not of the charset runnerLabel allows or given twice, a row without CI
// gate, a required CI row that runs only when dispatched, a row the CI gate
// holds more strictly than the release gate, a release-ran manifest that
// is misnamed, lacks nothing or lacks a scenario the row's manifest does
// not run, a guest without tuple or
// architecture, a hosted row without docker-ce version, and tuple pins
// that cannot tell rows of one profile apart.
//
// The checks run platform by platform, in the order the problems are
// listed: the platform's profile and rows (checkPlatform), each manifest
// (checkManifest), each row against its manifest (checkRowManifest) and
// its own fields (checkRow), and last the rows' tuple pins
// (checkDistinct).
func Check(platforms []Platform, profileNames []string) error {
	c := &registryCheck{profileNames: profileNames, profileOf: map[string]bool{}, fileOf: map[string]string{}, rowOf: map[string]string{}}
	for _, p := range platforms {
		c.checkPlatform(p)
	}
	if len(c.problems) > 0 {
		return &Error{Problems: c.problems}
	}
	return nil
}

// registryCheck is the state of one Check as it goes over the platforms.
type registryCheck struct {
	profileNames []string
	// profileOf holds the profiles seen; fileOf and rowOf map a manifest
	// file and a row name to the profile of the platform that has it.
	profileOf     map[string]bool
	fileOf, rowOf map[string]string
	problems      []string
}

func (c *registryCheck) add(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

// checkPlatform checks p's profile, manifests and rows.
func (c *registryCheck) checkPlatform(p Platform) {
	at := "platform " + p.Profile
	switch {
	case p.Profile == "":
		c.add("a platform has no profile")
	case c.profileOf[p.Profile]:
		c.add("%s: a second platform of the profile; add its rows to the first", at)
	case c.profileNames != nil && !slices.Contains(c.profileNames, p.Profile):
		c.add("%s: no profile profiles/profiles/%s.yaml (profiles: %s)", at, p.Profile, strings.Join(c.profileNames, ", "))
	}
	c.profileOf[p.Profile] = true
	if len(p.Rows) == 0 {
		c.add("%s: no rows", at)
	}
	for _, m := range p.Manifests {
		c.checkManifest(at, p, m)
	}
	for _, r := range p.Rows {
		rat := at + ", row " + r.Name
		switch {
		case r.Name == "":
			c.add("%s: a row has no name", at)
		case !rowName.MatchString(r.Name):
			c.add("%s: the name must match %s (it names the row in YAML lists, the workflow matrix and report directories)", rat, rowName)
		case c.rowOf[r.Name] != "":
			c.add("%s: the name is also a row of platform %s", rat, c.rowOf[r.Name])
		}
		c.rowOf[r.Name] = p.Profile
		c.checkRowManifest(rat, p, r)
		c.problems = append(c.problems, checkRow(rat, r)...)
	}
	c.problems = append(c.problems, checkDistinct(at, p.Rows)...)
}

// checkManifest checks m, a manifest of p (at names p): its file name,
// that no other platform has it, its scenarios, and that a row runs it.
func (c *registryCheck) checkManifest(at string, p Platform, m Manifest) {
	mat := at + ", manifest " + m.File
	switch {
	case !yamlFileName(m.File):
		c.add("%s: the file name must be NAME.yaml, in manifests/", mat)
	case c.fileOf[m.File] != "":
		c.add("%s: also a manifest of platform %s", mat, c.fileOf[m.File])
	}
	c.fileOf[m.File] = p.Profile
	if _, err := m.Scenarios(); err != nil {
		c.add("%s: %v", mat, err)
	}
	if !slices.ContainsFunc(p.Rows, func(r Row) bool { return r.Manifest == m.File }) {
		c.add("%s: no row runs it", mat)
	}
}

// checkRowManifest checks r (rat names it) against its manifest: that p
// has it, and, when its scenarios resolve, that r waives and its
// release-ran manifest lacks only scenarios it runs, and not all.
func (c *registryCheck) checkRowManifest(rat string, p Platform, r Row) {
	m, ok := p.manifest(r.Manifest)
	if !ok {
		c.add("%s: manifest %q is not one of the platform's", rat, r.Manifest)
		return
	}
	scenarios, err := m.Scenarios()
	if err != nil {
		return
	}
	runs := func(name string) bool {
		return slices.ContainsFunc(scenarios, func(s Scenario) bool { return s.Name == name })
	}
	for _, w := range r.Waived {
		if !runs(w) {
			c.add("%s: waived scenario %q is not one manifest %s runs", rat, w, m.File)
		}
	}
	if len(r.Waived) >= len(scenarios) {
		c.add("%s: every scenario is waived", rat)
	}
	if ran := r.ReleaseRan; ran != nil {
		for _, l := range ran.Lacks {
			if !runs(l) {
				c.add("%s: release-ran %s lacks %q, which manifest %s does not run either", rat, ran.File, l, m.File)
			}
		}
	}
}

// rowName is what a row's name may be: it is written unquoted into the
// gate policies' flow lists and the workflow matrix, so no space, comma,
// bracket or quote; lower case, digits, "." and "-", starting and ending
// with a letter or digit (e.g. "ref-29.1.3").
var rowName = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$`)

// runnerLabel is what a runs-on label may be: letters, digits, ".", "_"
// and "-", starting with a letter or digit (e.g. "ubuntu-24.04-arm",
// "self-hosted", "macOS").
var runnerLabel = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// yamlFileName says whether name is NAME.yaml, without a directory.
func yamlFileName(name string) bool {
	return name != "" && !strings.ContainsAny(name, `/\`) && strings.HasSuffix(name, ".yaml")
}

// checkRow returns what is wrong with one row's own fields: its runner
// and gates (checkGates), its release-ran manifest (checkReleaseRan) and
// its Engine bring-up (checkBringUp), in that order.
func checkRow(at string, r Row) []string {
	c := &rowCheck{at: at, r: r}
	c.checkGates()
	c.checkReleaseRan()
	c.checkBringUp()
	return c.out
}

// rowCheck is the state of one checkRow: the row, at (what names it)
// and the problems found.
type rowCheck struct {
	at  string
	r   Row
	out []string
}

func (c *rowCheck) add(format string, args ...any) {
	c.out = append(c.out, c.at+": "+fmt.Sprintf(format, args...))
}

// checkGates checks the runner labels and the CI and release gates.
func (c *rowCheck) checkGates() {
	r := c.r
	if len(r.Runner) == 0 || slices.Contains(r.Runner, "") {
		c.add("runner labels %q: want at least one, none empty", r.Runner)
	}
	for i, l := range r.Runner {
		switch {
		case l != "" && !runnerLabel.MatchString(l):
			c.add("runner label %q: want one matching %s", l, runnerLabel)
		case slices.Contains(r.Runner[:i], l) && l != "":
			c.add("runner label %q is given twice", l)
		}
	}
	switch r.CIGate {
	case Informational:
	case Required:
		if r.DispatchOnly {
			c.add("the CI gate requires it, but the workflow runs it only when dispatched: every other run's gate would fail")
		}
	default:
		c.add("CIGate must be Informational or Required: the workflow runs every row, and its gate lists each")
	}
	if r.ReleaseGate == Informational && r.CIGate == Required {
		c.add("the CI gate requires it, the release gate does not: the CI gate may only be laxer")
	}
	if r.ReleaseGate < Absent || r.ReleaseGate > Required {
		c.add("ReleaseGate %d is not a Requirement", r.ReleaseGate)
	}
}

// checkReleaseRan checks the row's release-ran manifest, if it has one.
func (c *rowCheck) checkReleaseRan() {
	ran := c.r.ReleaseRan
	if ran == nil {
		return
	}
	switch {
	case c.r.ReleaseGate == Absent:
		c.add("release-ran %s: the release gate does not hold the row", ran.File)
	case !yamlFileName(ran.File):
		c.add("release-ran: the file name must be NAME.yaml, in reports/manifests/")
	case len(ran.Lacks) == 0:
		c.add("release-ran %s: it lacks no scenario, so the current manifest is the one the reports ran", ran.File)
	}
}

// checkBringUp checks the row's Engine bring-up against its kind.
func (c *rowCheck) checkBringUp() {
	r, b := c.r, c.r.Engine
	if r.DispatchOnly && b.Kind != Guest {
		c.add("dispatch-only: only a guest row's job (lane-c) runs rows only when dispatched")
	}
	switch b.Kind {
	case LaneA, LaneB, Desktop:
		if b != (BringUp{Kind: b.Kind}) {
			c.add("bring-up %s takes no tuple, arch, emulator or docker-ce version", b.Kind)
		}
	case Guest:
		if b.Tuple == "" || (b.Arch != "amd64" && b.Arch != "arm64") || b.DockerCE != "" {
			c.add("a guest needs a tuple and arch amd64 (lane C) or arm64 (lane D), and no docker-ce version (LaneC, LaneD)")
		}
	case Hosted:
		if b.DockerCE == "" || b.Tuple != "" || b.Arch != "" || b.Emulate != "" {
			c.add("a hosted row needs the docker-ce version it installs, and nothing else (HostedDockerCE)")
		}
		if len(r.Runner) != 1 {
			c.add("a hosted row runs on one GitHub-hosted runner label, got %q", r.Runner)
		}
	default:
		c.add("no Engine bring-up (EngineUp, EngineUpB, LaneC, LaneD, HostedDockerCE, DockerDesktop)")
	}
}

// checkDistinct returns a problem for each two rows of one platform whose
// tuple pins are equal: a report of one would match both.
func checkDistinct(at string, rows []Row) []string {
	var out []string
	for i, r := range rows {
		for _, o := range rows[:i] {
			if r.Tuple == o.Tuple {
				out = append(out, fmt.Sprintf("%s: rows %s and %s pin the same tuple %+v, so a report of one matches both", at, o.Name, r.Name, r.Tuple))
			}
		}
	}
	return out
}

// Validate checks the registry against the embedded profiles: Check,
// every platform's profile loads (profiles.Load), and every profile has a
// platform; and the signers' keys against it (CheckKeys). It returns
// *Error.
func Validate() error {
	err := validate(registry, profiles.Names(), func(name string) error { _, err := profiles.Load(name); return err })
	if err == nil {
		err = CheckKeys(keys, registry)
	}
	return err
}

func validate(all []Platform, names []string, load func(string) error) error {
	err := Check(all, names)
	var problems []string
	if e, ok := err.(*Error); ok {
		problems = e.Problems
	}
	for _, p := range all {
		if slices.Contains(names, p.Profile) {
			if err := load(p.Profile); err != nil {
				problems = append(problems, fmt.Sprintf("platform %s: %v", p.Profile, err))
			}
		}
	}
	for _, n := range names {
		if !slices.ContainsFunc(all, func(p Platform) bool { return p.Profile == n }) {
			problems = append(problems, fmt.Sprintf("profile %s has no platform: add one (README.md \"Adding a host row\")", n))
		}
	}
	if len(problems) > 0 {
		return &Error{Problems: problems}
	}
	return nil
}

// text joins lines with newlines: a comment of several lines.
func text(lines ...string) string { return strings.Join(lines, "\n") }
