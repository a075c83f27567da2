package exitcode

import (
	"os"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// README.md carries the same table the commands print.
func TestREADMECarriesTheTable(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	assert.NilError(t, err)
	assert.Check(t, is.Contains(string(readme), Markdown()), "README.md must contain:\n%s", Markdown())
}

// Statuses are distinct and ascending, names distinct, and the usage
// status is never reused for an internal error.
func TestTableIsConsistent(t *testing.T) {
	codes, names := map[int]bool{}, map[string]bool{}
	for i, c := range Table {
		assert.Check(t, !codes[c.Code] && !names[c.Name], "row %d repeats %d or %s", i, c.Code, c.Name)
		codes[c.Code], names[c.Name] = true, true
		if i > 0 {
			assert.Check(t, Table[i-1].Code < c.Code, "row %d out of order", i)
		}
	}
	assert.Check(t, Usage != Internal)
	assert.Check(t, is.Len(Table, 6))
}
