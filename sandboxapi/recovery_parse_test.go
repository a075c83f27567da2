package sandboxapi

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
)

var (
	digestA = "sha256:" + strings.Repeat("a", 64)
	digestB = "sha256:" + strings.Repeat("b", 64)
)

func validRecord() RecoveryRecord {
	return RecoveryRecord{
		Format: RecoveryFormat, BackendID: "docker", BackendRevision: "qualbox-1", Namespace: "ns",
		OperationID: "op-1", SandboxID: "sb-1", ImageDigest: digestA, PolicyDigest: digestA, ConfigurationDigest: digestB,
		Phase:     PhaseRunning,
		Authority: Authority{Kind: AuthorityVerified, BackendIdentity: "engine-1"},
		Resources: []RecoveryResource{
			{Role: RoleCompute, Name: "c-1", Identity: ResourceIdentity{Kind: IdentityIdentified, ID: "abc", Fingerprint: digestB}},
			{Role: RoleStorage, Name: "v-1", Identity: ResourceIdentity{Kind: IdentityCreating}},
			{Role: RoleExport, Name: "e-1", Identity: ResourceIdentity{Kind: IdentityPlanned}},
		},
	}
}

// The contract's JSON shape: planned/creating identities and an unverified
// authority carry nothing but their kind.
const validRecordJSON = `{"format":"agenai.sandbox-recovery.v2","backendId":"docker","backendRevision":"qualbox-1",` +
	`"namespace":"ns","operationId":"op-1","sandboxId":"sb-1",` +
	`"imageDigest":"sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",` +
	`"policyDigest":"sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",` +
	`"configurationDigest":"sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",` +
	`"phase":"running","authority":{"kind":"verified","backendIdentity":"engine-1"},"resources":[` +
	`{"role":"compute","name":"c-1","identity":{"kind":"identified","id":"abc","fingerprint":"sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}},` +
	`{"role":"storage","name":"v-1","identity":{"kind":"creating"}},` +
	`{"role":"export","name":"e-1","identity":{"kind":"planned"}}]}`

func TestRecoveryRecordJSONShape(t *testing.T) {
	data, err := json.Marshal(validRecord())
	assert.NilError(t, err)
	assert.Equal(t, string(data), validRecordJSON)

	got, err := ParseRecoveryRecord(data)
	assert.NilError(t, err)
	assert.DeepEqual(t, got, validRecord())
	assert.NilError(t, got.Validate())

	reserved := validRecord()
	reserved.Phase = PhaseReserved
	reserved.Authority = Authority{Kind: AuthorityUnverified}
	reserved.Resources = []RecoveryResource{{Role: RoleCompute, Name: "c-1", Identity: ResourceIdentity{Kind: IdentityPlanned}}}
	data, err = json.Marshal(reserved)
	assert.NilError(t, err)
	assert.Assert(t, strings.Contains(string(data), `"authority":{"kind":"unverified"},"resources":[{"role":"compute","name":"c-1","identity":{"kind":"planned"}}]}`), string(data))
	got, err = ParseRecoveryRecord(data)
	assert.NilError(t, err)
	assert.DeepEqual(t, got, reserved)
}

