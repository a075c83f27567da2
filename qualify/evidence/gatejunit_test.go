package evidence_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/qualify/evidence"
)

// gateForReporters is a gate over two rows of one profile (lane-a passed,
// lane-b failed: isolation failed in its report) and an informational
// row without a report (pending).
func gateForReporters(t *testing.T) (*evidence.GateResult, []*evidence.Signed) {
	a := passedReport(t, harnessV2, nil)
	b := passedReport(t, harnessV2, func(r *evidence.Run) {
		laneB(r)
		r.Scenarios[1].Verdict, r.Scenarios[1].Passed = evidence.Verdict{Kind: evidence.Failed}, 1
		r.Verdict = evidence.Verdict{Kind: evidence.Failed}
	})
	req := twoRows(false)
	req.Rows = append(req.Rows, evidence.Row{Name: "desktop-native-arm64", Profile: "desktop-apple-virtualization-native-arm64",
		Informational: true, Manifests: []string{"cc"}, Scenarios: []string{"admission"}})
	reports := []*evidence.Signed{b, a}
	return evidence.Judge(reports, nil, req), reports
}

// A refused report is a suite of its own (its column): one failed case,
// the row state, typed refused, whose text is the refusal's problem.
func TestGateJUnitRefusedColumn(t *testing.T) {
	a := passedReport(t, harnessV2, nil)
	ref := evidence.Refusal{Dir: "reports/forged", Problems: []string{"summary.md: sha256 mismatch"}}
	g := evidence.Judge([]*evidence.Signed{a}, []evidence.Refusal{ref}, twoRows(true))
	data, err := evidence.GateJUnit(g, []*evidence.Signed{a})
	assert.NilError(t, err)
	var doc struct {
		Suites []struct {
			Name     string `xml:"name,attr"`
			Failures int    `xml:"failures,attr"`
			Cases    []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Type string `xml:"type,attr"`
					Text string `xml:",chardata"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	assert.NilError(t, xml.Unmarshal(data, &doc))
	last := doc.Suites[len(doc.Suites)-1]
	assert.Check(t, is.Equal(last.Name, "qualbox.reports/forged"))
	assert.Assert(t, is.Len(last.Cases, 1))
	assert.Assert(t, last.Cases[0].Failure != nil)
	assert.Check(t, is.Equal(last.Cases[0].Failure.Type, "refused"))
	assert.Check(t, is.Contains(last.Cases[0].Failure.Text, "reports/forged: summary.md: sha256 mismatch"))
	assert.Check(t, is.Equal(last.Failures, 1))
}

// The gate's JUnit names each suite and each case's classname by its row,
// so lane-a and lane-b (both linux-x64-cgroupv1, whose reports' own
// junit.xml suites are both qualbox.linux-x64-cgroupv1) are two suites in
// a test reporter; each suite's first case is the row's state; and the
// document validates against both schemas a report's junit.xml does.
func TestGateJUnitSuitePerRow(t *testing.T) {
	g, reports := gateForReporters(t)
	data, err := evidence.GateJUnit(g, reports)
	assert.NilError(t, err)
	var doc struct {
		Suites []struct {
			Name     string `xml:"name,attr"`
			Tests    int    `xml:"tests,attr"`
			Failures int    `xml:"failures,attr"`
			Skipped  int    `xml:"skipped,attr"`
			Cases    []struct {
				Name      string `xml:"name,attr"`
				Classname string `xml:"classname,attr"`
				Failure   *struct {
					Message string `xml:"message,attr"`
					Text    string `xml:",chardata"`
				} `xml:"failure"`
				Skipped *struct {
					Message string `xml:"message,attr"`
				} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	assert.NilError(t, xml.Unmarshal(data, &doc))
	var names []string
	for _, s := range doc.Suites {
		names = append(names, s.Name)
		assert.Check(t, is.Equal(s.Tests, len(s.Cases)))
		for _, c := range s.Cases {
			assert.Check(t, is.Equal(c.Classname, s.Name), "%s/%s", s.Name, c.Name)
		}
	}
	assert.DeepEqual(t, names, []string{"qualbox.lane-a", "qualbox.lane-b", "qualbox.desktop-native-arm64"})

	laneA, laneB, pending := doc.Suites[0], doc.Suites[1], doc.Suites[2]
	assert.Check(t, is.Equal(laneA.Cases[0].Name, "row state"))
	assert.Check(t, laneA.Cases[0].Failure == nil && laneA.Cases[0].Skipped == nil)
	assert.Check(t, is.Equal(laneA.Failures, 0))
	assert.Check(t, is.Equal(len(laneA.Cases), 3), "row state, admission, isolation")

	assert.Assert(t, laneB.Cases[0].Failure != nil)
	assert.Check(t, is.Equal(laneB.Cases[0].Failure.Message, "failed"))
	assert.Check(t, is.Contains(laneB.Cases[0].Failure.Text, "run verdict failed"))
	assert.Check(t, is.Equal(laneB.Cases[2].Name, "isolation"))
	assert.Assert(t, laneB.Cases[2].Failure != nil)
	assert.Check(t, is.Equal(laneB.Failures, 2))

	assert.Check(t, is.Equal(len(pending.Cases), 1), "a pending row ran nothing")
	assert.Assert(t, pending.Cases[0].Skipped != nil)
	assert.Check(t, is.Equal(pending.Cases[0].Skipped.Message, "pending, no report"))
	assert.Check(t, is.Equal(pending.Skipped, 1))

	assert.DeepEqual(t, validateJUnit(loadXSD(t, filepath.Join("testdata", "junit-common.xsd")), data), []string(nil))
	bin := xmllint(t)
	path := filepath.Join(t.TempDir(), "gate.xml")
	assert.NilError(t, os.WriteFile(path, data, 0o644))
	for _, schema := range []string{"junit-common.xsd", "JUnit.xsd"} {
		out, err := exec.Command(bin, "--noout", "--nonet", "--schema", filepath.Join("testdata", schema), path).CombinedOutput()
		assert.Check(t, err == nil, "gate JUnit against %s: %v\n%s", schema, err, out)
	}
}

// The gate's go test -json events: one package qualbox/ROW per row, each
// scenario a test with run, output and pass/fail/skip events and its
// elapsed seconds, and the package's own result from the row's state.
func TestGateTestEventsPackagePerRow(t *testing.T) {
	g, reports := gateForReporters(t)
	data, err := evidence.GateTestEvents(g, reports)
	assert.NilError(t, err)
	type key struct{ pkg, test string }
	results := map[key]string{}
	var order []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		var e evidence.TestEvent
		assert.NilError(t, dec.Decode(&e), "%s", sc.Text())
		switch e.Action {
		case "start":
			order = append(order, e.Package)
		case "pass", "fail", "skip":
			_, seen := results[key{e.Package, e.Test}]
			assert.Check(t, !seen, "two results for %s %s", e.Package, e.Test)
			results[key{e.Package, e.Test}] = e.Action
			assert.Check(t, e.Elapsed != nil, "%s", sc.Text())
		case "run", "output":
		default:
			t.Errorf("action %q is not one go test -json writes", e.Action)
		}
	}
	assert.DeepEqual(t, order, []string{"qualbox/lane-a", "qualbox/lane-b", "qualbox/desktop-native-arm64"})
	assert.DeepEqual(t, results, map[key]string{
		{"qualbox/lane-a", "admission"}: "pass", {"qualbox/lane-a", "isolation"}: "pass", {"qualbox/lane-a", ""}: "pass",
		{"qualbox/lane-b", "admission"}: "pass", {"qualbox/lane-b", "isolation"}: "fail", {"qualbox/lane-b", ""}: "fail",
		{"qualbox/desktop-native-arm64", ""}: "skip",
	})
	assert.Check(t, is.Contains(string(data), `"Output":"--- FAIL: isolation (`))
	assert.Check(t, is.Contains(string(data), `"Action":"output","Package":"qualbox/lane-b","Output":"FAIL\tqualbox/lane-b\t`))
}
