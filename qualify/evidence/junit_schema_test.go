package evidence_test

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"gotest.tools/v3/assert"

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