func TestParseRecoveryRecordIssues(t *testing.T) {
	tests := []struct {
		name  string
		path  string
		value any
		want  []string
	}{
		{"unknown field", "owner", "me", []string{"owner"}},
		{"format", "format", "agenai.sandbox-recovery.v1", []string{"format"}},
		{"missing backendId", "backendId", del{}, []string{"backendId"}},
		{"separator in namespace", "namespace", "a/b", []string{"namespace"}},
		{"space in operationId", "operationId", "op 1", []string{"operationId"}},
		{"NUL in sandboxId", "sandboxId", "sb\x00", []string{"sandboxId"}},
		{"long namespace", "namespace", strings.Repeat("n", MaxNamespaceBytes+1), []string{"namespace"}},
		{"uppercase digest", "imageDigest", "sha256:" + strings.Repeat("A", 64), []string{"imageDigest"}},
		{"short digest", "policyDigest", "sha256:abc", []string{"policyDigest"}},
		{"digest number", "configurationDigest", 1, []string{"configurationDigest"}},
		{"phase", "phase", "paused", []string{"phase"}},
		{"authority kind", "authority.kind", "trusted", []string{"authority.kind"}},
		{"authority extra", "authority.note", "x", []string{"authority.note"}},
		{"verified without identity", "authority", raw(`{"kind":"verified"}`), []string{"authority.backendIdentity"}},
		{"unverified with identity", "authority", raw(`{"kind":"unverified","backendIdentity":"e"}`), []string{"authority.backendIdentity", "authority"}},
		{"unverified while running", "authority", raw(`{"kind":"unverified"}`), []string{"authority"}},
		{"no resources", "resources", raw(`[]`), []string{"resources"}},
		{"resources object", "resources", raw(`{}`), []string{"resources"}},
		{"bad role", "resources.1.role", "gpu", []string{"resources.1.role"}},
		{"duplicate role", "resources.2.role", "compute", []string{"resources.2.role"}},
		{"duplicate name", "resources.1.name", "c-1", []string{"resources.1.name"}},
		{"name separator", "resources.0.name", `c\1`, []string{"resources.0.name"}},
		{"identity kind", "resources.1.identity.kind", "gone", []string{"resources.1.identity.kind"}},
		{"identity missing kind", "resources.1.identity", raw(`{}`), []string{"resources.1.identity.kind"}},
		{"planned with id", "resources.2.identity", raw(`{"kind":"planned","id":"x"}`), []string{"resources.2.identity.id"}},
		{"identified bad fingerprint", "resources.0.identity.fingerprint", "sha256:x", []string{"resources.0.identity.fingerprint"}},
		{"identified bad id", "resources.0.identity.id", "a b", []string{"resources.0.identity.id"}},
		{"resource extra", "resources.0.extra", 1, []string{"resources.0.extra"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRecoveryRecord(mutate(t, validRecordJSON, tc.path, tc.value))
			assertPaths(t, err, tc.want...)
		})
	}
}

func TestRecoveryRecordInvariants(t *testing.T) {
	five := validRecord()
	five.Resources = append(five.Resources,
		RecoveryResource{Role: RoleNetwork, Name: "n-1", Identity: ResourceIdentity{Kind: IdentityPlanned}},
		RecoveryResource{Role: RoleNetwork, Name: "n-2", Identity: ResourceIdentity{Kind: IdentityPlanned}})
	assertPaths(t, five.Validate(), "resources", "resources.4.role")

	unverified := validRecord()
	unverified.Authority = Authority{Kind: AuthorityUnverified}
	unverified.Phase = PhaseReserved
	assertPaths(t, unverified.Validate(), "authority") // created resources
	for i := range unverified.Resources {
		unverified.Resources[i].Identity = ResourceIdentity{Kind: IdentityPlanned}
	}
	assert.NilError(t, unverified.Validate())
	unverified.Phase = PhaseStarting
	assertPaths(t, unverified.Validate(), "authority")

	creating := validRecord()
	creating.Resources[1].Identity.Fingerprint = digestA
	assertPaths(t, creating.Validate(), "resources.1.identity.fingerprint")
}

func TestRecoveryRecordSize(t *testing.T) {
	over := validRecord()
	over.BackendID = strings.Repeat("x", MaxRecoveryBytes)
	assertPaths(t, over.Validate(), "(root)")
	data, err := json.Marshal(over)
	assert.NilError(t, err)
	_, err = ParseRecoveryRecord(data)
	assertPaths(t, err, "(root)")

	// Whitespace does not count towards the bound.
	padded := []byte(strings.Replace(validRecordJSON, ",", ","+strings.Repeat(" ", 1000), 30))
	assert.Assert(t, len(padded) > MaxRecoveryBytes)
	_, err = ParseRecoveryRecord(padded)
	assert.NilError(t, err)
}

func TestRecoveryRecordClone(t *testing.T) {
	r := validRecord()
	c := r.Clone()
	assert.DeepEqual(t, c, r)
	c.Resources[0].Name = "changed"
	assert.Equal(t, r.Resources[0].Name, "c-1")
}

func TestRecoveryPolicyKind(t *testing.T) {
	assert.Equal(t, InProcess().Kind(), "in_process")
	assert.Equal(t, Persisted(func(context.Context, RecoveryRecord) error { return nil }).Kind(), "persisted")
}
