package main

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"slices"
	"strings"

	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/evidence"
	"github.com/qualbox/qualbox/qualify/manifest"
	"github.com/qualbox/qualbox/qualify/scenario"
)

// listFlag collects a repeated or comma-separated flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

func loadKeys(paths []string) ([]ed25519.PublicKey, error) {
	var keys []ed25519.PublicKey
	for _, p := range paths {
		k, err := attest.LoadPublicKey(p)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// verifyAny verifies dir against each key in turn and returns the first
// success, or the failure against the first key.
func verifyAny(ctx context.Context, dir string, keys []ed25519.PublicKey) (*evidence.Signed, error) {
	// The report is judged by the key that signed it: a key whose
	// signature does not verify only says "not mine", so its error is
	// reported only when no key's signature verifies.
	var first error
	for _, k := range keys {
		s, err := evidence.VerifyRun(ctx, dir, k)
		if err == nil {
			return s, nil
		}
		if !evidence.NotSignedBy(err) {
			return nil, err
		}
		if first == nil {
			first = err
		}
	}
	return nil, first
}

// trustOf loads the policy at path and returns its trust entries,
// narrowed to keyPaths when any are given: each must be a key the policy
// trusts, else the error names it (--key never widens a policy's trust).
func trustOf(path string, keyPaths []string) (*evidence.LoadedPolicy, []evidence.TrustEntry, error) {
	p, err := evidence.LoadPolicy(path, gateScenarios)
	if err != nil {
		return nil, nil, err
	}
	if len(keyPaths) == 0 {
		return p, p.Trust, nil
	}
	var trust []evidence.TrustEntry
	for _, kp := range keyPaths {
		k, err := attest.LoadPublicKey(kp)
		if err != nil {
			return nil, nil, err
		}
		id := attest.KeyID(k)
		i := slices.IndexFunc(p.Trust, func(e evidence.TrustEntry) bool { return e.KeyID == id })
		if i < 0 {
			return nil, nil, fmt.Errorf("--key %s: key ID %s is not trusted by gate policy %s: with --policy, --key may only narrow the policy's trust entries", kp, id, path)
		}
		if !slices.ContainsFunc(trust, func(e evidence.TrustEntry) bool { return e.KeyID == id }) {
			trust = append(trust, p.Trust[i])
		}
	}
	return p, trust, nil
}

// gateScenarios validates the scenarios of the manifests a gate pins
// (--policy, --manifest): this build's catalogue. Tests substitute a
// registry of synthetic scenarios.
var gateScenarios manifest.Validator = scenario.Default()
