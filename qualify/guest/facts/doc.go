// Package facts defines the JSON the qualbox guest probe prints (the workload
// isolation profile as the kernel sees it;
// docs/contract.md#profiles-and-admission) and parses the kernel files the probe
// reads: /proc/self/status, /proc/self/mountinfo and the cgroup v1/v2 interface
// files.
//
// The parsers are pure functions over recorded bytes so that the host-side
// harness, the probe and the tests share them. Decode reads the probe's
// output strictly, at most MaxFactsBytes (1 MiB), and reports what is wrong
// as a *DecodeError (docs/untrusted-inputs.md#from-the-guest).
//
// The probe is built from it for the guest, so it imports no other package
// of this module; as an instrument it must never import the driver, the
// rest of qualify or cmd (docs/architecture.md;
// internal/depcheck.Instruments).
package facts
