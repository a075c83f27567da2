package sandboxapi

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gotest.tools/v3/assert"
)

// del marks a field to delete in mutate.
type del struct{}

// raw is JSON text inserted verbatim by mutate.
type raw string

// mutate decodes base, sets the dotted path to value (del deletes it, raw
// is inserted as JSON) and re-encodes it. Array indexes are numbers.
func mutate(t *testing.T, base, path string, value any) []byte {
	t.Helper()
	var tree any
	assert.NilError(t, decodeNumbers(base, &tree))
	if r, ok := value.(raw); ok {
		assert.NilError(t, decodeNumbers(string(r), &value))
	}
	parts := strings.Split(path, ".")
	if path == "" {
		parts = nil
	}
	if len(parts) == 0 {
		b, err := json.Marshal(value)
		assert.NilError(t, err)
		return b
	}
	cur := tree
	for i, part := range parts {
		last := i == len(parts)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				if _, ok := value.(del); ok {
					delete(c, part)
				} else {
					c[part] = value
				}
			} else {
				cur = c[part]
			}
		case []any:
			idx, err := strconv.Atoi(part)
			assert.NilError(t, err)
			if last {
				c[idx] = value
			} else {
				cur = c[idx]
			}
		default:
			t.Fatalf("cannot descend into %T at %q", cur, part)
		}
	}
	b, err := json.Marshal(tree)
	assert.NilError(t, err)
	return b
}

// issuePaths returns the dotted paths of err's issues; err must be a
// *ValidationError.
func issuePaths(t *testing.T, err error) []string {
	t.Helper()
	var verr *ValidationError
	assert.Assert(t, errors.As(err, &verr), "want *ValidationError, got %T: %v", err, err)
	paths := make([]string, 0, len(verr.Issues))
	for _, issue := range verr.Issues {
		paths = append(paths, issue.PathString())
	}
	return paths
}

// assertPaths checks err is a *ValidationError with exactly these paths.
func assertPaths(t *testing.T, err error, want ...string) {
	t.Helper()
	assert.Assert(t, err != nil, "want issues at %v, got no error", want)
	got := issuePaths(t, err)
	assert.Assert(t, cmp.Equal(want, got), "issue paths differ (-want +got):\n%s\nerror: %v", cmp.Diff(want, got), err)
}

func ptr[T any](v T) *T { return &v }

func decodeNumbers(s string, v *any) error {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	return dec.Decode(v)
}
