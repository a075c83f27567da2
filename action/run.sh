#!/usr/bin/env bash
# The qualbox GitHub Action's work (action.yml; README.md "Use it in your
# CI"): everything but the artifact upload and the JUnit publication,
# which are GitHub actions of their own. It runs outside GitHub too, given
# the runner's environment: GITHUB_ACTION_PATH (the action's source, from
# which qualify is built), GITHUB_WORKSPACE (the caller's checkout),
# RUNNER_TEMP, GITHUB_OUTPUT and GITHUB_STEP_SUMMARY.
#
# Inputs (environment): QUALBOX_MANIFEST (path in GITHUB_WORKSPACE,
# required), QUALBOX_SIGNING_KEY (PEM PKCS#8 ed25519 private key, required),
# QUALBOX_PUBLIC_KEY (PEM public key, optional: verify uses it, and one that
# is not the signing key's public half fails before the run),
# QUALBOX_ENDPOINT (optional, qualify run --endpoint), QUALBOX_OUTPUT (fresh
# report directory, default $RUNNER_TEMP/qualbox-report).
#
# Outputs ($GITHUB_OUTPUT): verdict (passed, failed, flaky, unverified,
# no-report or error), report-dir (the report; its public key is
# report-dir + ".pub") and exit-code. The step summary starts with one
# verdict line, then the report's summary.md. The script exits with
# qualify run's status (internal/exitcode), or verify's when the run
# passed and verify did not; an error of its own before the run is 2 for
# bad inputs and 4 otherwise.
set -euo pipefail

: "${GITHUB_ACTION_PATH:?not set: the source directory of the action}"
: "${GITHUB_WORKSPACE:?not set: the checkout of the caller}"
: "${RUNNER_TEMP:?not set}"
: "${GITHUB_OUTPUT:?not set}"
: "${GITHUB_STEP_SUMMARY:?not set}"

