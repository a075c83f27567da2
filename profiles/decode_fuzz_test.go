package profiles

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gotest.tools/v3/assert"
)

// FuzzParse: parse never panics and rejects with an *InvalidProfileError
// for the named file, wrapping a *LimitError exactly when a bound was
// exceeded (docs/untrusted-inputs.md); an accepted profile is named after
// its file, passes validate again and parses the same way twice.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		p, err := parse(name, data)
		if err != nil {
			var perr *InvalidProfileError
			if !errors.As(err, &perr) {
				t.Fatalf("rejection is %T, not *InvalidProfileError: %v", err, err)
			}
			if perr.File != name+".yaml" || len(perr.Issues) == 0 {
				t.Fatalf("error names file %q with %d issues", perr.File, len(perr.Issues))
			}
			var lerr *LimitError
			if errors.As(err, &lerr) != (perr.Limit != nil) {
				t.Fatalf("LimitError %v, Limit field %v", lerr, perr.Limit)
			}
			if len(data) > MaxBytes && lerr == nil {
				t.Fatalf("%d-byte document refused without a limit error: %v", len(data), err)
			}
			return
		}
		if len(data) > MaxBytes || p.Name != name {
			t.Fatalf("accepted %d bytes as profile %q for file %q", len(data), p.Name, name)
		}
		var is issues
		validate(name, p, &is)
		if len(is) > 0 {
			t.Fatalf("accepted profile fails validation: %v", is)
		}
		again, err := parse(name, data)
		assert.NilError(t, err)
		if diff := cmp.Diff(p, again); diff != "" {
			t.Fatalf("second parse differs:\n%s", diff)
		}
	})
}

// The bounds are enforced with a *LimitError naming each one.
func TestParseLimits(t *testing.T) {
	laughs := "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
	for i := 1; i <= 9; i++ {
		prev := fmt.Sprintf("*a%d", i-1)
		laughs += fmt.Sprintf("a%d: &a%d [%s]\n", i, i, strings.Repeat(prev+", ", 9)+prev)
	}
	for _, tc := range []struct {
		name, limit string
		data        string
	}{
		{"bytes", "MaxBytes", "name: " + strings.Repeat("x", MaxBytes)},
		{"depth", "MaxDepth", "cgroup: " + strings.Repeat("[", 20) + strings.Repeat("]", 20)},
		{"billion laughs", "MaxNodes", laughs + "seccomp: *a9\n"},
		{"huge scalar", "MaxScalarBytes", "name: " + strings.Repeat("y", MaxScalarBytes+1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse("example", []byte(tc.data))
			var lerr *LimitError
			assert.Assert(t, errors.As(err, &lerr), "got %v", err)
			assert.Equal(t, lerr.Limit, tc.limit)
			assert.ErrorContains(t, err, tc.limit)
		})
	}
}
