package sandboxapi

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gotest.tools/v3/assert"
)

// TestBadRecoveryRecords is the bad-record table of issue #5: each record
// is rejected with a *ValidationError at the named field path.
func TestBadRecoveryRecords(t *testing.T) {
	oversize := validRecord()
	oversize.PolicyDigest = ""
	oversize.BackendRevision = strings.Repeat("r", MaxRecoveryBytes)
	over, err := json.Marshal(oversize)
	assert.NilError(t, err)

	for _, tc := range []struct {
		name string
		data []byte
		want []string
	}{
		{"truncated JSON", []byte(validRecordJSON[:len(validRecordJSON)/2]), []string{"(root)"}},
		{"truncated to nothing", nil, []string{"(root)"}},
		{"trailing data", []byte(validRecordJSON + "{}"), []string{"(root)"}},
		{"extra top-level field", mutate(t, validRecordJSON, "owner", "someone"), []string{"owner"}},
		{"extra identity field", mutate(t, validRecordJSON, "resources.1.identity.id", "x"), []string{"resources.1.identity.id"}},
		{"oversize", over, []string{"(root)"}},
		{"wrong format string", mutate(t, validRecordJSON, "format", "agenai.sandbox-recovery.v1"), []string{"format"}},
		{"format not a string", mutate(t, validRecordJSON, "format", 2), []string{"format"}},
		{"duplicate roles", mutate(t, validRecordJSON, "resources.2.role", "storage"), []string{"resources.2.role"}},
		{"duplicate keys", []byte(strings.Replace(validRecordJSON, `"phase":"running"`, `"phase":"running","phase":"stopped"`, 1)), []string{"phase"}},
		{"unverified authority with identified resources", mutate(t, validRecordJSON, "authority", raw(`{"kind":"unverified"}`)), []string{"authority"}},
		{"unverified authority, reserved, creating resource", mutate(t,
			string(mutate(t, validRecordJSON, "authority", raw(`{"kind":"unverified"}`))), "phase", "reserved"), []string{"authority"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRecoveryRecord(tc.data)
			var verr *ValidationError
			assert.Assert(t, errors.As(err, &verr), "got %T %v", err, err)
			assertPaths(t, err, tc.want...)
		})
	}
}

// FuzzParseRecoveryRecord: ParseRecoveryRecord never panics, and a record
// it accepts is valid, re-marshals and re-parses to an equal value.
func FuzzParseRecoveryRecord(f *testing.F) {
	f.Add([]byte(validRecordJSON))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseRecoveryRecord(data)
		if err != nil {
			var verr *ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("rejection is %T, not *ValidationError: %v", err, err)
			}
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("accepted record is invalid: %v\ninput: %q", err, data)
		}
		out, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("marshal accepted record: %v", err)
		}
		again, err := ParseRecoveryRecord(out)
		if err != nil {
			t.Fatalf("re-parse of %s: %v\ninput: %q", out, err, data)
		}
		if diff := cmp.Diff(r, again); diff != "" {
			t.Fatalf("re-parsed record differs (-first +again):\n%s\ninput: %q", diff, data)
		}
	})
}
