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
	l := &policyLoad{path: path, base: filepath.Dir(path), v: v, seen: map[string]bool{}, signable: map[string]bool{}}
	// The steps, in order: the file and its schema, the fields every
	// policy needs, the catalogue pins and floors, then the rows with
	// their pinned manifests, the trust entries, and a signer for each row.
	for _, step := range []func() error{l.read, l.decode, l.checkRequired, l.checkCatalogues, l.checkFloors, l.start, l.loadRows, l.loadTrust, l.checkSignable} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return l.lp, nil
}

// policyLoad is the state of one LoadPolicy as its steps fill it.
type policyLoad struct {
	path, base string
	v          manifest.Validator
	data       []byte
	p          Policy
	lp         *LoadedPolicy
	// seen holds the row names read so far; signable those some trust
	// entry may sign for.
	seen, signable map[string]bool
}

// fail is the error of a policy problem, naming the file.
func (l *policyLoad) fail(format string, args ...any) error {
	return fmt.Errorf("gate policy %s: %s", l.path, fmt.Sprintf(format, args...))
}

// read reads the policy file, a regular file of at most MaxPolicyBytes.
func (l *policyLoad) read() error {
	data, err := readRegular(l.path, MaxPolicyBytes)
	if err != nil {
		return l.fail("%v", err)
	}
	l.data = data
	return nil
}

// decode reads the schema first, so that an older layout is named as
// such rather than as its first unknown field, then the one document
// strictly.
func (l *policyLoad) decode() error {
	var head struct {
		Schema string `yaml:"schema"`
	}
	if err := yaml.Unmarshal(l.data, &head); err != nil {
		return l.fail("%v", err)
	}
	switch head.Schema {
	case PolicySchema:
	case "qualbox.gate-policy.v1":
		return l.fail("schema %q is no longer accepted: %s replaces keys with trust entries (key, rows, notBefore, notAfter), the catalogue minimum with exact harness pins (module, catalogues, cleanRevision) and the top-level scenarios with each row's scenarios (docs/qualification.md#gate)", head.Schema, PolicySchema)
	default:
		return l.fail("schema %q: want %q", head.Schema, PolicySchema)
	}
	dec := yaml.NewDecoder(bytes.NewReader(l.data))
	dec.KnownFields(true)
	if err := dec.Decode(&l.p); err != nil {
		return l.fail("%v", err)
	}
	var extra any
	if err := dec.Decode(&extra); err == nil {
		return l.fail("more than one YAML document")
	}
	return nil
}

// checkRequired checks the fields every policy needs.
func (l *policyLoad) checkRequired() error {
	p := &l.p
	switch {
	case len(p.Trust) == 0:
		return l.fail("trust: at least one trusted key entry is required")
	case p.Harness.Module == "":
		return l.fail("harness.module is required (the main module path, e.g. github.com/qualbox/qualbox)")
	case len(p.Harness.Catalogues) == 0:
		return l.fail("harness.catalogues: at least one accepted (version, sha256) pair is required")
	case p.Harness.CleanRevision == nil:
		return l.fail("harness.cleanRevision is required (true or false)")
	case len(p.Rows) == 0:
		return l.fail("rows: at least one required row is needed")
	case p.MaxReportAge < 0:
		return l.fail("maxReportAge %s: want a positive duration, or none", p.MaxReportAge)
	}
	return nil
}

// checkCatalogues checks each catalogue pin: a version, a digest, once.
func (l *policyLoad) checkCatalogues() error {
	cs := l.p.Harness.Catalogues
	for i, c := range cs {
		switch {
		case c.Version < 1:
			return l.fail("harness.catalogues[%d].version: want >= 1, got %d", i, c.Version)
		case !isHex64(c.SHA256):
			return l.fail("harness.catalogues[%d].sha256 %q: want 64 lowercase hex digits", i, c.SHA256)
		case slices.Contains(cs[:i], c):
			return l.fail("harness.catalogues[%d] (%s) is listed twice", i, c)
		}
	}
	return nil
}

