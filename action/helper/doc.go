// Command helper is the part of the qualbox GitHub Action (action.yml,
// action/run.sh) that is easier to get right in Go than in shell. It is
// built from the action's own source next to qualify and is not a
// qualbox interface of its own.
//
// Usage:
//
//	helper pubkey SIGNING_KEY OUT [PUBLIC_KEY]
//	helper verdict DIR LABEL VERIFY_STATUS
//
// pubkey loads the ed25519 PKCS#8 PEM private key SIGNING_KEY and writes
// its public half (PEM PKIX) to the fresh file OUT. When PUBLIC_KEY is
// given, OUT is a byte copy of it, after checking that it is exactly the
// public half of SIGNING_KEY: a mismatch exits 2 naming both key IDs, so
// a run is never signed with a key its verify step cannot trust.
//
// verdict prints two lines: the verdict word of the action's verdict
// output (passed, failed, flaky, unverified or no-report) and the step
// summary's first line, e.g.
//
//	qualbox: PASSED linux-x64-cgroupv1 (16 passed, 1 not_applicable)
//
// from DIR/evidence.json, which the action reads only after `qualify
// verify` (whose exit status is VERIFY_STATUS) checked it; with a
// non-zero VERIFY_STATUS, or without a report, the line says UNVERIFIED
// or NO REPORT for LABEL (the manifest path) and never the report's own
// verdict.
// Exit status: 0, or 2 for bad arguments or keys.
package main
