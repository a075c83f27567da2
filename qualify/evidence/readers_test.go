package evidence_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/qualify/evidence"
)

// refusedFor forges a report with tamper, re-signs it with the report's own
// key (the forger is a key holder) and asserts VerifyRun refuses it with a
// problem on file whose text contains want.
func refusedFor(t *testing.T, file, want string, tamper func(t *testing.T, dir string)) {
	t.Helper()
	dir, keys := signedReport(t, nil)
	tamper(t, dir)
	resign(t, dir, keys)
	_, err := evidence.VerifyRun(context.Background(), dir, pub(t, keys))
	assert.Assert(t, err != nil, "forged report verified")
	ps := problems(t, err)
	for _, p := range ps {
		if p.File == file && strings.Contains(p.Problem, want) {
			return
		}
	}
	t.Fatalf("want %s: %s, got %v", file, want, ps)
}

// A scenario check that says "ok":false to jq and Python and, with a
// second member "OK":true, passed to encoding/json's case-insensitive
// last-one-wins reading: refused, naming the member.
func TestVerifyRefusesJSONReadersDisagreeOn(t *testing.T) {
	scenario := "02-isolation/evidence.json"
	for _, tc := range []struct {
		name, file, want string
		tamper           func(t *testing.T, dir string)
	}{
		{"ok and OK", scenario, `unknown object member name "OK" within "/checks/1"`, func(t *testing.T, dir string) {
			edit(t, filepath.Join(dir, scenario), `"ok": false`, `"ok": false, "OK": true`)
		}},
		{"duplicate ok", scenario, `duplicate object member name "ok" within "/checks/1"`, func(t *testing.T, dir string) {
			edit(t, filepath.Join(dir, scenario), `"ok": false`, `"ok": false, "ok": true`)
		}},
		{"duplicate verdict kind in the run", "evidence.json", `duplicate object member name "kind" within "/verdict"`, func(t *testing.T, dir string) {
			edit(t, filepath.Join(dir, "evidence.json"), `"verdict": {
    "kind": "failed"`, `"verdict": {
    "kind": "passed", "kind": "failed"`)
		}},
		{"duplicate top-level member", "evidence.json", `duplicate object member name "schema"`, func(t *testing.T, dir string) {
			edit(t, filepath.Join(dir, "evidence.json"), `"schema": "`+evidence.Schema+`",`, `"schema": "`+evidence.Schema+`", "schema": "x",`)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { refusedFor(t, tc.file, tc.want, tc.tamper) })
	}
}

// An empty scenario-like directory in a signed report (a reader sees a
// fifth scenario's directory the signed statement knows nothing of) is
// refused naming it, however it got there: directories are not subjects,
// so a key holder's own signer could leave one as easily as a host could.
func TestVerifyRefusesAnEmptyDirectory(t *testing.T) {
	dir, keys := signedReport(t, nil)
	assert.NilError(t, os.MkdirAll(filepath.Join(dir, "05-forged", "spill"), 0o755))
	_, err := evidence.VerifyRun(context.Background(), dir, pub(t, keys))
	var files []string
	for _, p := range problems(t, err) {
		assert.Check(t, strings.Contains(p.Problem, "directory holding no subject"), "%v", p)
		files = append(files, p.File)
	}
	assert.DeepEqual(t, files, []string{"05-forged/", "05-forged/spill/"})
}

// summary.md is what a reader of a CI step summary sees: an edit anywhere
// the old check (verdict line, first four table columns) did not read is
// refused, naming the line and what evidence.json renders there.
func TestVerifyRefusesASummaryEditedOutsideTheVerdictColumns(t *testing.T) {
	for _, tc := range []struct{ name, old, new, want string }{
		{"detail column", "| CapEff: want 0000000000000000, got 00000000a80425fb and a tail long e... |",
			"| transient: passed on retry                                               |",
			`line 16 is "| 2 | isolation | failed         | 1/2    | 1.8s     | transient: passed on retry`},
		{"duration column", "| 1.8s     | CapEff", "| 0.1s     | CapEff", `line 16 is "| 2 | isolation | failed         | 1/2    | 0.1s `},
		{"engine header", "- Engine: 20.10.24 (API 1.41", "- Engine: 27.3.1 (API 1.47", `line 6 is "- Engine: 27.3.1 (API 1.47, commit 5d6db84)`},
		{"kernel header", "- Host: kernel 6.1.0,", "- Host: kernel 6.12.0,", `line 7 is "- Host: kernel 6.12.0,`},
		{"appended note", "| profile has no outbound network                                          |\n",
			"| profile has no outbound network                                          |\n\nThe isolation failure is a known flake; treat the run as passed.\n",
			`line 19 "\n" is extra`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refusedFor(t, "summary.md", "differs from what evidence.json renders: "+tc.want, func(t *testing.T, dir string) {
				edit(t, filepath.Join(dir, "summary.md"), tc.old, tc.new)
			})
		})
	}
}

