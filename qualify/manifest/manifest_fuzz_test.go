package manifest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/qualify/manifest"
	"github.com/qualbox/qualbox/qualify/scenario"
)

// FuzzParse: Parse never panics and rejects with a *manifest.Error whose
// issues carry lines inside the document, wrapping a *LimitError exactly
// when a bound was exceeded (docs/untrusted-inputs.md); an accepted
// manifest has a normalized policy, registered scenarios and a valid
// endpoint, and the same manifest written back as a document parses to the
// same values.
func FuzzParse(f *testing.F) {
	reg := scenario.Default()
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := manifest.Parse("m.yaml", data, reg)
		if err != nil {
			var merr *manifest.Error
			if !errors.As(err, &merr) {
				t.Fatalf("rejection is %T, not *manifest.Error: %v", err, err)
			}
			if merr.File != "m.yaml" || len(merr.Issues) == 0 {
				t.Fatalf("error names file %q with %d issues", merr.File, len(merr.Issues))
			}
			lines := bytes.Count(data, []byte("\n")) + 1
			for _, is := range merr.Issues {
				if is.Line < 0 || is.Line > lines || is.Problem == "" {
					t.Fatalf("issue %+v outside the %d-line document", is, lines)
				}
			}
			var lerr *manifest.LimitError
			if errors.As(err, &lerr) != (merr.Limit != nil) {
				t.Fatalf("LimitError %v, Limit field %v", lerr, merr.Limit)
			}
			if len(data) > manifest.MaxBytes && lerr == nil {
				t.Fatalf("%d-byte manifest refused without a limit error: %v", len(data), err)
			}
			return
		}
		if len(data) > manifest.MaxBytes {
			t.Fatalf("accepted a %d-byte manifest", len(data))
		}
		if _, err := m.Policy.Normalize(); err != nil {
			t.Fatalf("accepted policy is invalid: %v", err)
		}
		p, ok := strings.CutPrefix(m.Endpoint, "unix:///")
		if !ok || strings.Contains("/"+p+"/", "/../") {
			t.Fatalf("accepted endpoint %q", m.Endpoint)
		}
		if m.User.UID < 1 || m.User.UID > driver.MaxArchiveID || m.User.GID < 1 || m.User.GID > driver.MaxArchiveID {
			t.Fatalf("accepted user %+v", m.User)
		}
		for _, e := range m.Scenarios {
			if !slices.Contains(reg.Names(), e.Name) || e.Params == nil {
				t.Fatalf("accepted scenario entry %+v", e)
			}
		}

		// Write the values back (JSON is YAML) and parse again. Params are
		// written as decoded; those that JSON cannot carry are left out.
		doc := map[string]any{
			"profile":   m.Profile,
			"engine":    map[string]any{"endpoint": m.Endpoint},
			"image":     m.Image,
			"user":      map[string]any{"uid": m.User.UID, "gid": m.User.GID},
			"namespace": m.Namespace,
			"policy":    m.Policy,
		}
		if m.Output != "" {
			doc["output"] = m.Output
		}
		var entries []map[string]any
		for _, e := range m.Scenarios {
			entries = append(entries, map[string]any{"name": e.Name})
		}
		doc["scenarios"] = entries
		out, err := json.Marshal(doc)
		assert.NilError(t, err)
		again, err := manifest.Parse("m.yaml", out, reg)
		if err != nil {
			// Parameters are required by some scenarios; only a missing
			// parameter may fail the re-parse.
			var merr *manifest.Error
			assert.Assert(t, errors.As(err, &merr))
			for _, is := range merr.Issues {
				if !strings.HasPrefix(is.Field, "scenarios[") {
					t.Fatalf("written-back manifest %s: %v\ninput: %q", out, err, data)
				}
			}
			return
		}
		if diff := cmp.Diff(m, again,
			cmpopts.IgnoreFields(manifest.Manifest{}, "SHA256"),
			cmpopts.IgnoreFields(manifest.Entry{}, "Params")); diff != "" {
			t.Fatalf("written-back manifest differs (-first +again):\n%s\ninput: %q", diff, data)
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
		{"bytes", "MaxBytes", "profile: " + strings.Repeat("x", manifest.MaxBytes)},
		{"depth", "MaxDepth", "policy: " + strings.Repeat("[", 40) + strings.Repeat("]", 40)},
		{"billion laughs", "MaxNodes", laughs + "policy: *a9\n"},
		{"huge scalar", "MaxScalarBytes", "output: " + strings.Repeat("y", manifest.MaxScalarBytes+1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := manifest.Parse("m.yaml", []byte(tc.data), scenario.Default())
			var lerr *manifest.LimitError
			assert.Assert(t, errors.As(err, &lerr), "got %v", err)
			assert.Equal(t, lerr.Limit, tc.limit)
			assert.ErrorContains(t, err, tc.limit)
		})
	}
}

// Duplicate keys are problems at their field, not last-one-wins.
func TestParseDuplicateKeys(t *testing.T) {
	data := strings.Replace(good, "image: build\n", "image: build\nimage: sha256:"+strings.Repeat("0", 64)+"\n", 1)
	_, err := manifest.Parse("m.yaml", []byte(data), scenario.Default())
	var merr *manifest.Error
	assert.Assert(t, errors.As(err, &merr), "got %v", err)
	assert.Assert(t, slices.ContainsFunc(merr.Issues, func(is manifest.Issue) bool {
		return is.Field == "image" && is.Problem == "duplicate field" && is.Line == 5
	}), "%v", err)
}
