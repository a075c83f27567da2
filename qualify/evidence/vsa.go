package evidence

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	vsav1 "github.com/in-toto/attestation/go/predicates/vsa/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/qualbox/qualbox/qualify/attest"
)

// VSAPredicateType is the SLSA Verification Summary Attestation predicate
// type that qualify merge --vsa writes (docs/qualification.md#standard-attestations).
const VSAPredicateType = "https://slsa.dev/verification_summary/v1"

// VSAInput is what a Verification Summary names besides the gate's result.
type VSAInput struct {
	// VerifierID is the verifier's URI (verifier.id).
	VerifierID string
	// PolicyURI names the gate policy; PolicySHA256 is the hex SHA-256 of
	// the policy file's bytes as the gate read them.
	PolicyURI, PolicySHA256 string
	// ResourceURI names what was qualified (resourceUri).
	ResourceURI string
	// TimeVerified is when the gate ran (UTC, second precision kept).
	TimeVerified time.Time
}

// VSASubjects names what a gate qualified: for each admitted report, the
// harness build that ran it (its module as name, its VCS revision as
// gitCommit; a build without a revision is named but has no digest and is
// left out) and its scenario catalogue (sha256), and the Engine tuple it
// ran against (named "engine:" plus the tuple label, with the sha256 of
// the tuple's JSON as it appears in the signed evidence). Duplicates are
// listed once, in a stable order.
func VSASubjects(reports []*Signed) ([]*intoto.ResourceDescriptor, error) {
	seen := map[string]bool{}
	var out []*intoto.ResourceDescriptor
	add := func(name, alg, digest string) {
		if k := name + "\x00" + alg + ":" + digest; !seen[k] {
			seen[k] = true
			out = append(out, &intoto.ResourceDescriptor{Name: name, Digest: map[string]string{alg: digest}})
		}
	}
	for _, s := range reports {
		if h := s.Run.Harness; h != nil {
			if h.VCSRevision != "" {
				add(h.Module, "gitCommit", h.VCSRevision)
			}
			add(fmt.Sprintf("scenario-catalogue:v%d", h.CatalogueVersion), "sha256", h.CatalogueSHA256)
		}
		data, err := json.Marshal(s.Run.Tuple)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(data)
		add("engine:"+s.Run.Tuple.Label(), "sha256", hex.EncodeToString(sum[:]))
	}
	slices.SortStableFunc(out, func(a, b *intoto.ResourceDescriptor) int { return strings.Compare(a.Name, b.Name) })
	if len(out) == 0 {
		return nil, fmt.Errorf("evidence: verification summary: no admitted report names anything qualified")
	}
	return out, nil
}

// VSAOf is the Verification Summary of gate g over the admitted reports
// (VSASubjects): verificationResult PASSED or FAILED as the gate, the
// policy by URI and digest, each admitted report's EnvelopeFile (and
// TestResultFile when it has one) as an input attestation by sha256, and
// verifiedLevels "QUALBOX_ROW_<ROW>" for each passed row (upper case,
// '-' as '_'); no SLSA_* level, since a qualification checks no build
// provenance. The input attestations are named by the digests VerifyRun
// verified (Signed.Attestations), not hashed again from disk.
func VSAOf(g *GateResult, reports []*Signed, in VSAInput) (*intoto.Statement, error) {
	subjects, err := VSASubjects(reports)
	if err != nil {
		return nil, err
	}
	p := &vsav1.VerificationSummary{
		Verifier:           &vsav1.VerificationSummary_Verifier{Id: in.VerifierID},
		TimeVerified:       timestamppb.New(in.TimeVerified.UTC().Truncate(time.Second)),
		ResourceUri:        in.ResourceURI,
		Policy:             &vsav1.VerificationSummary_Policy{Uri: in.PolicyURI, Digest: map[string]string{"sha256": in.PolicySHA256}},
		VerificationResult: "FAILED",
	}
	if g.Passed {
		p.VerificationResult = "PASSED"
		for _, c := range g.Columns {
			if c.Kind == KindRow && c.State == StatePassed {
				p.VerifiedLevels = append(p.VerifiedLevels, "QUALBOX_ROW_"+strings.ToUpper(strings.ReplaceAll(c.Name, "-", "_")))
			}
		}
	}
	for _, s := range reports {
		for _, f := range []string{attest.EnvelopeFile, TestResultFile} {
			sum, ok := s.Attestations[f]
			if !ok && f == TestResultFile {
				continue
			}
			if sum == "" {
				return nil, fmt.Errorf("evidence: verification summary: %s of %s has no verified digest", f, s.Dir)
			}
			p.InputAttestations = append(p.InputAttestations, &vsav1.VerificationSummary_InputAttestation{
				Uri: filepath.ToSlash(filepath.Join(s.Dir, f)), Digest: map[string]string{"sha256": sum}})
		}
	}
	pred, err := toStruct(p)
	if err != nil {
		return nil, err
	}
	st := &intoto.Statement{Type: intoto.StatementTypeUri, Subject: subjects, PredicateType: VSAPredicateType, Predicate: pred}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("evidence: verification summary: %w", err)
	}
	return st, nil
}
