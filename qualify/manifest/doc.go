// Package manifest reads qualification manifests: strict YAML documents
// that name the platform profile, the Engine endpoint, the guest image,
// the workload user, a namespace prefix, the output directory, the sandbox
// policy and the scenarios to run with their parameters
// (docs/qualification.md#scenarios).
//
// Every problem is reported with the file, the field path, the line and,
// for closed choices, the allowed values: an *Error with one Issue each,
// or a *LimitError for a document beyond a size bound (bytes, depth,
// nodes, scalar bytes; docs/untrusted-inputs.md). Scenario names and
// parameters are checked by a Validator, the scenario catalogue, which
// this package does not import.
//
// It is part of the harness and must not import cmd
// (docs/architecture.md; internal/depcheck).
package manifest
