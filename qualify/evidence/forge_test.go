package evidence_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/evidence"
)

// Forgeries by a key holder against the policy's rows (docs/qualification.md#gate):
// each report below is signed by a key the entry trusts for the rows
// given, and is refused by VerifyTrusted and by Gate, naming what is wrong.

// engineless blanks the Engine facts and the admission: what a run without
// an Engine (a hermetic test) records.
func engineless(r *evidence.Run) { r.Engine, r.Admission = driver.EngineFacts{}, evidence.Admission{} }

// A report made without an Engine (blank facts, no admission) verifies,
// but it qualified no host: its blank tuple matched every row that sets
// no engine, operating system or cgroup prefix, so a key holder could meet
// such a row without running on any Engine. Refused by the trust check and
// by the gate's requirement.
func TestEnginelessReportSatisfiesNoRow(t *testing.T) {
	dir, keys := passedFixture(t, engineless)
	s, err := evidence.VerifyRun(context.Background(), dir, pub(t, keys))
	assert.NilError(t, err, "a hermetic report still verifies (integrity)")
	rows := []evidence.Row{{Name: "any-engine", Profile: "linux-x64-cgroupv1", Scenarios: []string{"admission"}, Manifests: []string{"ab"}}}
	assert.Assert(t, rows[0].Matches(s.Predicate.Tuple), "the row matches the blank tuple")
	_, _, err = evidence.VerifyTrusted(context.Background(), dir, []evidence.TrustEntry{entry(t, keys, "any-engine")}, rows)
	assert.Check(t, is.Contains(trustProblems(t, err), "its run recorded no Engine facts and no admission (a run without an Engine, tuple linux-x64-cgroupv1 · engine /API  · kernel  · cgroup v/): it qualified no host, so it satisfies no row"))

	rep := passedReport(t, harnessV2, engineless)
	req := &evidence.Requirement{Rows: rows, Harness: harnessPin}
	v := evidence.Gate(evidence.Merge([]*evidence.Signed{rep}), []*evidence.Signed{rep}, req)
	assert.Check(t, is.Contains(v[0], "report "+rep.Dir+": its run recorded no Engine facts and no admission"), "%v", v)
	assert.Check(t, is.Contains(v[len(v)-1], "row any-engine (profile linux-x64-cgroupv1): no report with a pinned manifest"), "%v", v)
}

// One report whose tuple matches two rows (an engine-prefix row and an
// operating-system row of the same profile) met both with one run, though
// each row stands for its own host: refused, naming both rows, even when
// the key is bound to both.
func TestReportMatchingTwoRowsIsRefused(t *testing.T) {
	rows := []evidence.Row{
		{Name: "lane-a", Profile: "linux-x64-cgroupv1", Engine: "20.10.", Manifests: []string{"ab"}, Scenarios: []string{"admission"}},
		{Name: "debian", Profile: "linux-x64-cgroupv1", OperatingSystem: "Debian", Manifests: []string{"ab"}, Scenarios: []string{"admission"}},
	}
	dir, keys := passedFixture(t, nil)
	_, _, err := evidence.VerifyTrusted(context.Background(), dir, []evidence.TrustEntry{entry(t, keys, "lane-a", "debian")}, rows)
	assert.Check(t, is.Contains(trustProblems(t, err), "matches 2 rows (lane-a, debian): a report must match exactly one row"))

	rep := passedReport(t, harnessV2, nil)
	v := evidence.Gate(evidence.Merge([]*evidence.Signed{rep}), []*evidence.Signed{rep}, &evidence.Requirement{Rows: rows, Harness: harnessPin})
	assert.DeepEqual(t, v, []string{"report " + rep.Dir + ": its tuple (" + rep.Predicate.Tuple.Label() + ") matches 2 rows (lane-a, debian): a report must match exactly one row, so one run cannot stand for several"})
}

// A key holder plants signed files outside the report's layout: a second
// summary beside summary.md that says passed, or a scenario-like
// directory evidence.json does not list (other than NN-name/evidence.json,
// which was refused already, e.g. a goroutines.txt or a checkpoint record
// of a scenario that never ran). A reader browsing the report takes them
// for the run's; each is refused, naming the file.
func TestVerifyRefusesFilesOutsideTheReportLayout(t *testing.T) {
	for _, tc := range []struct{ name, file, want string }{
		{"second summary", "passed.md", "a file the report layout does not have: the top of a report holds only evidence.json, summary.md, junit.xml"},
		{"file in an unlisted directory", "05-isolation/goroutines.txt", "in directory 05-isolation/, which is no scenario directory evidence.json lists"},
		{"record of an unlisted run", "02-isolation-retry/checkpoint-0/record.json", "in directory 02-isolation-retry/, which is no scenario directory evidence.json lists"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refusedFor(t, tc.file, tc.want, func(t *testing.T, dir string) {
				p := filepath.Join(dir, filepath.FromSlash(tc.file))
				assert.NilError(t, os.MkdirAll(filepath.Dir(p), 0o755))
				assert.NilError(t, os.WriteFile(p, []byte("- Verdict: **passed**\n"), 0o644))
			})
		})
	}
	// Files a scenario writes into its own directory stay allowed.
	dir, keys := signedReport(t, nil)
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "02-isolation", "goroutines.txt"), []byte("goroutine 1\n"), 0o644))
	resign(t, dir, keys)
	_, err := evidence.VerifyRun(context.Background(), dir, pub(t, keys))
	assert.NilError(t, err)
}