// junit.xml must be one well-formed document that every XML reader parses
// alike. Each forgery below is one encoding/xml read past (so the gate
// saw the counts of the first testsuites) while xmllint, Python or a CI's
// JUnit reader refuse it or read something else; each is refused naming
// what is wrong.
func TestVerifyRefusesAJUnitDocumentReadersDisagreeOn(t *testing.T) {
	const decl = `<?xml version="1.0" encoding="UTF-8"?>` + "\n"
	for _, tc := range []struct{ name, old, new, want string }{
		{"DOCTYPE", decl, decl + `<!DOCTYPE testsuites [<!ATTLIST testcase skipped CDATA "yes">]>` + "\n",
			"schema: <!DOCTYPE> at byte 39: no DOCTYPE or other directive is allowed"},
		{"second root", "</testsuites>", `</testsuites><testsuites><testsuite name="x" tests="0" failures="0" errors="0"></testsuite></testsuites>`,
			"schema: second root element <testsuites> at byte"},
		{"trailing junk", "</testsuites>", "</testsuites>\nall scenarios passed\n",
			`schema: text "\nall scenarios passe..." at byte 1738, outside the root element`},
		{"processing instruction", decl, decl + `<?xml-stylesheet href="passed.xsl"?>` + "\n",
			"schema: processing instruction <?xml-stylesheet?> at byte 39: only the XML declaration is allowed"},
		{"declaration not first", decl, "\n" + decl, "schema: XML declaration at byte 1: it must start the document"},
		{"repeated attribute", `tests="4" failures="1"`, `tests="4" failures="1" failures="0"`,
			"schema: <testsuite> at byte 54: attribute failures repeated"},
		{"namespace declaration", `tests="4" failures="1"`, `tests="4" failures="1" xmlns:q="urn:q" q:failures="0"`,
			"schema: <testsuite> at byte 54: namespaced attribute xmlns:q is not allowed"},
		{"namespaced attribute", `tests="4" failures="1"`, `tests="4" failures="1" q:failures="0"`,
			"schema: <testsuite> at byte 54: namespaced attribute q:failures is not allowed"},
		{"namespaced element", `<testsuites>`, `<q:testsuites>`, "schema: element <q:testsuites> at byte 39: namespaces are not allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refusedFor(t, "junit.xml", tc.want, func(t *testing.T, dir string) {
				edit(t, filepath.Join(dir, "junit.xml"), tc.old, tc.new)
			})
		})
	}
	// A test case both failed and skipped is failed to one reader and
	// skipped to another: refused by the cross-check.
	refusedFor(t, "junit.xml", "test case 2 isolation has 2 failure, error and skipped elements, want at most one", func(t *testing.T, dir string) {
		edit(t, filepath.Join(dir, "junit.xml"), `<failure message=`, `<skipped message="passed on retry"></skipped><failure message=`)
	})
}

// What a CI's JUnit view shows besides counts and outcomes (the suite's
// properties, time and timestamp, each case's class, time and message)
// must be what evidence.json renders: a junit.xml showing another engine
// or a softer failure message is refused, naming the value.
func TestVerifyRefusesJUnitValuesEvidenceContradicts(t *testing.T) {
	for _, tc := range []struct{ name, old, new, want string }{
		{"engine property", `value="20.10.24"`, `value="27.3.1"`, `properties [{manifest.sha256 ab} {image sha256:`},
		{"kernel property", `name="kernel" value="6.1.0"`, `name="kernel" value="6.12.0"`, `{kernel 6.12.0}], evidence.json says`},
		{"failure message", `<failure message="CapEff: want`, `<failure message="flaky, ignore; CapEff: want`,
			`test case 2 isolation: failure message "flaky, ignore; CapEff: want`},
		{"skipped message", `message="not_applicable (profile has no outbound network)"`, `message="not_applicable (covered elsewhere)"`,
			`test case 4 outbound: skipped message "not_applicable (covered elsewhere)", evidence.json says "not_applicable (profile has no outbound network)"`},
		{"case time", `name="isolation" classname="qualbox.linux-x64-cgroupv1" time="1.830"`, `name="isolation" classname="qualbox.linux-x64-cgroupv1" time="0.010"`,
			`test case 2 isolation: classname "qualbox.linux-x64-cgroupv1" time "0.010", evidence.json says "qualbox.linux-x64-cgroupv1" "1.830"`},
		{"timestamp", `timestamp="2026-11-29T10:00:00"`, `timestamp="2026-12-24T10:00:00"`,
			`testsuite timestamp "2026-12-24T10:00:00", evidence.json says "2026-11-29T10:00:00"`},
		{"error element", `<failure message="CapEff`, `<error message="CapEff`, `test case 2 isolation has an error element`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refusedFor(t, "junit.xml", tc.want, func(t *testing.T, dir string) {
				edit(t, filepath.Join(dir, "junit.xml"), tc.old, tc.new)
				if tc.name == "error element" {
					edit(t, filepath.Join(dir, "junit.xml"), `</failure>`, `</error>`)
				}
			})
		})
	}
}
