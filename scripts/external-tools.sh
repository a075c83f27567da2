#!/usr/bin/env bash
# Builds the independent attestation verifiers from the Go module proxy,
# at exact versions, into a cache keyed by version, and prints the
# directory holding both (docs/qualification.md#standard-attestations):
#   DIR/cosign         github.com/sigstore/cosign/v2/cmd/cosign@COSIGN_VERSION
#   DIR/slsa-verifier  github.com/slsa-framework/slsa-verifier/v2/cli/slsa-verifier@SLSA_VERIFIER_VERSION
# A tool already in the cache is not rebuilt. A cold build of both takes
# about 19 minutes on two shared cores (cosign 754 s, slsa-verifier 378 s
# after it), hence its own make target, verify-external.
# slsa-verifier is built from a throw-away module requiring it: `go install
# pkg@version` reads the module's version list for deprecations, which the
# proxy refuses for it; an exact require needs no list.
set -euo pipefail
cache=${TOOLS_CACHE:-/var/cache/qualbox/tools}
cosign_version=${COSIGN_VERSION:-v2.5.0}
slsa_version=${SLSA_VERIFIER_VERSION:-v2.7.1}
export PATH=/usr/local/go/bin:$PATH
bin=$cache/bin-cosign-$cosign_version-slsa-verifier-$slsa_version
mkdir -p "$bin"
if [ ! -x "$cache/cosign-$cosign_version/cosign" ]; then
	echo "external-tools: building cosign $cosign_version" >&2
	GOBIN=$cache/cosign-$cosign_version go install "github.com/sigstore/cosign/v2/cmd/cosign@$cosign_version" >&2
fi
if [ ! -x "$cache/slsa-verifier-$slsa_version/slsa-verifier" ]; then
	echo "external-tools: building slsa-verifier $slsa_version" >&2
	mod=$(mktemp -d)
	trap 'rm -rf "$mod"' EXIT
	printf 'module qualbox.invalid/tools\n\ngo 1.26\n\nrequire github.com/slsa-framework/slsa-verifier/v2 %s\n' "$slsa_version" >"$mod/go.mod"
	printf '//go:build tools\n\npackage tools\n\nimport _ "github.com/slsa-framework/slsa-verifier/v2/cli/slsa-verifier"\n' >"$mod/tools.go"
	(cd "$mod" && go mod tidy >&2 && go build -o "$cache/slsa-verifier-$slsa_version/slsa-verifier" github.com/slsa-framework/slsa-verifier/v2/cli/slsa-verifier >&2)
fi
ln -sfn "$cache/cosign-$cosign_version/cosign" "$bin/cosign"
ln -sfn "$cache/slsa-verifier-$slsa_version/slsa-verifier" "$bin/slsa-verifier"
echo "$bin"
