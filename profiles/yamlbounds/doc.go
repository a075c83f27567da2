// Package yamlbounds checks a parsed YAML document against size bounds
// before any value is decoded: go.yaml.in/yaml/v3 bounds alias expansion
// only by a ratio and nesting only at 10,000 levels, while profiles and
// manifests are documents a change or a pull request can make hostile
// (docs/untrusted-inputs.md). It is the one walker both parsers share;
// Check returns the first bound crossed (a Crossed naming it and its line),
// or nil.
//
// It lives under profiles and is held to its rule: no Engine client, no
// sandboxapi, driver, qualify, testbed or cmd (docs/architecture.md;
// internal/depcheck).
package yamlbounds
