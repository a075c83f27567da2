package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/internal/exitcode"
	"github.com/qualbox/qualbox/platforms"
	"github.com/qualbox/qualbox/qualify/scenario"
)

// gateDirs is the Makefile's GATE_DIRS, relative to the repository root
// (the working directory): for each reports/linux-* directory, the last
// (in byte order) of its subdirectories that hold an evidence.dsse.json,
// with a trailing slash as make's $(dir) leaves it.
func gateDirs(t *testing.T) []string {
	t.Helper()
	lanes, err := filepath.Glob("reports/linux-*")
	assert.NilError(t, err)
	var dirs []string
	for _, lane := range lanes {
		envelopes, err := filepath.Glob(filepath.Join(lane, "*", "evidence.dsse.json"))
		assert.NilError(t, err)
		var reports []string
		for _, e := range envelopes {
			reports = append(reports, filepath.Dir(e)+"/")
		}
		if len(reports) > 0 {
			slices.Sort(reports)
			dirs = append(dirs, reports[len(reports)-1])
		}
	}
	assert.Assert(t, len(dirs) > 0)
	return dirs
}

// reports/matrix.md is exactly what `make gate` prints over the committed
// reports, whether the gate passes or fails.
func TestMatrixMarkdownIsTheGate(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append([]string{"merge", "--policy", "reports/gate-policy.yaml", "--markdown"}, gateDirs(t)...), &stdout, &stderr)
	assert.Assert(t, code == exitcode.OK || code == exitcode.Failed, "exit %d: %s", code, stderr.String())
	committed, err := os.ReadFile("reports/matrix.md")
	assert.NilError(t, err)
	assert.Check(t, stdout.String() == string(committed),
		"reports/matrix.md is not what `make gate` prints: run `make matrix` and commit reports/matrix.md\n--- make gate prints:\n%s", stdout.String())
	for i, r := range stdout.String() {
		if r >= utf8.RuneSelf {
			t.Fatalf("Markdown is not ASCII at byte %d: %q", i, r)
		}
	}

	// The policy's order, whatever the order of the arguments.
	reversed := slices.Clone(gateDirs(t))
	slices.Reverse(reversed)
	var again bytes.Buffer
	run(context.Background(), append([]string{"merge", "--policy", "reports/gate-policy.yaml", "--markdown"}, reversed...), &again, &bytes.Buffer{})
	assert.Check(t, again.String() == stdout.String(), "reversed arguments:\n%s", again.String())
	header := "| Scenario |"
	for _, e := range platforms.Rows() {
		if e.ReleaseGate != platforms.Absent {
			header += " " + e.Name + " |"
		}
	}
	assert.Check(t, is.Contains(strings.Join(strings.Fields(stdout.String()), " "), header), "columns in the policy's order, want %q:\n%s", header, stdout.String())

	// --json carries the gate result and every violation printed on
	// stderr, one for one: without one lane's report, its required row
	// has none.
	var js, jsErr bytes.Buffer
	jcode := run(context.Background(), append([]string{"merge", "--policy", "reports/gate-policy.yaml", "--json"}, reversed[1:]...), &js, &jsErr)
	assert.Equal(t, jcode, exitcode.Failed)
	var got struct {
		Gate       string
		Verdict    string
		Columns    []struct{ Name, State string }
		Violations []struct{ Message string }
	}
	assert.NilError(t, json.Unmarshal(js.Bytes(), &got))
	assert.Check(t, strings.HasPrefix(got.Gate, "GATE: FAILED (7 passed, 2 failed, 0 pending, 0 refused rows)"), got.Gate)
	assert.Equal(t, got.Verdict, "failed")
	assert.Equal(t, got.Columns[0].Name, "lane-a")
	assert.Check(t, len(got.Violations) > 0)
	assert.Equal(t, len(got.Violations), strings.Count(jsErr.String(), "\n"), jsErr.String())
	for _, v := range got.Violations {
		assert.Check(t, is.Contains(jsErr.String(), ": "+v.Message+"\n"))
	}
}

