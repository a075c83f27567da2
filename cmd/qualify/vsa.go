package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"time"

	"github.com/qualbox/qualbox/qualify"
	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/evidence"
)

// DefaultVerifierID is merge's verifier.id in a Verification Summary
// unless --vsa-verifier-id names another.
const DefaultVerifierID = "https://github.com/qualbox/qualbox/cmd/qualify/merge"

// vsaFlags are merge's Verification Summary options
// (docs/qualification.md#standard-attestations).
type vsaFlags struct {
	out, key, verifierID, resourceURI, policyURI string
}

func (v *vsaFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&v.out, "vsa", "", "with --policy, write a signed SLSA Verification Summary (DSSE envelope) of the gate to `FILE`, passed or failed")
	fs.StringVar(&v.key, "vsa-key", "", "ed25519 private key `FILE` (PEM PKCS#8, from keygen) signing --vsa")
	fs.StringVar(&v.verifierID, "vsa-verifier-id", DefaultVerifierID, "verifier.id `URI` of --vsa")
	fs.StringVar(&v.resourceURI, "vsa-resource-uri", "pkg:golang/"+qualify.HarnessIdentity().Module, "resourceUri `URI` of --vsa: what was qualified")
	fs.StringVar(&v.policyURI, "vsa-policy-uri", "", "policy.uri `URI` of --vsa (default the --policy path as given)")
}

// problem says what is wrong with the flags given, or "".
func (v *vsaFlags) problem(policyPath string) string {
	switch {
	case v.out == "" && v.key != "":
		return "--vsa-key needs --vsa FILE"
	case v.out == "":
		return ""
	case policyPath == "":
		return "--vsa needs --policy FILE: a Verification Summary names the policy it verified against"
	case v.key == "":
		return "--vsa needs --vsa-key FILE"
	}
	return ""
}

// write signs the Verification Summary of g over reports and writes it to
// v.out (refusing to overwrite a file). policySHA256 is the hex digest of
// the policy bytes the gate was judged by.
func (v *vsaFlags) write(ctx context.Context, policyPath, policySHA256 string, g *evidence.GateResult, reports []*evidence.Signed) error {
	if policySHA256 == "" {
		return fmt.Errorf("--vsa: no digest of the policy %s was recorded when it was loaded", policyPath)
	}
	key, err := attest.LoadPrivateKey(v.key)
	if err != nil {
		return err
	}
	uri := v.policyURI
	if uri == "" {
		uri = filepath.ToSlash(policyPath)
	}
	st, err := evidence.VSAOf(g, reports, evidence.VSAInput{VerifierID: v.verifierID, PolicyURI: uri,
		PolicySHA256: policySHA256, ResourceURI: v.resourceURI, TimeVerified: time.Now()})
	if err != nil {
		return err
	}
	payload, err := evidence.StatementJSON(st)
	if err != nil {
		return err
	}
	env, err := attest.SignPayload(ctx, key, payload)
	if err != nil {
		return err
	}
	if err := writeNewFile(v.out, env, 0o644); err != nil {
		return fmt.Errorf("--vsa: %w", err)
	}
	return nil
}
