package evidence

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/qualbox/qualbox/profiles"
	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/manifest"
)

// PolicySchema identifies the gate policy file layout.
const PolicySchema = "qualbox.gate-policy.v2"

// MaxPolicyBytes bounds a gate policy file.
const MaxPolicyBytes = 1 << 20

// Policy is a release gate policy file (YAML, strict): the trusted keys
// with the rows each may sign for and its validity window, the exact
// harness identity, and the required rows with their pinned manifests and
// required scenarios (docs/qualification.md#gate). reports/gate-policy.yaml
// is an example.
type Policy struct {
	Schema  string        `yaml:"schema"`
	Trust   []PolicyTrust `yaml:"trust"`
	Harness PolicyHarness `yaml:"harness"`
	Rows    []PolicyRow   `yaml:"rows"`
	// MaxReportAge, when set (a Go duration such as "720h"), is the
	// oldest a report may be: the gate refuses one whose run ended longer
	// ago than this before the gate ran. Zero (absent) sets no limit.
	MaxReportAge time.Duration `yaml:"maxReportAge,omitempty"`
	// Floors are the lowest accepted runtime component versions, each
	// component at most once (Floor).
	Floors []Floor `yaml:"floors,omitempty"`
}

// PolicyTrust is one trust entry of a policy file (TrustEntry once
// loaded).
type PolicyTrust struct {
	// Key is a PEM PKIX ed25519 public key file, absolute or relative to
	// the policy file's directory.
	Key string `yaml:"key"`
	// Rows are names of this policy's rows the key may sign reports for.
	Rows []string `yaml:"rows"`
	// NotBefore and NotAfter are RFC 3339 times (with a zone offset)
	// bounding, inclusively, the signed start and end of a report.
	NotBefore string `yaml:"notBefore"`
	NotAfter  string `yaml:"notAfter"`
}

// PolicyHarness is the harness part of a policy file (HarnessRequirement
// once loaded); every field is required, cleanRevision too.
type PolicyHarness struct {
	Module        string      `yaml:"module"`
	Catalogues    []Catalogue `yaml:"catalogues"`
	CleanRevision *bool       `yaml:"cleanRevision"`
}

// PolicyRow is a Row with the manifest files it pins, relative to the
// policy file's directory.
type PolicyRow struct {
	Row `yaml:",inline"`
	// Required is mandatory: true for a row whose missing or failing
	// report fails the gate, false for an informational row (pending
	// without a report, shown failed but not gating when it fails).
	Required  *bool    `yaml:"required"`
	Manifests []string `yaml:"manifests"`
}

// LoadedPolicy is a validated policy with paths resolved, keys loaded and
// manifests digested.
type LoadedPolicy struct {
	Path string
	// SHA256 is the hex SHA-256 of the bytes that were parsed, the digest
	// a Verification Summary names the policy by (a second read of Path
	// could see another file).
	SHA256      string
	Trust       []TrustEntry
	Requirement Requirement
}