// The terminal table of the committed gate fits 120 columns, in ASCII
// and in UTF-8 alike, and its first line is the verdict.
func TestGateTableFits120Columns(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	for _, args := range [][]string{{"--ascii"}, {}} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append(append([]string{"merge", "--policy", "reports/gate-policy.yaml"}, args...), gateDirs(t)...), &stdout, &stderr)
		assert.Assert(t, code == exitcode.OK || code == exitcode.Failed, "exit %d: %s", code, stderr.String())
		lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
		assert.Check(t, is.Regexp(`^GATE: (PASSED|FAILED) \(\d+ passed, \d+ failed, \d+ pending, \d+ refused rows\)$`, lines[0]))
		for i, l := range lines {
			assert.Check(t, utf8.RuneCountInString(l) <= 120, "%v line %d is %d columns wide: %q", args, i+1, utf8.RuneCountInString(l), l)
		}
		assert.Check(t, is.Contains(stdout.String(), "| Scenario               | lane-a"), "policy rows name the columns: %s", stdout.String())
	}

	// Without a policy the six committed tuples need more than 120
	// columns side by side: the table comes in panels, each column named
	// by its reports (profile, or profile@engine), never T1..Tn.
	keys, err := filepath.Glob("reports/keys/*.pub")
	assert.NilError(t, err)
	args := []string{"merge", "--ascii"}
	for _, k := range keys {
		args = append(args, "--key", k)
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append(args, gateDirs(t)...), &stdout, &stderr)
	assert.Assert(t, code == exitcode.OK || code == exitcode.Failed, "exit %d: %s", code, stderr.String())
	out := stdout.String()
	for i, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		assert.Check(t, utf8.RuneCountInString(l) <= 120, "no policy: line %d is %d columns wide: %q", i+1, utf8.RuneCountInString(l), l)
	}
	assert.Check(t, strings.Count(out, "| Scenario ") > 1, out)
	for _, name := range []string{"linux-x64@29.1.4", "linux-x64-cgroupv1@20.10.24+dfsg1", "linux-x64-cgroupv1@2.0.0-beta.24"} {
		assert.Check(t, is.Contains(out, "| "+name+" "), out)
	}
	assert.Check(t, !regexp.MustCompile(`\| T\d+ +\|`).MatchString(out), out)
}

