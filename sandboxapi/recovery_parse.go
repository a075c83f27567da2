package sandboxapi

import (
	"bytes"
	"encoding/json"
	"slices"
)

// Kind names the recovery policy as the contract does
// (docs/contract.md#recovery):
// "in_process" when Persist is nil, "persisted" otherwise.
func (p RecoveryPolicy) Kind() string {
	if p.Persist == nil {
		return "in_process"
	}
	return "persisted"
}

// ValidDigest reports whether s is a "sha256:" digest with 64 lowercase hex
// digits, the form of every recovery record digest and fingerprint.
func ValidDigest(s string) bool {
	const prefix = "sha256:"
	if len(s) != len(prefix)+64 || s[:len(prefix)] != prefix {
		return false
	}
	for i := len(prefix); i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ParseRecoveryRecord decodes a JSON recovery record strictly
// (docs/contract.md#recovery). Before decoding, the record's compact JSON
// encoding must be at most MaxRecoveryBytes bytes; a larger record is one root
// issue. Unknown fields, wrong kinds and every invariant of Validate are
// reported in one *ValidationError with paths relative to the record, e.g.
// "resources.1.identity.kind".
func ParseRecoveryRecord(data []byte) (RecoveryRecord, error) {
	if len(data) > MaxRecoveryBytes {
		// Whitespace does not count, as it would not in JSON.stringify.
		var compact bytes.Buffer
		if err := json.Compact(&compact, data); err != nil {
			return RecoveryRecord{}, rootIssue("invalid JSON: %v", err)
		}
		if compact.Len() > MaxRecoveryBytes {
			return RecoveryRecord{}, rootIssue("recovery record is %d bytes, more than %d", compact.Len(), MaxRecoveryBytes)
		}
	}
	var l issueList
	tree, ok := decodeTree(data, &l)
	if !ok {
		return RecoveryRecord{}, l.err()
	}
	o := node{l: &l, v: tree}.object()
	o.only("format", "backendId", "backendRevision", "namespace", "operationId", "sandboxId",
		"imageDigest", "policyDigest", "configurationDigest", "phase", "authority", "resources")
	r := RecoveryRecord{
		Format:              o.field("format").str(),
		BackendID:           o.field("backendId").str(),
		BackendRevision:     o.field("backendRevision").str(),
		Namespace:           Namespace(o.field("namespace").str()),
		OperationID:         o.field("operationId").str(),
		SandboxID:           SandboxID(o.field("sandboxId").str()),
		ImageDigest:         o.field("imageDigest").str(),
		PolicyDigest:        o.field("policyDigest").str(),
		ConfigurationDigest: o.field("configurationDigest").str(),
		Phase:               Phase(o.field("phase").str()),
	}
	ao := o.field("authority").object()
	r.Authority.Kind = AuthorityKind(ao.field("kind").str())
	switch r.Authority.Kind {
	case AuthorityUnverified:
		ao.only("kind")
	case AuthorityVerified:
		ao.only("kind", "backendIdentity")
		r.Authority.BackendIdentity = ao.field("backendIdentity").str()
	}
	resources := o.field("resources").array()
	if resources != nil {
		r.Resources = []RecoveryResource{}
	}
	for _, n := range resources {
		ro := n.object()
		ro.only("role", "name", "identity")
		res := RecoveryResource{Role: Role(ro.field("role").str()), Name: ro.field("name").str()}
		ido := ro.field("identity").object()
		res.Identity.Kind = IdentityKind(ido.field("kind").str())
		switch res.Identity.Kind {
		case IdentityPlanned, IdentityCreating:
			ido.only("kind")
		case IdentityIdentified:
			ido.only("kind", "id", "fingerprint")
			res.Identity.ID = ido.field("id").str()
			res.Identity.Fingerprint = ido.field("fingerprint").str()
		}
		r.Resources = append(r.Resources, res)
	}
	var semantic issueList
	r.check(&semantic)
	l.merge(&semantic)
	if err := l.err(); err != nil {
		return RecoveryRecord{}, err
	}
	return r, nil
}

// Validate checks every invariant of the contract's recovery record: its compact
// JSON encoding is at most MaxRecoveryBytes bytes (checked first, alone);
// format is RecoveryFormat; backendId, backendRevision, operationId,
// sandboxId, resource names and identified IDs are identities (namespace
// at most MaxNamespaceBytes); the three digests and fingerprints satisfy
// ValidDigest; phase and roles are known; authority is unverified or
// verified with an identity; 1..4 resources with unique roles and unique
// names (reported at the later duplicate's "resources.N.role" or
// "resources.N.name"); planned and creating identities carry no ID or
// fingerprint; and an unverified authority only in phase reserved with every
// resource planned (reported at "authority").
func (r RecoveryRecord) Validate() error {
	data, err := marshalCompact(r)
	if err != nil {
		return rootIssue("recovery record cannot be encoded: %v", err)
	}
	if len(data) > MaxRecoveryBytes {
		return rootIssue("recovery record is %d bytes, more than %d", len(data), MaxRecoveryBytes)
	}
	var l issueList
	r.check(&l)
	return l.err()
}

var phases = []Phase{PhaseReserved, PhaseStarting, PhaseRunning, PhaseStopping, PhaseStopped, PhaseDestroying, PhaseDestroyed, PhaseUncertain}

var roles = []Role{RoleCompute, RoleStorage, RoleExport, RoleNetwork}

// check adds r's issues to l, field by field in the record's order: the
// format and identities, the digests, the phase, the authority, then the
// resources (checkResource) and the authority they require.
func (r RecoveryRecord) check(l *issueList) {
	if r.Format != RecoveryFormat {
		l.add([]string{"format"}, "must be %q", RecoveryFormat)
	}
	l.identity([]string{"backendId"}, r.BackendID, MaxIdentityBytes)
	l.identity([]string{"backendRevision"}, r.BackendRevision, MaxIdentityBytes)
	l.identity([]string{"namespace"}, string(r.Namespace), MaxNamespaceBytes)
	l.identity([]string{"operationId"}, r.OperationID, MaxIdentityBytes)
	l.identity([]string{"sandboxId"}, string(r.SandboxID), MaxIdentityBytes)
	for _, d := range []struct {
		name, v string
	}{{"imageDigest", r.ImageDigest}, {"policyDigest", r.PolicyDigest}, {"configurationDigest", r.ConfigurationDigest}} {
		if !ValidDigest(d.v) {
			l.add([]string{d.name}, "must match ^sha256:[a-f0-9]{64}$")
		}
	}
	if !slices.Contains(phases, r.Phase) {
		l.add([]string{"phase"}, "must be one of %v", phases)
	}
	r.Authority.check(l)
	if len(r.Resources) < 1 || len(r.Resources) > 4 {
		l.add([]string{"resources"}, "must hold 1 to 4 resources, got %d", len(r.Resources))
	}
	allPlanned := true
	for i, res := range r.Resources {
		res.check(l, i, r.Resources[:i])
		if res.Identity.Kind != IdentityPlanned {
			allPlanned = false
		}
	}
	if r.Authority.Kind == AuthorityUnverified && (r.Phase != PhaseReserved || !allPlanned) {
		l.add([]string{"authority"}, "entered resource operations require verified backend authority: unverified is only allowed in phase reserved with every resource planned")
	}
}

// check adds the authority's issues to l: a known kind, and a backend
// identity exactly when verified.
func (a Authority) check(l *issueList) {
	switch a.Kind {
	case AuthorityUnverified:
		if a.BackendIdentity != "" {
			l.add([]string{"authority", "backendIdentity"}, "not allowed when kind is %q", AuthorityUnverified)
		}
	case AuthorityVerified:
		l.identity([]string{"authority", "backendIdentity"}, a.BackendIdentity, MaxIdentityBytes)
	default:
		l.add([]string{"authority", "kind"}, "must be %q or %q", AuthorityUnverified, AuthorityVerified)
	}
}

// check adds the issues of resource i to l: a known role and a valid
// name, neither shared with an earlier resource, and its identity
// (ResourceIdentity.check).
func (res RecoveryResource) check(l *issueList, i int, earlier []RecoveryResource) {
	path := []string{"resources", itoa(i)}
	if !slices.Contains(roles, res.Role) {
		l.add(at(path, "role"), "must be one of %v", roles)
	} else if slices.ContainsFunc(earlier, func(o RecoveryResource) bool { return o.Role == res.Role }) {
		l.add(at(path, "role"), "duplicate role %q", res.Role)
	}
	if !ValidIdentity(res.Name, MaxIdentityBytes) {
		l.identity(at(path, "name"), res.Name, MaxIdentityBytes)
	} else if slices.ContainsFunc(earlier, func(o RecoveryResource) bool { return o.Name == res.Name }) {
		l.add(at(path, "name"), "duplicate name %s", quote(res.Name))
	}
	res.Identity.check(l, at(path, "identity"))
}

// check adds the identity's issues at ipath to l: no ID or fingerprint
// while planned or creating, both once identified, a known kind.
func (id ResourceIdentity) check(l *issueList, ipath []string) {
	switch id.Kind {
	case IdentityPlanned, IdentityCreating:
		if id.ID != "" {
			l.add(at(ipath, "id"), "not allowed when kind is %q", id.Kind)
		}
		if id.Fingerprint != "" {
			l.add(at(ipath, "fingerprint"), "not allowed when kind is %q", id.Kind)
		}
	case IdentityIdentified:
		l.identity(at(ipath, "id"), id.ID, MaxIdentityBytes)
		if !ValidDigest(id.Fingerprint) {
			l.add(at(ipath, "fingerprint"), "must match ^sha256:[a-f0-9]{64}$")
		}
	default:
		l.add(at(ipath, "kind"), "must be %q, %q or %q", IdentityPlanned, IdentityCreating, IdentityIdentified)
	}
}

// Clone returns a deep copy of r; the copy shares no slice with r.
func (r RecoveryRecord) Clone() RecoveryRecord {
	r.Resources = slices.Clone(r.Resources)
	return r
}
