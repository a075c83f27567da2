package yamlbounds_test

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/profiles/yamlbounds"
)

func parse(t *testing.T, doc string) *yaml.Node {
	t.Helper()
	var n yaml.Node
	assert.NilError(t, yaml.Unmarshal([]byte(doc), &n))
	return &n
}

func TestCheck(t *testing.T) {
	b := yamlbounds.Bounds{Depth: 4, Nodes: 20, ScalarBytes: 8}
	assert.Check(t, yamlbounds.Check(parse(t, "a: [1, 2]\n"), b) == nil)
	for doc, want := range map[string]string{
		"a: {b: {c: [1]}}\n":                        "MaxDepth",
		"a: " + strings.Repeat("x", 9) + "\n":       "MaxScalarBytes",
		"a: &x [1, 2, 3, 4]\nb: [*x, *x, *x, *x]\n": "MaxNodes", // aliases expand where used
	} {
		c := yamlbounds.Check(parse(t, doc), b)
		if assert.Check(t, c != nil, doc) {
			assert.Check(t, c.Limit == want, "%q: got %+v", doc, c)
			assert.Check(t, c.Line >= 1, doc)
		}
	}
}