// A forger holding the policy's key tampers with a copy of a good report
// after signing, and an outsider signs one with a key the policy does not
// trust: merge does not stop at them. Each is refused in the hermetic
// row's column with its problem, the good report is still merged, the
// first line says FAILED with the refused count, and --json carries the
// refusals as violations. An informational row without a report is
// pending and does not fail a gate that otherwise passes.
func TestMergeRefusedReportsDoNotAbort(t *testing.T) {
	dir := t.TempDir()
	manifestPath, good, lane := signedRun(t, dir, true)
	_, outsider, _ := signedRun(t, t.TempDir(), true)
	tampered := filepath.Join(t.TempDir(), "tampered")
	assert.NilError(t, os.CopyFS(tampered, os.DirFS(good)))
	editFile(t, filepath.Join(tampered, "summary.md"), "# qualbox", "# forged qualbox")
	policy := hermeticPolicy(t, dir, "policy.yaml", manifestPath, true, scenario.CatalogueVersion, trustLine(t, dir, lane, "hermetic, other"))
	editFile(t, policy, "{name: other, profile: linux-x64, required: true,", "{name: other, profile: linux-x64, required: false,")

	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"merge", "--policy", policy, good}, &stdout, &stderr)
	assert.Equal(t, code, exitcode.OK, stderr.String())
	assert.Check(t, strings.HasPrefix(stdout.String(), "GATE: PASSED (1 passed, 0 failed, 1 pending, 0 refused rows)\n"), stdout.String())
	assert.Check(t, is.Contains(stdout.String(), "other (informational row): pending, no report"))

	stdout.Reset()
	stderr.Reset()
	code = run(context.Background(), []string{"merge", "--policy", policy, "--ascii", tampered, outsider, good}, &stdout, &stderr)
	assert.Equal(t, code, exitcode.Failed, stderr.String())
	out := stdout.String()
	assert.Check(t, strings.HasPrefix(out, "GATE: FAILED (0 passed, 0 failed, 1 pending, 1 refused rows)\n"), out)
	assert.Check(t, is.Contains(out, "hermetic (required row): refused [1]"), out)
	assert.Check(t, is.Contains(out, "  report "+good+", run verdict passed"), out)
	assert.Check(t, is.Contains(out, "- "+tampered+": summary.md: sha256 mismatch"), out)
	assert.Check(t, is.Contains(out, "- "+outsider+": no signature by a key the policy trusts"), out)
	assert.Check(t, is.Contains(stderr.String(), "qualify merge: not passed: refused: "+outsider+": refused by the policy's trust: no signature by a key the policy trusts"))
	assert.Check(t, is.Contains(stderr.String(), "qualify merge: not passed: refused: "+tampered+": summary.md: sha256 mismatch"))

	stdout.Reset()
	code = run(context.Background(), []string{"merge", "--policy", policy, "--json", tampered, good}, &stdout, &stderr)
	assert.Equal(t, code, exitcode.Failed)
	first, _, _ := strings.Cut(stdout.String(), "\n")
	assert.Equal(t, first, `{"gate": "GATE: FAILED (0 passed, 0 failed, 1 pending, 1 refused rows)",`)
	var got struct {
		Verdict    string
		Columns    []struct{ Name, State string }
		Violations []struct {
			Columns  []string
			Blocking bool
			Message  string
		}
	}
	assert.NilError(t, json.Unmarshal(stdout.Bytes(), &got))
	assert.Equal(t, got.Verdict, "failed")
	assert.Equal(t, got.Columns[0].State, "refused")
	assert.Equal(t, got.Columns[1].State, "pending")
	assert.Check(t, got.Violations[0].Blocking)
	assert.DeepEqual(t, got.Violations[0].Columns, []string{"hermetic"})
	assert.Check(t, is.Contains(got.Violations[0].Message, "refused: "+tampered+": summary.md: sha256 mismatch"))
}

// The table uses box drawing only on a character device whose locale says
// UTF-8 (/dev/null stands in for a terminal); a file or pipe gets ASCII.
func TestUTF8TerminalDetection(t *testing.T) {
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	assert.NilError(t, err)
	defer devnull.Close()
	regular, err := os.Create(filepath.Join(t.TempDir(), "out"))
	assert.NilError(t, err)
	defer regular.Close()
	for _, tc := range []struct {
		lcAll, lcCtype, lang string
		want                 bool
	}{
		{"C.UTF-8", "", "", true},
		{"", "", "en_US.utf8", true},
		{"C", "", "en_US.UTF-8", false},
		{"", "POSIX", "en_US.UTF-8", false},
		{"", "", "", false},
	} {
		t.Setenv("LC_ALL", tc.lcAll)
		t.Setenv("LC_CTYPE", tc.lcCtype)
		t.Setenv("LANG", tc.lang)
		assert.Check(t, utf8Terminal(devnull) == tc.want, "%+v", tc)
		assert.Check(t, !utf8Terminal(regular), "%+v: a regular file is no terminal", tc)
		assert.Check(t, !utf8Terminal(&bytes.Buffer{}))
	}
}