// junit.xml elements and attributes encoding/xml reads past but a CI's
// JUnit reader may count: a nested testsuite with a passing "isolation"
// case (Jenkins flattens nested suites), Surefire's flakyFailure and
// rerunFailure, a status attribute on a failed case. Each is refused,
// naming the element or attribute.
func TestVerifyRefusesJUnitElementsTheGateDoesNotRead(t *testing.T) {
	const admission = `<testcase name="admission" classname="qualbox.linux-x64-cgroupv1" time="0.040">`
	for _, tc := range []struct{ name, old, new, want string }{
		{"nested testsuite", `<system-out>`, `<testsuite name="retry" tests="1" failures="0" errors="0" skipped="0"><testcase name="isolation" classname="qualbox.linux-x64-cgroupv1" time="0.001"></testcase></testsuite><system-out>`,
			"schema: element <testsuite> at byte 1452 inside <testsuite>: junit.xml holds only the elements JUnit writes"},
		{"flakyFailure", admission, admission + `<flakyFailure message="passed on rerun"></flakyFailure>`,
			"schema: element <flakyFailure> at byte 746 inside <testcase>"},
		{"rerunFailure on the failed case", `</failure>`, `</failure><rerunFailure message="x"></rerunFailure>`,
			"schema: element <rerunFailure> at byte"},
		{"status attribute", `<testcase name="isolation"`, `<testcase status="passed" name="isolation"`,
			"schema: <testcase> at byte 762: attribute status is not one JUnit writes there"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refusedFor(t, "junit.xml", tc.want, func(t *testing.T, dir string) {
				edit(t, filepath.Join(dir, "junit.xml"), tc.old, tc.new)
			})
		})
	}
}

// Byte-level tricks on the JSON and XML documents that a lenient reader
// would take as the honest values: a UTF-8 byte order mark, a number
// written 1e0 or 1.0 where an integer belongs, a number past int64, and an
// encoding declaration other than UTF-8 (which encoding/xml cannot read
// but another reader would decode). The forger signs the edited bytes
// with the predicate of the unedited evidence.json (its own summary must
// not be what gives it away); each is refused, naming the file.
func TestVerifyRefusesNumberAndEncodingTricks(t *testing.T) {
	for _, tc := range []struct{ name, file, old, new, want string }{
		{"byte order mark", "evidence.json", `{`, "\ufeff{", `invalid character '\ufeff' at start of value`},
		{"index 1e0", "01-admission/evidence.json", `"index": 1,`, `"index": 1e0,`, `JSON number 1e0 into Go int within "/index"`},
		{"index 1.0", "evidence.json", `"index": 1,`, `"index": 1.0,`, `JSON number 1.0 into Go int within "/scenarios/0/index"`},
		{"durationMs past int64", "evidence.json", `"durationMs": 40`, `"durationMs": 40000000000000000000000000`, `within "/scenarios/0/durationMs"`},
		{"ISO-8859-1 junit.xml", "junit.xml", `encoding="UTF-8"`, `encoding="ISO-8859-1"`, `encoding "ISO-8859-1" declared but Decoder.CharsetReader is nil`},
		{"UTF-16 junit.xml", "junit.xml", `encoding="UTF-8"`, `encoding="UTF-16"`, `encoding "UTF-16" declared`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, keys := signedReport(t, nil)
			data, err := os.ReadFile(filepath.Join(dir, "evidence.json"))
			assert.NilError(t, err)
			var run evidence.Run
			assert.NilError(t, json.Unmarshal(data, &run))
			edit(t, filepath.Join(dir, tc.file), tc.old, tc.new)
			assert.NilError(t, os.Remove(filepath.Join(dir, attest.EnvelopeFile)))
			key, err := attest.LoadPrivateKey(filepath.Join(keys, attest.PrivateKeyFile))
			assert.NilError(t, err)
			_, err = attest.Sign(context.Background(), dir, key, evidence.PredicateType, evidence.PredicateOf(&run))
			assert.NilError(t, err)
			_, err = evidence.VerifyRun(context.Background(), dir, pub(t, keys))
			assert.Assert(t, err != nil, "forged report verified")
			for _, p := range problems(t, err) {
				if p.File == tc.file && strings.Contains(p.Problem, tc.want) {
					return
				}
			}
			t.Fatalf("want %s: %s, got %v", tc.file, tc.want, problems(t, err))
		})
	}
}