// checkFloors checks each floor, at most one per component.
func (l *policyLoad) checkFloors() error {
	floors := l.p.Floors
	for i, f := range floors {
		if why := f.validate(); why != "" {
			return l.fail("floors[%d]: %s", i, why)
		}
		if slices.ContainsFunc(floors[:i], func(o Floor) bool { return o.Component == f.Component }) {
			return l.fail("floors[%d]: component %q has a floor already; give its accepted builds in one entry", i, f.Component)
		}
	}
	return nil
}

// start begins the loaded policy: its digest, harness, age and floors.
func (l *policyLoad) start() error {
	p := &l.p
	sum := sha256.Sum256(l.data)
	l.lp = &LoadedPolicy{Path: l.path, SHA256: hex.EncodeToString(sum[:]), Requirement: Requirement{Harness: HarnessRequirement{
		Module: p.Harness.Module, Catalogues: p.Harness.Catalogues, CleanRevision: *p.Harness.CleanRevision},
		MaxReportAge: p.MaxReportAge, Floors: p.Floors}}
	return nil
}

// loadRows checks each row (checkRow) and pins its manifests (pinRow).
func (l *policyLoad) loadRows() error {
	known := profiles.Names()
	for i, r := range l.p.Rows {
		if err := l.checkRow(i, r, known); err != nil {
			return err
		}
		l.seen[r.Name] = true
		row, err := l.pinRow(i, r)
		if err != nil {
			return err
		}
		l.lp.Requirement.Rows = append(l.lp.Requirement.Rows, row)
	}
	return nil
}

// checkRow checks row i's fields: a unique name, a known profile, an
// explicit required, manifests, and scenarios each named once.
func (l *policyLoad) checkRow(i int, r PolicyRow, known []string) error {
	switch {
	case r.Name == "":
		return l.fail("rows[%d].name is required", i)
	case l.seen[r.Name]:
		return l.fail("rows[%d].name %q is used twice", i, r.Name)
	case !slices.Contains(known, r.Profile):
		return l.fail("rows[%d] (%s).profile %q: want one of %v", i, r.Name, r.Profile, known)
	case r.Required == nil:
		return l.fail("rows[%d] (%s).required is required (true: the row gates the release; false: informational, pending without a report)", i, r.Name)
	case len(r.Manifests) == 0:
		return l.fail("rows[%d] (%s).manifests: at least one pinned manifest is required", i, r.Name)
	case len(r.Scenarios) == 0:
		return l.fail("rows[%d] (%s).scenarios: at least one required scenario is needed", i, r.Name)
	}
	for k, name := range r.Scenarios {
		switch {
		case name == "":
			return l.fail("rows[%d] (%s).scenarios[%d] is empty", i, r.Name, k)
		case slices.Contains(r.Scenarios[:k], name):
			return l.fail("rows[%d] (%s).scenarios[%d] %q is listed twice", i, r.Name, k, name)
		}
	}
	return nil
}

// pinRow returns row i with its manifests read, parsed and digested.
func (l *policyLoad) pinRow(i int, r PolicyRow) (Row, error) {
	row := r.Row
	row.Informational = !*r.Required
	for j, m := range r.Manifests {
		file := relativeTo(l.base, m)
		data, err := readRegular(file, MaxPolicyBytes)
		if err != nil {
			return Row{}, l.fail("rows[%d] (%s).manifests: %v", i, r.Name, err)
		}
		parsed, err := manifest.Parse(file, data, l.v)
		if err != nil {
			return Row{}, l.fail("rows[%d] (%s).manifests[%d]: %v", i, r.Name, j, err)
		}
		row.Manifests = append(row.Manifests, parsed.SHA256)
		row.Pinned = append(row.Pinned, parsed)
	}
	if name := UnpinnedScenario(row); name != "" {
		return Row{}, l.fail("rows[%d] (%s).scenarios: %q is listed by none of the row's pinned manifests, so no report of the row would owe it", i, r.Name, name)
	}
	return row, nil
}

