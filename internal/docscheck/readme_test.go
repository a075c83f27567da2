package docscheck

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/profiles"
	"github.com/qualbox/qualbox/qualify/manifest"
	"github.com/qualbox/qualbox/qualify/scenario"
)

func readFile(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, name))
	assert.NilError(t, err)
	return string(data)
}

// firstScreen is the README up to its second level-2 heading: the title,
// what qualbox is, the host table and the quick start with its sample.
func firstScreen(readme string) string {
	n := 0
	for i := 0; i < len(readme); {
		j := strings.IndexByte(readme[i:], '\n')
		if j < 0 {
			break
		}
		if strings.HasPrefix(readme[i+j+1:], "## ") {
			if n++; n == 2 {
				return readme[:i+j+1]
			}
		}
		i += j + 1
	}
	return readme
}

// section is the text of the level-2 section titled heading, without
// the heading line; "" when there is none.
func section(doc, heading string) string {
	_, after, ok := strings.Cut(doc, "\n## "+heading+"\n")
	if !ok {
		return ""
	}
	if i := strings.Index(after, "\n## "); i >= 0 {
		return after[:i]
	}
	return after
}

// fences returns the bodies of the fenced code blocks of md whose info
// string is info ("" for a bare fence).
func fences(md, info string) []string {
	var out []string
	var b strings.Builder
	in, match := false, false
	for _, l := range strings.Split(md, "\n") {
		switch {
		case !in && strings.HasPrefix(l, "```"):
			in, match = true, l == "```"+info
			b.Reset()
		case in && l == "```":
			in = false
			if match {
				out = append(out, b.String())
			}
		case in:
			b.WriteString(l + "\n")
		}
	}
	return out
}

// tableRow returns the cells of the one Markdown table row of md that
// contains needle, or an error naming how many rows did.
func tableRow(md, needle string) ([]string, error) {
	var rows [][]string
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(l, "|") && strings.Contains(l, needle) {
			cells := strings.Split(strings.Trim(l, "|"), "|")
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			rows = append(rows, cells)
		}
	}
	if len(rows) != 1 {
		return nil, fmt.Errorf("%d table rows name %s, want 1", len(rows), needle)
	}
	return rows[0], nil
}

// manifestFiles returns manifests/*.yaml relative to the repository.
func manifestFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "manifests", "*.yaml"))
	assert.NilError(t, err)
	assert.Assert(t, len(files) > 0)
	for i, f := range files {
		files[i] = "manifests/" + filepath.Base(f)
	}
	return files
}

// checkHostTable reports what the first screen's host table gets wrong:
// every manifest must have one row, and that row must state its
// profile's minimum Engine API version and cgroup version and begin its
// last cell with the profile's qualification status.
func checkHostTable(screen string, manifests []string, profileOf func(string) (profiles.Profile, error)) []string {
	var errs []string
	for _, f := range manifests {
		p, err := profileOf(f)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		row, err := tableRow(screen, "`"+f+"`")
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		line := strings.Join(row, " | ")
		for _, want := range []string{"API >= " + p.Daemon.MinAPIVersion, "cgroup v" + strconv.Itoa(p.Cgroup.Version)} {
			if !strings.Contains(line, want) {
				errs = append(errs, fmt.Sprintf("the row of %s (profile %s) does not say %q", f, p.Name, want))
			}
		}
		if status := row[len(row)-1]; !strings.HasPrefix(status, p.Qualification.Status) {
			errs = append(errs, fmt.Sprintf("the row of %s says %q; profile %s is %s", f, status, p.Name, p.Qualification.Status))
		}
	}
	return errs
}

func profileOfManifest(f string) (profiles.Profile, error) {
	m, err := manifest.Load(filepath.Join(root, f), scenario.Default())
	if err != nil {
		return profiles.Profile{}, err
	}
	return profiles.Load(m.Profile)
}

// The README's first screen says which manifest fits which host with the
// prerequisites its profile's admission checks, and each profile's status
// as its YAML records it (issue: linux-x64 was called pending while its
// profile said qualified).
func TestReadmeHostTableMatchesProfiles(t *testing.T) {
	screen := firstScreen(readFile(t, "README.md"))
	for _, e := range checkHostTable(screen, manifestFiles(t), profileOfManifest) {
		t.Error(e)
	}
}

