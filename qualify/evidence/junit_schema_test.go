package evidence_test

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/qualify/evidence"
)

// xsdElement is what the schema declares for one element: its attributes
// (name -> required) and the child elements it may contain.
type xsdElement struct {
	attrs    map[string]bool
	children []string
}

// loadXSD reads the top-level element declarations of testdata's schema,
// resolving named complex types (the rerun elements share one).
func loadXSD(t *testing.T, path string) map[string]*xsdElement {
	t.Helper()
	data, err := os.ReadFile(path)
	assert.NilError(t, err)
	type attr struct {
		Name string `xml:"name,attr"`
		Use  string `xml:"use,attr"`
	}
	type ref struct {
		Ref  string `xml:"ref,attr"`
		Name string `xml:"name,attr"`
	}
	type complexType struct {
		Name     string `xml:"name,attr"`
		Attrs    []attr `xml:"attribute"`
		Sequence []ref  `xml:"sequence>element"`
		Choice   []ref  `xml:"choice>element"`
	}
	var schema struct {
		Elements []struct {
			Name    string       `xml:"name,attr"`
			Type    string       `xml:"type,attr"`
			Complex *complexType `xml:"complexType"`
		} `xml:"element"`
		Types []complexType `xml:"complexType"`
	}
	assert.NilError(t, xml.Unmarshal(data, &schema))
	named := map[string]complexType{}
	for _, ct := range schema.Types {
		named[ct.Name] = ct
	}
	out := map[string]*xsdElement{}
	for _, e := range schema.Elements {
		ct := e.Complex
		if ct == nil {
			if c, ok := named[e.Type]; ok {
				ct = &c
			}
		}
		el := &xsdElement{attrs: map[string]bool{}}
		if ct != nil {
			for _, a := range ct.Attrs {
				el.attrs[a.Name] = a.Use == "required"
			}
			for _, r := range append(ct.Sequence, ct.Choice...) {
				el.children = append(el.children, r.Ref+r.Name)
			}
		}
		out[e.Name] = el
	}
	return out
}

// validateJUnit walks doc and returns every element, attribute and nesting
// the schema does not declare, and every missing required attribute.
func validateJUnit(schema map[string]*xsdElement, doc []byte) []string {
	var problems []string
	dec := xml.NewDecoder(bytes.NewReader(doc))
	var stack []string
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return append(problems, err.Error())
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			name := tok.Name.Local
			el, ok := schema[name]
			switch {
			case !ok:
				problems = append(problems, fmt.Sprintf("element <%s> is not declared", name))
			case len(stack) == 0 && name != "testsuites" && name != "testsuite":
				problems = append(problems, fmt.Sprintf("root <%s>", name))
			case len(stack) > 0 && !slices.Contains(schema[stack[len(stack)-1]].children, name):
				problems = append(problems, fmt.Sprintf("<%s> inside <%s>", name, stack[len(stack)-1]))
			}
			if ok {
				seen := map[string]bool{}
				for _, a := range tok.Attr {
					seen[a.Name.Local] = true
					if _, declared := el.attrs[a.Name.Local]; !declared {
						problems = append(problems, fmt.Sprintf("<%s %s=...>: attribute not declared", name, a.Name.Local))
					}
				}
				for a, required := range el.attrs {
					if required && !seen[a] {
						problems = append(problems, fmt.Sprintf("<%s>: required attribute %s missing", name, a))
					}
				}
			}
			stack = append(stack, name)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		}
	}
	slices.Sort(problems)
	return problems
}

