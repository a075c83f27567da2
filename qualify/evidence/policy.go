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
const PolicySchema = "qualbox.gate-policy.v1"

// MaxPolicyBytes bounds a gate policy file.
const MaxPolicyBytes = 1 << 20

// Policy is a release gate policy file (YAML, strict): the trusted keys,
// the minimum harness identity, the required rows with their pinned
// manifests, and the scenarios that must pass (docs/qualification.md#gate).
// reports/gate-policy.yaml is an example.
type Policy struct {
	Schema string `yaml:"schema"`
	// Keys are PEM PKIX ed25519 public key files, absolute or relative to
	// the policy file's directory; a report must verify against one of them.
	Keys    []string           `yaml:"keys"`
	Harness HarnessRequirement `yaml:"harness"`
	Rows    []PolicyRow        `yaml:"rows"`
	// Scenarios must pass in every report.
	Scenarios []string `yaml:"scenarios"`
	// MaxReportAge, when set (a Go duration such as "720h"), is the
	// oldest a report may be: the gate refuses one whose run ended longer
	// ago than this before the gate ran. Zero (absent) sets no limit.
	MaxReportAge time.Duration `yaml:"maxReportAge,omitempty"`
}

// PolicyRow is a Row with the manifest files it pins, relative to the
// policy file's directory.
type PolicyRow struct {
	Row       `yaml:",inline"`
	Manifests []string `yaml:"manifests"`
}

// LoadedPolicy is a validated policy with paths resolved and manifests
// digested.
type LoadedPolicy struct {
	Path        string
	KeyFiles    []string
	Requirement Requirement
}

// LoadPolicy reads and validates a gate policy file: at most
// MaxPolicyBytes, known fields only, no duplicate keys, every field
// present, known profiles, unique row names, pinned manifests that parse
// (manifest.Parse with v, which knows the scenario catalogue; each row
// keeps the parsed manifest beside its digest), a maxReportAge that is not
// negative. Errors name the file and the field.
func LoadPolicy(path string, v manifest.Validator) (*LoadedPolicy, error) {
	fail := func(format string, args ...any) (*LoadedPolicy, error) {
		return nil, fmt.Errorf("gate policy %s: %s", path, fmt.Sprintf(format, args...))
	}
	data, err := readRegular(path, MaxPolicyBytes)
	if err != nil {
		return fail("%v", err)
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
	case p.Schema != PolicySchema:
		return fail("schema %q: want %q", p.Schema, PolicySchema)
	case len(p.Keys) == 0:
		return fail("keys: at least one trusted public key file is required")
	case p.Harness.MinimumCatalogueVersion < 1:
		return fail("harness.minimumCatalogueVersion: want >= 1, got %d", p.Harness.MinimumCatalogueVersion)
	case len(p.Rows) == 0:
		return fail("rows: at least one required row is needed")
	case len(p.Scenarios) == 0:
		return fail("scenarios: at least one required scenario is needed")
	case p.MaxReportAge < 0:
		return fail("maxReportAge %s: want a positive duration, or none", p.MaxReportAge)
	}
	for i, d := range p.Harness.CatalogueSHA256 {
		if !isHex64(d) {
			return fail("harness.catalogueSha256[%d] %q: want 64 lowercase hex digits", i, d)
		}
	}
	base := filepath.Dir(path)
	lp := &LoadedPolicy{Path: path, Requirement: Requirement{Scenarios: p.Scenarios, Harness: p.Harness, MaxReportAge: p.MaxReportAge}}
	for _, k := range p.Keys {
		lp.KeyFiles = append(lp.KeyFiles, relativeTo(base, k))
	}
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
		case len(r.Manifests) == 0:
			return fail("rows[%d] (%s).manifests: at least one pinned manifest is required", i, r.Name)
		}
		seen[r.Name] = true
		row := r.Row
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
