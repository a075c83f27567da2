package driver

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/gowebpki/jcs"

	"github.com/qualbox/qualbox/sandboxapi"
)

// BackendID is this backend's identity in Support and recovery records.
const BackendID = "qualbox-docker"

// Label keys binding a resource to its recovery record, under qualbox's own
// prefix (docs/contract.md#recovery).
const (
	labelRecord        = "dev.qualbox.sandbox.record"
	labelRole          = "dev.qualbox.sandbox.role"
	labelNamespace     = "dev.qualbox.sandbox.namespace"
	labelOperation     = "dev.qualbox.sandbox.operation"
	labelBackend       = "dev.qualbox.sandbox.backend"
	labelRevision      = "dev.qualbox.sandbox.revision"
	labelImage         = "dev.qualbox.sandbox.image"
	labelConfiguration = "dev.qualbox.sandbox.configuration"
	labelPolicy        = "dev.qualbox.sandbox.policy"
)

// digest returns "sha256:<hex>" of value's RFC 8785 canonical JSON, so the
// digest is stable across Go versions, field order and other languages.
func digest(value any) (string, error) {
	raw, err := json.Marshal(value)
	if err != nil {
		return "", err
	}
	canonical, err := jcs.Transform(raw)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canonical)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

func mustDigest(value any) string {
	d, err := digest(value)
	if err != nil {
		panic(fmt.Sprintf("qualbox: digest of a value built by the driver failed: %v", err))
	}
	return d
}

// resourceName derives the Engine name of one role's resource from a hash of
// namespace and operation ID, so names never carry caller text.
func resourceName(namespace sandboxapi.Namespace, operationID string, role sandboxapi.Role) string {
	sum := sha256.Sum256([]byte(string(namespace) + "\x00" + operationID))
	return "qualbox-" + hex.EncodeToString(sum[:])[:32] + "-" + string(role)
}

// configurationDigest binds the exact backend configuration: profile, user,
// workload image and sorted datasets (docs/contract.md#recovery).
func configurationDigest(cfg *Config) string {
	datasets := append([]Dataset(nil), cfg.Datasets...)
	sort.Slice(datasets, func(i, j int) bool { return datasets[i].Name < datasets[j].Name })
	if datasets == nil {
		datasets = []Dataset{}
	}
	return mustDigest(struct {
		Profile     string    `json:"profile"`
		User        User      `json:"user"`
		ImageDigest string    `json:"imageDigest"`
		Datasets    []Dataset `json:"datasets"`
	}{cfg.Profile, cfg.User, cfg.ImageID, datasets})
}

// newOperationID returns a random RFC 4122 version 4 UUID.
func newOperationID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// newRecoveryRecord builds the reserved record of a new sandbox: every
// resource planned, authority unverified.
func newRecoveryRecord(cfg *Config, ns sandboxapi.Namespace, revision string, policy sandboxapi.Policy) sandboxapi.RecoveryRecord {
	op := newOperationID()
	roles := []sandboxapi.Role{sandboxapi.RoleCompute, sandboxapi.RoleStorage, sandboxapi.RoleExport}
	if policy.Network.Kind == sandboxapi.NetworkOutbound {
		roles = append(roles, sandboxapi.RoleNetwork)
	}
	resources := make([]sandboxapi.RecoveryResource, 0, len(roles))
	for _, role := range roles {
		resources = append(resources, sandboxapi.RecoveryResource{
			Role:     role,
			Name:     resourceName(ns, op, role),
			Identity: sandboxapi.ResourceIdentity{Kind: sandboxapi.IdentityPlanned},
		})
	}
	return sandboxapi.RecoveryRecord{
		Format:              sandboxapi.RecoveryFormat,
		BackendID:           BackendID,
		BackendRevision:     revision,
		Namespace:           ns,
		OperationID:         op,
		SandboxID:           sandboxapi.SandboxID("docker-" + op),
		ImageDigest:         cfg.ImageID,
		PolicyDigest:        mustDigest(policy),
		ConfigurationDigest: configurationDigest(cfg),
		Phase:               sandboxapi.PhaseReserved,
		Authority:           sandboxapi.Authority{Kind: sandboxapi.AuthorityUnverified},
		Resources:           resources,
	}
}

// recordBinding digests the immutable part of a record: everything except
// phase, authority and resource identities, which change as work proceeds.
func recordBinding(r sandboxapi.RecoveryRecord) string {
	type roleName struct {
		Role sandboxapi.Role `json:"role"`
		Name string          `json:"name"`
	}
	names := make([]roleName, 0, len(r.Resources))
	for _, res := range r.Resources {
		names = append(names, roleName{res.Role, res.Name})
	}
	return mustDigest(map[string]any{
		"format":              r.Format,
		"backendId":           r.BackendID,
		"backendRevision":     r.BackendRevision,
		"namespace":           r.Namespace,
		"operationId":         r.OperationID,
		"sandboxId":           r.SandboxID,
		"imageDigest":         r.ImageDigest,
		"configurationDigest": r.ConfigurationDigest,
		"policyDigest":        r.PolicyDigest,
		"resources":           names,
	})
}

// resourceLabels returns the labels that bind a resource of role to the
// whole original record.
func resourceLabels(r sandboxapi.RecoveryRecord, role sandboxapi.Role) map[string]string {
	return map[string]string{
		labelRecord:        recordBinding(r),
		labelRole:          string(role),
		labelNamespace:     string(r.Namespace),
		labelOperation:     r.OperationID,
		labelBackend:       r.BackendID,
		labelRevision:      r.BackendRevision,
		labelImage:         r.ImageDigest,
		labelConfiguration: r.ConfigurationDigest,
		labelPolicy:        r.PolicyDigest,
	}
}

// labelMismatch returns the label keys whose values differ from the record's
// binding, or nil when every binding label matches.
func labelMismatch(actual map[string]string, r sandboxapi.RecoveryRecord, role sandboxapi.Role) []string {
	var bad []string
	for k, v := range resourceLabels(r, role) {
		if actual[k] != v {
			bad = append(bad, k)
		}
	}
	sort.Strings(bad)
	return bad
}