// junit.xml declares only what the common JUnit schema declares, with
// every required attribute (errors on testsuite), for every verdict kind.
func TestJUnitFollowsTheCommonSchema(t *testing.T) {
	schema := loadXSD(t, filepath.Join("testdata", "junit-common.xsd"))
	assert.Assert(t, schema["testsuite"].attrs["errors"], "schema reading lost the required errors attribute")
	run, scenarios := fixedRun()
	data, err := evidence.JUnit(run, scenarios)
	assert.NilError(t, err)
	assert.DeepEqual(t, validateJUnit(schema, data), []string(nil))

	// The validator is not vacuous: the layout this package wrote before
	// (a skipped count on testsuites, no errors count) is rejected.
	old := []byte(`<testsuites name="q" tests="1" failures="0" skipped="0" time="1">` +
		`<testsuite name="s" tests="1" failures="0" skipped="0"><testcase name="a"><bogus/></testcase></testsuite></testsuites>`)
	assert.DeepEqual(t, validateJUnit(schema, old), []string{
		"<testsuite>: required attribute errors missing",
		"<testsuites skipped=...>: attribute not declared",
		"element <bogus> is not declared",
	})
}

// xmllint returns the xmllint binary (Debian's libxml2-utils), skipping
// the test where it is missing; under CI it must be there.
func xmllint(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("xmllint")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("xmllint is required under CI: apt-get install -y libxml2-utils")
		}
		t.Skip("xmllint not installed (apt-get install -y libxml2-utils)")
	}
	return p
}

// junit.xml validates, by a real XSD validator, against both schemas CI
// consumers check it with: Jenkins' junit-10 (junit-common.xsd) and the
// Apache Ant JUnit schema (JUnit.xsd, vendored from windyroad's
// JUnit-Schema, Apache-2.0, see JUnit.xsd.LICENSE), for every verdict
// kind and a run with no scenario.
func TestJUnitValidatesAgainstJenkinsAndAntSchemas(t *testing.T) {
	bin := xmllint(t)
	run, scenarios := fixedRun()
	empty, _ := fixedRun()
	empty.Scenarios = nil
	passed, _ := fixedRun()
	passed.Scenarios = passed.Scenarios[:1]
	passed.Verdict = evidence.Verdict{Kind: evidence.Passed}
	dir := t.TempDir()
	for name, r := range map[string]*evidence.Run{"fixed": run, "empty": empty, "passed": passed} {
		data, err := evidence.JUnit(r, scenarios)
		assert.NilError(t, err)
		path := filepath.Join(dir, name+".xml")
		assert.NilError(t, os.WriteFile(path, data, 0o644))
		for _, schema := range []string{"junit-common.xsd", "JUnit.xsd"} {
			out, err := exec.Command(bin, "--noout", "--nonet", "--schema", filepath.Join("testdata", schema), path).CombinedOutput()
			assert.Check(t, err == nil, "%s against %s: %v\n%s", name, schema, err, out)
		}
	}

	// The validators are not vacuous: the layout written before (counts
	// on testsuites, system-out in a testcase, a zoned timestamp) fails
	// Ant's schema.
	old := filepath.Join(dir, "old.xml")
	assert.NilError(t, os.WriteFile(old, []byte(`<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="qualbox" tests="1" failures="0" errors="0" time="1.000">
  <testsuite name="q" tests="1" failures="0" errors="0" skipped="0" time="1.000" timestamp="2026-11-29T10:00:00Z">
    <properties></properties>
    <testcase name="a" classname="q" time="1.000"><system-out>evidence: 01-a/evidence.json</system-out></testcase>
  </testsuite>
</testsuites>
`), 0o644))
	out, err := exec.Command(bin, "--noout", "--nonet", "--schema", filepath.Join("testdata", "JUnit.xsd"), old).CombinedOutput()
	assert.Assert(t, err != nil, "the old layout validated against Ant's schema")
	assert.Check(t, is.Contains(string(out), "The attribute 'name' is not allowed"), "%s", out)
}

// Committed reports written before junit.xml followed Ant's schema need
// not validate against it, but each is one well-formed document.
func TestCommittedJUnitIsWellFormed(t *testing.T) {
	bin := xmllint(t)
	files, err := filepath.Glob(filepath.Join("..", "..", "reports", "*", "*", "junit.xml"))
	assert.NilError(t, err)
	assert.Assert(t, len(files) > 0, "no committed reports")
	for _, f := range files {
		out, err := exec.Command(bin, "--noout", "--nonet", f).CombinedOutput()
		assert.Check(t, err == nil, "%s: %v\n%s", f, err, out)
	}
}