// merge --junit over the committed reports: one suite per policy row in
// the policy's order, named and classed by the row, so lane-a and lane-b
// (both profile linux-x64-cgroupv1) are distinct suites; --test2json
// gives one package per row; two output formats are a usage error.
func TestMergeJUnitAndTestEventsPerRow(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	p, _, err := trustOf("reports/gate-policy.yaml", nil)
	assert.NilError(t, err)
	var rows []string
	for _, r := range p.Requirement.Rows {
		rows = append(rows, r.Name)
	}
	assert.Assert(t, len(rows) >= 2, "rows of reports/gate-policy.yaml: %v", rows)

	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append([]string{"merge", "--policy", "reports/gate-policy.yaml", "--junit"}, gateDirs(t)...), &stdout, &stderr)
	assert.Assert(t, code == exitcode.OK || code == exitcode.Failed, "exit %d: %s", code, stderr.String())
	var doc struct {
		Suites []struct {
			Name  string `xml:"name,attr"`
			Cases []struct {
				Name      string    `xml:"name,attr"`
				Classname string    `xml:"classname,attr"`
				Skipped   *struct{} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	assert.NilError(t, xml.Unmarshal(stdout.Bytes(), &doc))
	var suites []string
	for _, s := range doc.Suites {
		suites = append(suites, s.Name)
		// A pending row (no report yet) has its skipped row state only.
		pending := len(s.Cases) == 1 && s.Cases[0].Skipped != nil
		assert.Check(t, len(s.Cases) > 1 || pending, "%s has no scenario", s.Name)
		for _, c := range s.Cases {
			assert.Check(t, is.Equal(c.Classname, s.Name))
		}
	}
	var want []string
	for _, r := range rows {
		want = append(want, "qualbox."+r)
	}
	assert.DeepEqual(t, suites, want)

	stdout.Reset()
	code = run(context.Background(), append([]string{"merge", "--policy", "reports/gate-policy.yaml", "--test2json"}, gateDirs(t)...), &stdout, &stderr)
	assert.Assert(t, code == exitcode.OK || code == exitcode.Failed, "exit %d: %s", code, stderr.String())
	var packages []string
	for _, line := range strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n") {
		var e struct{ Action, Package, Test string }
		assert.NilError(t, json.Unmarshal([]byte(line), &e), line)
		if e.Action == "start" {
			packages = append(packages, strings.TrimPrefix(e.Package, "qualbox/"))
		}
	}
	assert.DeepEqual(t, packages, rows)

	stderr.Reset()
	code = run(context.Background(), []string{"merge", "--policy", "reports/gate-policy.yaml", "--junit", "--json", gateDirs(t)[0]}, &stdout, &stderr)
	assert.Equal(t, code, exitcode.Usage)
	assert.Check(t, is.Contains(stderr.String(), "--markdown, --json, --junit and --test2json exclude each other"))
}

// merge --html writes the gate as one page: the GATE line, the matrix
// named by the policy's rows, and each admitted report's scenarios; it
// never overwrites a file.
func TestMergeWritesAnHTMLPage(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	out := filepath.Join(t.TempDir(), "gate.html")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append([]string{"merge", "--policy", "reports/gate-policy.yaml", "--html", out}, gateDirs(t)...), &stdout, &stderr)
	assert.Assert(t, code == exitcode.OK || code == exitcode.Failed, "exit %d: %s", code, stderr.String())
	page, err := os.ReadFile(out)
	assert.NilError(t, err)
	html := string(page)
	line, _, _ := strings.Cut(stdout.String(), "\n")
	assert.Check(t, is.Contains(html, `<h1 id="gate-line" class="verdict`))
	assert.Check(t, is.Contains(html, ">"+line+"</h1>"), "the page's first heading is the gate line %q", line)
	assert.Check(t, is.Contains(html, `<table class="matrix"><thead><tr><th>Scenario</th><th>lane-a</th><th>lane-b</th><th>lane-c</th>`))
	assert.Check(t, is.Equal(strings.Count(html, `<section class="report"`), len(gateDirs(t))))
	assert.Check(t, is.Contains(html, `<table class="checks">`))

	stdout.Reset()
	stderr.Reset()
	code = run(context.Background(), append([]string{"merge", "--policy", "reports/gate-policy.yaml", "--html", out}, gateDirs(t)...), &stdout, &stderr)
	assert.Equal(t, code, exitcode.Internal)
	assert.Check(t, is.Contains(stderr.String(), "qualify merge: --html: "+out+" exists: refusing to overwrite it"))
	again, err := os.ReadFile(out)
	assert.NilError(t, err)
	assert.Check(t, string(again) == html, "an existing page was changed")
}
