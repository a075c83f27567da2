package evidence

import (
	"encoding/xml"
	"fmt"
	"strings"
)

// JUnit XML elements laid out so that junit.xml validates against both
// schemas CI consumers check it with (docs/qualification.md#evidence):
// Jenkins' junit-10 (testdata/junit-common.xsd) and the Apache Ant JUnit
// schema (testdata/JUnit.xsd). Ant declares no attribute on testsuites,
// requires package, id, hostname and a zone-less timestamp on each
// testsuite, its children in the order properties, testcase*, system-out,
// system-err, and at most one of skipped, error or failure in a testcase
// (no system-out there). junit-10 accepts all of that.
type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name      string `xml:"name,attr"`
	Tests     int    `xml:"tests,attr"`
	Failures  int    `xml:"failures,attr"`
	Errors    int    `xml:"errors,attr"`
	Skipped   int    `xml:"skipped,attr"`
	Time      string `xml:"time,attr"`
	Timestamp string `xml:"timestamp,attr"`
	Hostname  string `xml:"hostname,attr"`
	Package   string `xml:"package,attr"`
	ID        int    `xml:"id,attr"`
	// Properties is required by Ant, even when empty.
	Properties []junitProperty `xml:"properties>property"`
	Cases      []junitCase     `xml:"testcase"`
	// SystemOut lists each scenario's evidence file; SystemErr is empty.
	// Ant requires both.
	SystemOut string `xml:"system-out"`
	SystemErr string `xml:"system-err"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

func seconds(ms int64) string { return fmt.Sprintf("%.3f", float64(ms)/1000) }

// JUnit renders junit.xml: one testsuite for the run, one testcase per
// scenario. failed maps to <failure>, skipped and not_applicable to
// <skipped> with the verdict as message; errors is always 0 (a scenario's
// own error is its failure). The suite's timestamp is the run's start in
// UTC without a zone (Ant's pattern), its hostname "localhost" (the
// controller's host name is not part of the evidence), and its system-out
// names each scenario's evidence file. scenarios supplies the failed
// checks and cleanup errors for the failure text; it may be shorter than
// r.Scenarios (scenarios that were not run have no evidence).
func JUnit(r *Run, scenarios []*Scenario) ([]byte, error) {
	byIndex := map[int]*Scenario{}
	for _, s := range scenarios {
		byIndex[s.Index] = s
	}
	suite := junitSuite{
		Name: "qualbox." + r.Profile, Tests: len(r.Scenarios),
		Time: seconds(r.Timing.DurationMs), Timestamp: r.Timing.Start.UTC().Format("2006-01-02T15:04:05"),
		Hostname: "localhost", Package: "qualbox." + r.Profile, ID: 0,
		Properties: []junitProperty{
			{"manifest.sha256", r.Manifest.SHA256},
			{"image", r.Image.ID},
			{"engine.version", r.Engine.Version},
			{"engine.apiVersion", r.Engine.APIVersion},
			{"kernel", r.Engine.KernelVersion},
		},
	}
	var evidenceFiles strings.Builder
	for _, sum := range r.Scenarios {
		c := junitCase{Name: sum.Name, Classname: "qualbox." + r.Profile, Time: seconds(sum.DurationMs)}
		switch sum.Verdict.Kind {
		case Failed:
			suite.Failures++
			c.Failure = &junitFailure{Message: sum.Detail, Type: "failed", Text: failureText(byIndex[sum.Index], sum)}
		case Skipped, NotApplicable:
			suite.Skipped++
			c.Skipped = &junitSkipped{Message: sum.Verdict.String()}
		}
		if sum.Dir != "" {
			fmt.Fprintf(&evidenceFiles, "%s: evidence %s/evidence.json\n", sum.Name, sum.Dir)
		}
		suite.Cases = append(suite.Cases, c)
	}
	suite.SystemOut = evidenceFiles.String()
	doc := junitSuites{Suites: []junitSuite{suite}}
	out, err := xml.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("evidence: encode JUnit: %w", err)
	}
	return append([]byte(xml.Header), append(out, '\n')...), nil
}

func failureText(s *Scenario, sum ScenarioSummary) string {
	if s == nil {
		return sum.Detail
	}
	var b strings.Builder
	if s.Failure != "" {
		fmt.Fprintf(&b, "failure: %s\n", s.Failure)
	}
	for _, c := range s.Checks {
		if !c.OK {
			fmt.Fprintf(&b, "check %s: want %s, got %s\n", c.Name, c.Want, c.Got)
		}
	}
	for _, e := range s.CleanupErrors {
		fmt.Fprintf(&b, "cleanup: %s\n", e)
	}
	return b.String()
}