manifest="${QUALBOX_MANIFEST:-}"
endpoint="${QUALBOX_ENDPOINT:-}"
out="${QUALBOX_OUTPUT:-}"
[ -n "$out" ] || out="$RUNNER_TEMP/qualbox-report"
case "$out" in /*) ;; *) out="$GITHUB_WORKSPACE/$out" ;; esac
bin="$RUNNER_TEMP/qualbox-bin"
keys="$RUNNER_TEMP/qualbox-keys"

verdict=error
code=4
done_outputs=""

# outputs writes the step outputs once.
outputs() {
	[ -z "$done_outputs" ] || return 0
	done_outputs=1
	{
		echo "verdict=$verdict"
		echo "report-dir=$out"
		echo "exit-code=$code"
	} >>"$GITHUB_OUTPUT"
}

# fail reports an error of the script itself (before a report exists) in
# the summary and outputs and exits with status $1.
fail() {
	code="$1"
	shift
	echo "::error::qualbox: $*" >&2
	echo "qualbox: ERROR ${manifest:-(no manifest)} ($*)" >>"$GITHUB_STEP_SUMMARY"
	outputs
	exit "$code"
}
# on_exit writes the outputs of an unexpected exit (set -e) as an error.
# shellcheck disable=SC2317 # invoked by the trap
on_exit() {
	local rc=$?
	[ -z "$done_outputs" ] || return 0
	code=$rc
	[ "$code" != 0 ] || code=4
	outputs
}
trap on_exit EXIT

[ -n "$manifest" ] || fail 2 "input manifest is required"
# A line break in a path would forge lines of GITHUB_OUTPUT.
case "$manifest$out" in *$'\n'* | *$'\r'*)
	manifest="(refused)" out=""
	fail 2 "inputs manifest and output must not contain line breaks"
	;;
esac
[ -n "${QUALBOX_SIGNING_KEY:-}" ] || fail 2 "input signing-key is required (a PEM ed25519 private key from qualify keygen, passed from a secret)"
case "$manifest" in
/*) manifest_file="$manifest" ;;
*) manifest_file="$GITHUB_WORKSPACE/$manifest" ;;
esac
[ -f "$manifest_file" ] || fail 2 "input manifest: $manifest is not a file in $GITHUB_WORKSPACE"
command -v go >/dev/null || fail 4 "go is not installed (the action builds qualify from its source; actions/setup-go runs first unless setup-go is false)"

# Build as the runner user from the action's own source, never the
# caller's checkout. The go command stamps VCS facts only in a checkout
# whose .git is a directory; elsewhere (a downloaded action) it must not try.
buildvcs=false
[ -d "$GITHUB_ACTION_PATH/.git" ] && buildvcs=true
mkdir -p "$bin"
echo "building qualify from $GITHUB_ACTION_PATH (-buildvcs=$buildvcs)" >&2
(
	cd "$GITHUB_ACTION_PATH"
	unset GOWORK
	export GOFLAGS="-buildvcs=$buildvcs"
	go build -o "$bin/qualify" ./cmd/qualify
	go build -o "$bin/qualbox-action-helper" ./action/helper
	# The guest probe for "image: build" (qualify run --probe), compiled
	# here so that the run under sudo needs no go command; the guest image
	# is amd64 (qualify image --arch).
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags="-s -w" -o "$bin/qualbox-probe" ./qualify/guest/probe
) || fail 4 "building qualify from $GITHUB_ACTION_PATH failed"
"$bin/qualify" version >&2

# The key pair: the private key only in a 0700 directory; the public key
# is the given one (checked to be the signing key's public half) or the
# signing key's own public half.
rm -rf "$keys"
install -d -m 700 "$keys"
# PEM files end in exactly one newline, however the secret was pasted
# ($(...) drops every trailing newline).
(umask 077 && printf '%s\n' "$(printf '%s' "$QUALBOX_SIGNING_KEY")" >"$keys/qualbox-ed25519.key")
given=()
if [ -n "${QUALBOX_PUBLIC_KEY:-}" ]; then
	printf '%s\n' "$(printf '%s' "$QUALBOX_PUBLIC_KEY")" >"$keys/given.pub"
	given=("$keys/given.pub")
fi
# (${a[@]+"${a[@]}"}: an empty array under set -u in macOS's bash 3.2.)
if ! msg=$("$bin/qualbox-action-helper" pubkey "$keys/qualbox-ed25519.key" "$keys/qualbox-ed25519.pub" ${given[@]+"${given[@]}"} 2>&1); then
	rm -rf "$keys"
	fail 2 "${msg#qualbox-action: }"
fi

# Run. On Linux the cgroup observer needs root: only the built binary
# runs under sudo, so no root-owned Go cache is left behind.
args=(run --manifest "$manifest" --signing-key "$keys/qualbox-ed25519.key" --probe "$bin/qualbox-probe" --output "$out")
[ -z "$endpoint" ] || args+=(--endpoint "$endpoint")
sudo=()
if [ "$(id -u)" != 0 ] && [ "$(uname -s)" = Linux ]; then
	sudo=(sudo)
fi
cd "$GITHUB_WORKSPACE"
# A cancelled job signals the whole process group: qualify cleans up and
# writes its partial report (exit 130); this script, with a handler
# instead of the default, waits for it and still verifies, summarises and
# sets the outputs the upload step needs. (Children get the default
# disposition back, unlike an ignored signal.)
# shellcheck disable=SC2317 # invoked by the trap
on_signal() { echo "qualbox: interrupted; finishing the report" >&2; }
trap on_signal INT TERM
set +e
${sudo[@]+"${sudo[@]}"} "$bin/qualify" "${args[@]}"
code=$?
set -e
if [ "${#sudo[@]}" -gt 0 ] && [ -e "$out" ]; then
	sudo chown -R "$(id -u):$(id -g)" "$out" || true
fi

# Verify with the public key, whatever the run's status, when a signed
# report exists.
vstatus=none
if [ -f "$out/evidence.dsse.json" ]; then
	set +e
	"$bin/qualify" verify --key "$keys/qualbox-ed25519.pub" "$out"
	vstatus=$?
	set -e
	cp "$keys/qualbox-ed25519.pub" "$out.pub"
	if [ "$code" = 0 ] && [ "$vstatus" != 0 ]; then
		code=$vstatus
	fi
elif [ "$code" = 0 ]; then
	code=4
fi
rm -f "$keys/qualbox-ed25519.key"

{
	read -r verdict
	read -r line
} < <("$bin/qualbox-action-helper" verdict "$out" "$manifest" "$vstatus")
{
	echo "$line"
	echo
	if [ "$vstatus" = 0 ] && [ -f "$out/summary.md" ]; then
		cat "$out/summary.md"
	fi
} >>"$GITHUB_STEP_SUMMARY"
echo "$line" >&2
outputs
exit "$code"