// The host-table check fails on the contradictions it exists for.
func TestReadmeHostTableCheckFails(t *testing.T) {
	p, err := profiles.Load("linux-x64")
	assert.NilError(t, err)
	of := func(string) (profiles.Profile, error) { return p, nil }
	for _, tc := range []struct{ screen, want string }{
		{"| host | `manifests/x.yaml` | API >= 1.52, cgroup v2 | pending |\n", `says "pending"; profile linux-x64 is qualified`},
		{"| host | `manifests/x.yaml` | API >= 1.41, cgroup v2 | qualified |\n", `does not say "API >= 1.52"`},
		{"| host | `manifests/x.yaml` | API >= 1.52, cgroup v1 | qualified |\n", `does not say "cgroup v2"`},
		{"no table\n", "0 table rows name `manifests/x.yaml`"},
	} {
		errs := checkHostTable(tc.screen, []string{"manifests/x.yaml"}, of)
		assert.Check(t, is.Len(errs, 1), tc.screen)
		if len(errs) == 1 {
			assert.Check(t, is.Contains(errs[0], tc.want))
		}
	}
	assert.Check(t, is.Len(checkHostTable("| h | `manifests/x.yaml` | API >= 1.52, cgroup v2 | qualified: lane C |\n", []string{"manifests/x.yaml"}, of), 0))
}

var catalogueCount = regexp.MustCompile(`catalogue of (\d+) fault scenarios`)

// The first screen states the catalogue's size, the Go version of go.mod,
// root, and a quick start of three commands.
func TestReadmeFirstScreen(t *testing.T) {
	screen := firstScreen(readFile(t, "README.md"))
	lines := strings.Count(screen, "\n")
	assert.Check(t, lines <= 60, "the README's first screen has %d lines; keep it to 60", lines)

	m := catalogueCount.FindStringSubmatch(screen)
	assert.Assert(t, m != nil, "the first screen must say %q", "catalogue of N fault scenarios")
	assert.Check(t, is.Equal(m[1], strconv.Itoa(len(scenario.Default()))), "scenario.Default() has %d scenarios", len(scenario.Default()))

	mod, err := modfile.ParseLax("go.mod", []byte(readFile(t, "go.mod")), nil)
	assert.NilError(t, err)
	goVersion := strings.Join(strings.SplitN(mod.Go.Version, ".", 3)[:2], ".")
	assert.Check(t, is.Contains(screen, "Go "+goVersion+" (`go.mod`)"))
	assert.Check(t, is.Contains(screen, "as root"))

	sh := fences(screen, "sh")
	assert.Assert(t, is.Len(sh, 1), "one sh block, the quick start")
	var commands []string
	sc := bufio.NewScanner(strings.NewReader(sh[0]))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			commands = append(commands, l)
		}
	}
	assert.Check(t, is.Len(commands, 3), "the quick start: %q", commands)
}

var sampleRow = regexp.MustCompile(`^│ (\d+) +│ ([a-z-]+) +│ ([a-z_]+) +│`)

// sampleScenarios checks a sample of `qualify run`'s stdout against the
// committed manifests: the manifest it names by digest must exist, and
// its rows must be that manifest's scenarios in run order. It returns
// the manifest's file name.
func sampleScenarios(sample string, manifests map[string]*manifest.Manifest) (string, error) {
	var digest, profile string
	var names []string
	for _, l := range strings.Split(sample, "\n") {
		if d, ok := strings.CutPrefix(l, "manifest sha256: "); ok {
			digest = d
		}
		if p, ok := strings.CutPrefix(l, "profile: "); ok {
			profile = p
		}
		if m := sampleRow.FindStringSubmatch(l); m != nil {
			if m[1] != strconv.Itoa(len(names)+1) {
				return "", fmt.Errorf("sample row %q is not number %d", l, len(names)+1)
			}
			names = append(names, m[2])
		}
	}
	for f, m := range manifests {
		if m.SHA256 != digest {
			continue
		}
		var want []string
		for _, e := range m.Scenarios {
			want = append(want, e.Name)
		}
		if m.Profile != profile {
			return f, fmt.Errorf("sample says profile %q; %s is %q", profile, f, m.Profile)
		}
		if !slices.Equal(names, want) {
			return f, fmt.Errorf("sample rows %v; %s runs %v: run it again and paste its stdout", names, f, want)
		}
		return f, nil
	}
	return "", fmt.Errorf("no committed manifest has the sample's sha256 %q: run it again and paste its stdout", digest)
}

func loadManifests(t *testing.T) map[string]*manifest.Manifest {
	t.Helper()
	out := map[string]*manifest.Manifest{}
	for _, f := range manifestFiles(t) {
		m, err := manifest.Load(filepath.Join(root, f), scenario.Default())
		assert.NilError(t, err)
		out[f] = m
	}
	return out
}