// LoadPolicy reads and validates a gate policy file: at most
// MaxPolicyBytes, schema PolicySchema (an older schema is refused, saying
// what changed), known fields only, no duplicate keys, every field
// present; trust entries with a loadable key (each key once), rows of
// this policy and notBefore before notAfter; a harness module and exact
// catalogue pairs (64 lowercase hex digits); known profiles, unique row
// names, pinned manifests that parse (manifest.Parse with v, which knows
// the scenario catalogue; each row keeps the parsed manifest beside its
// digest), required scenarios, an explicit `required: true|false` on
// every row (false makes the row informational: pending when it has no
// report, and its failures do not fail the gate), every row signable by
// some trust entry,
// and a maxReportAge that is not negative. Errors name the file and the
// field.
func LoadPolicy(path string, v manifest.Validator) (*LoadedPolicy, error) {
	fail := func(format string, args ...any) (*LoadedPolicy, error) {
		return nil, fmt.Errorf("gate policy %s: %s", path, fmt.Sprintf(format, args...))
	}
	data, err := readRegular(path, MaxPolicyBytes)
	if err != nil {
		return fail("%v", err)
	}
	// The schema first, so that an older layout is named as such rather
	// than as its first unknown field.
	var head struct {
		Schema string `yaml:"schema"`
	}
	if err := yaml.Unmarshal(data, &head); err != nil {
		return fail("%v", err)
	}
	switch head.Schema {
	case PolicySchema:
	case "qualbox.gate-policy.v1":
		return fail("schema %q is no longer accepted: %s replaces keys with trust entries (key, rows, notBefore, notAfter), the catalogue minimum with exact harness pins (module, catalogues, cleanRevision) and the top-level scenarios with each row's scenarios (docs/qualification.md#gate)", head.Schema, PolicySchema)
	default:
		return fail("schema %q: want %q", head.Schema, PolicySchema)
	}
	var p Policy
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil {
		return fail("%v", err)
	}
	var extra any
	if err := dec.Decode(&extra); err == nil {
		return fail("more than one YAML document")
	}
	switch {
	case len(p.Trust) == 0:
		return fail("trust: at least one trusted key entry is required")
	case p.Harness.Module == "":
		return fail("harness.module is required (the main module path, e.g. github.com/qualbox/qualbox)")
	case len(p.Harness.Catalogues) == 0:
		return fail("harness.catalogues: at least one accepted (version, sha256) pair is required")
	case p.Harness.CleanRevision == nil:
		return fail("harness.cleanRevision is required (true or false)")
	case len(p.Rows) == 0:
		return fail("rows: at least one required row is needed")
	case p.MaxReportAge < 0:
		return fail("maxReportAge %s: want a positive duration, or none", p.MaxReportAge)
	}
	for i, c := range p.Harness.Catalogues {
		switch {
		case c.Version < 1:
			return fail("harness.catalogues[%d].version: want >= 1, got %d", i, c.Version)
		case !isHex64(c.SHA256):
			return fail("harness.catalogues[%d].sha256 %q: want 64 lowercase hex digits", i, c.SHA256)
		case slices.Contains(p.Harness.Catalogues[:i], c):
			return fail("harness.catalogues[%d] (%s) is listed twice", i, c)
		}
	}
	for i, f := range p.Floors {
		if why := f.validate(); why != "" {
			return fail("floors[%d]: %s", i, why)
		}
		if slices.ContainsFunc(p.Floors[:i], func(o Floor) bool { return o.Component == f.Component }) {
			return fail("floors[%d]: component %q has a floor already; give its accepted builds in one entry", i, f.Component)
		}
	}
	base := filepath.Dir(path)
	sum := sha256.Sum256(data)
	lp := &LoadedPolicy{Path: path, SHA256: hex.EncodeToString(sum[:]), Requirement: Requirement{Harness: HarnessRequirement{
		Module: p.Harness.Module, Catalogues: p.Harness.Catalogues, CleanRevision: *p.Harness.CleanRevision},
		MaxReportAge: p.MaxReportAge, Floors: p.Floors}}
	known := profiles.Names()
	seen := map[string]bool{}
	for i, r := range p.Rows {
		switch {
		case r.Name == "":
			return fail("rows[%d].name is required", i)
		case seen[r.Name]:
			return fail("rows[%d].name %q is used twice", i, r.Name)
		case !slices.Contains(known, r.Profile):
			return fail("rows[%d] (%s).profile %q: want one of %v", i, r.Name, r.Profile, known)
		case r.Required == nil:
			return fail("rows[%d] (%s).required is required (true: the row gates the release; false: informational, pending without a report)", i, r.Name)
		case len(r.Manifests) == 0:
			return fail("rows[%d] (%s).manifests: at least one pinned manifest is required", i, r.Name)
		case len(r.Scenarios) == 0:
			return fail("rows[%d] (%s).scenarios: at least one required scenario is needed", i, r.Name)
		}
		for k, name := range r.Scenarios {
			switch {
			case name == "":
				return fail("rows[%d] (%s).scenarios[%d] is empty", i, r.Name, k)
			case slices.Contains(r.Scenarios[:k], name):
				return fail("rows[%d] (%s).scenarios[%d] %q is listed twice", i, r.Name, k, name)
			}
		}
		seen[r.Name] = true
		row := r.Row
		row.Informational = !*r.Required
		for j, m := range r.Manifests {
			file := relativeTo(base, m)
			data, err := readRegular(file, MaxPolicyBytes)
			if err != nil {
				return fail("rows[%d] (%s).manifests: %v", i, r.Name, err)
			}
			parsed, err := manifest.Parse(file, data, v)
			if err != nil {
				return fail("rows[%d] (%s).manifests[%d]: %v", i, r.Name, j, err)
			}
			row.Manifests = append(row.Manifests, parsed.SHA256)
			row.Pinned = append(row.Pinned, parsed)
		}
		lp.Requirement.Rows = append(lp.Requirement.Rows, row)
	}
	signable := map[string]bool{}
	for i, t := range p.Trust {
		if t.Key == "" {
			return fail("trust[%d].key is required", i)
		}
		e := TrustEntry{KeyFile: relativeTo(base, t.Key), Rows: t.Rows}
		key, err := attest.LoadPublicKey(e.KeyFile)
		if err != nil {
			return fail("trust[%d].key: %v", i, err)
		}
		e.Key, e.KeyID = key, attest.KeyID(key)
		if k := slices.IndexFunc(lp.Trust, func(o TrustEntry) bool { return o.KeyID == e.KeyID }); k >= 0 {
			return fail("trust[%d].key %s: key ID %s is already trusted by trust[%d]; list all its rows in one entry", i, t.Key, e.KeyID, k)
		}
		if len(t.Rows) == 0 {
			return fail("trust[%d] (%s).rows: at least one row the key may sign for is required", i, t.Key)
		}
		for k, name := range t.Rows {
			switch {
			case !seen[name]:
				return fail("trust[%d] (%s).rows[%d] %q is not a row of this policy", i, t.Key, k, name)
			case slices.Contains(t.Rows[:k], name):
				return fail("trust[%d] (%s).rows[%d] %q is listed twice", i, t.Key, k, name)
			}
			signable[name] = true
		}
		for _, f := range []struct {
			name, value string
			to          *time.Time
		}{{"notBefore", t.NotBefore, &e.NotBefore}, {"notAfter", t.NotAfter, &e.NotAfter}} {
			if f.value == "" {
				return fail("trust[%d] (%s).%s is required (RFC 3339, e.g. 2026-12-01T00:00:00Z)", i, t.Key, f.name)
			}
			if *f.to, err = time.Parse(time.RFC3339, f.value); err != nil {
				return fail("trust[%d] (%s).%s %q: want an RFC 3339 time, e.g. 2026-12-01T00:00:00Z", i, t.Key, f.name, f.value)
			}
		}
		if !e.NotBefore.Before(e.NotAfter) {
			return fail("trust[%d] (%s): notBefore %s is not before notAfter %s", i, t.Key, t.NotBefore, t.NotAfter)
		}
		lp.Trust = append(lp.Trust, e)
	}
	for i, r := range p.Rows {
		if !signable[r.Name] {
			return fail("rows[%d] (%s): no trust entry may sign for it, so no report can meet it", i, r.Name)
		}
	}
	return lp, nil
}

// relativeTo resolves a policy path: absolute as given, else relative to
// the policy file's directory base.
func relativeTo(base, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(base, p)
}

// FileSHA256 returns the hex SHA-256 of a regular file of at most
// MaxPolicyBytes (a manifest).
func FileSHA256(path string) (string, error) {
	data, err := readRegular(path, MaxPolicyBytes)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

func readRegular(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New(path + ": not a regular file")
	}
	return attest.ReadBounded(f, path, "MaxPolicyBytes", max)
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