// UnpinnedScenario returns the first of row's Scenarios that none of its
// parsed Pinned manifests lists, or "" when each is listed by one. The
// gate requires of a report only the row scenarios its own pinned
// manifest lists (docs/qualification.md#gate), so such a scenario would
// be required of no report.
func UnpinnedScenario(row Row) string {
	for _, name := range row.Scenarios {
		if !slices.ContainsFunc(row.Pinned, func(m *manifest.Manifest) bool {
			return m != nil && slices.ContainsFunc(m.Scenarios, func(e manifest.Entry) bool { return e.Name == name })
		}) {
			return name
		}
	}
	return ""
}

// loadTrust loads each trust entry (trustEntry).
func (l *policyLoad) loadTrust() error {
	for i, t := range l.p.Trust {
		e, err := l.trustEntry(i, t)
		if err != nil {
			return err
		}
		l.lp.Trust = append(l.lp.Trust, e)
	}
	return nil
}

// trustEntry loads trust entry i: its key (not trusted by an earlier
// entry), its rows (trustRows) and its window (trustWindow).
func (l *policyLoad) trustEntry(i int, t PolicyTrust) (TrustEntry, error) {
	if t.Key == "" {
		return TrustEntry{}, l.fail("trust[%d].key is required", i)
	}
	e := TrustEntry{KeyFile: relativeTo(l.base, t.Key), Rows: t.Rows}
	key, err := attest.LoadPublicKey(e.KeyFile)
	if err != nil {
		return TrustEntry{}, l.fail("trust[%d].key: %v", i, err)
	}
	e.Key, e.KeyID = key, attest.KeyID(key)
	if k := slices.IndexFunc(l.lp.Trust, func(o TrustEntry) bool { return o.KeyID == e.KeyID }); k >= 0 {
		return TrustEntry{}, l.fail("trust[%d].key %s: key ID %s is already trusted by trust[%d]; list all its rows in one entry", i, t.Key, e.KeyID, k)
	}
	if err := l.trustRows(i, t); err != nil {
		return TrustEntry{}, err
	}
	if err := l.trustWindow(i, t, &e); err != nil {
		return TrustEntry{}, err
	}
	return e, nil
}

// trustRows checks trust entry i names at least one row, each a row of
// this policy, once, and marks them signable.
func (l *policyLoad) trustRows(i int, t PolicyTrust) error {
	if len(t.Rows) == 0 {
		return l.fail("trust[%d] (%s).rows: at least one row the key may sign for is required", i, t.Key)
	}
	for k, name := range t.Rows {
		switch {
		case !l.seen[name]:
			return l.fail("trust[%d] (%s).rows[%d] %q is not a row of this policy", i, t.Key, k, name)
		case slices.Contains(t.Rows[:k], name):
			return l.fail("trust[%d] (%s).rows[%d] %q is listed twice", i, t.Key, k, name)
		}
		l.signable[name] = true
	}
	return nil
}

// trustWindow parses trust entry i's notBefore and notAfter (RFC 3339,
// both required) into e and checks the one comes before the other.
func (l *policyLoad) trustWindow(i int, t PolicyTrust, e *TrustEntry) error {
	for _, f := range []struct {
		name, value string
		to          *time.Time
	}{{"notBefore", t.NotBefore, &e.NotBefore}, {"notAfter", t.NotAfter, &e.NotAfter}} {
		if f.value == "" {
			return l.fail("trust[%d] (%s).%s is required (RFC 3339, e.g. 2026-12-01T00:00:00Z)", i, t.Key, f.name)
		}
		var err error
		if *f.to, err = time.Parse(time.RFC3339, f.value); err != nil {
			return l.fail("trust[%d] (%s).%s %q: want an RFC 3339 time, e.g. 2026-12-01T00:00:00Z", i, t.Key, f.name, f.value)
		}
	}
	if !e.NotBefore.Before(e.NotAfter) {
		return l.fail("trust[%d] (%s): notBefore %s is not before notAfter %s", i, t.Key, t.NotBefore, t.NotAfter)
	}
	return nil
}

// checkSignable checks some trust entry may sign for each row.
func (l *policyLoad) checkSignable() error {
	for i, r := range l.p.Rows {
		if !l.signable[r.Name] {
			return l.fail("rows[%d] (%s): no trust entry may sign for it, so no report can meet it", i, r.Name)
		}
	}
	return nil
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
