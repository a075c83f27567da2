// Package profiles holds qualbox's platform profiles as data.
//
// A profile is a closed, explicit composition of controller, Docker Engine
// daemon, guest image, cgroup, AppArmor and seccomp expectations that the
// driver's admission and the qualification harness check against a real
// Engine (docs/contract.md#profiles-and-admission). It holds the reference
// profiles (linux-x64 and the Docker Desktop ones) and adds profiles for
// hosts qualbox qualifies itself (docs/qualification.md#profiles).
//
// Each profile is one YAML document in profiles/<name>.yaml, embedded in the
// binary, decoded strictly (unknown, missing or mistyped fields are errors
// that name the file and the field path) and validated. Nothing here detects
// or picks a profile: callers name one explicitly. A name with no embedded
// document is an *UnknownProfileError, a document that cannot be decoded or
// does not validate an *InvalidProfileError (one issue per field path), and
// one beyond a size bound (bytes, depth, nodes, scalar bytes) a *LimitError.
//
// It sits at the bottom of the layering (docs/architecture.md): it must not
// import the Engine client, sandboxapi, the driver, qualify, testbed, cmd
// or the platform registry that names profiles (internal/depcheck).
package profiles