// The README's sample of what a run prints comes from a committed
// manifest as it is now, with every scenario of it, and the first screen
// shows the same run's first lines.
func TestReadmeSampleIsCurrent(t *testing.T) {
	readme := readFile(t, "README.md")
	full := fences(section(readme, "What a run prints"), "")
	assert.Assert(t, is.Len(full, 1), "README \"What a run prints\" has one bare fenced block, the sample")
	f, err := sampleScenarios(full[0], loadManifests(t))
	assert.Check(t, err)
	assert.Check(t, is.Equal(f, "manifests/linux-x64-cgroupv1.yaml"))

	screen := fences(firstScreen(readme), "")
	assert.Assert(t, is.Len(screen, 1), "the first screen has one bare fenced block, the sample")
	head, _, _ := strings.Cut(screen[0], "\n...\n")
	assert.Check(t, strings.HasPrefix(full[0], head), "the first screen's sample must begin as the full sample does")
	assert.Check(t, is.Equal(lastLine(screen[0]), lastLine(full[0])))
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// The sample check fails when the catalogue or the manifest moved on.
func TestReadmeSampleCheckFails(t *testing.T) {
	ms := loadManifests(t)
	m := ms["manifests/linux-x64-cgroupv1.yaml"]
	rows := func(names ...string) string {
		var b strings.Builder
		fmt.Fprintf(&b, "profile: %s\nmanifest sha256: %s\n", m.Profile, m.SHA256)
		for i, n := range names {
			fmt.Fprintf(&b, "│ %d │ %s │ passed │ 1/1 │\n", i+1, n)
		}
		return b.String()
	}
	var all []string
	for _, e := range m.Scenarios {
		all = append(all, e.Name)
	}
	_, err := sampleScenarios(rows(all...), ms)
	assert.Check(t, err)
	_, err = sampleScenarios(rows(all[:15]...), ms)
	assert.Check(t, is.ErrorContains(err, "run it again"), "a 15-row sample of a 17-scenario manifest")
	_, err = sampleScenarios(strings.Replace(rows(all...), m.SHA256, strings.Repeat("0", 64), 1), ms)
	assert.Check(t, is.ErrorContains(err, "no committed manifest has the sample's sha256"))
	_, err = sampleScenarios(strings.Replace(rows(all...), "│ 2 │", "│ 3 │", 1), ms)
	assert.Check(t, is.ErrorContains(err, "is not number 2"))
}

var phony = regexp.MustCompile(`(?m)^\.PHONY:(.*)$`)

// missingTargets returns the Makefile's .PHONY targets that not exactly
// one row of table names as `make <target>`.
func missingTargets(makefile, table string) []string {
	var missing []string
	for _, m := range phony.FindAllStringSubmatch(makefile, -1) {
		for _, target := range strings.Fields(m[1]) {
			if _, err := tableRow(table, "`make "+target+"`"); err != nil {
				missing = append(missing, target)
			}
		}
	}
	return missing
}

// The README keeps the test command CI runs (.ci/run: `make test`) and,
// under "Tests and make targets", one table row per make target.
func TestReadmeNamesEveryMakeTarget(t *testing.T) {
	tests := section(readFile(t, "README.md"), "Tests and make targets")
	assert.Check(t, is.Contains(tests, "The test command is:\n\n```sh\nmake test\n```\n"))
	assert.Check(t, is.Contains(readFile(t, ".ci/run"), "stage test make test\n"))
	assert.Check(t, is.DeepEqual(missingTargets(readFile(t, "Makefile"), tests), []string(nil)))

	// The check fails for a target the table lacks.
	assert.Check(t, is.DeepEqual(missingTargets(".PHONY: test gone\n", "| `make test` | tests |\n"), []string{"gone"}))
}

// docs/qualification.md's profile table gives each profile the status its
// YAML records.
func TestQualificationProfileStatus(t *testing.T) {
	doc := section(readFile(t, "docs/qualification.md"), "Profiles")
	all, err := profiles.All()
	assert.NilError(t, err)
	for _, p := range all {
		row, err := tableRow(doc, "| `"+p.Name+"` |")
		if !assert.Check(t, err) {
			continue
		}
		assert.Check(t, strings.HasPrefix(row[len(row)-1], p.Qualification.Status),
			"docs/qualification.md says %s is %q; its profile says %s", p.Name, row[len(row)-1], p.Qualification.Status)
	}
}
