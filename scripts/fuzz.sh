#!/usr/bin/env bash
# Runs every fuzz target of the module for FUZZTIME each (default 30s),
# one at a time at low priority, and copies the inputs each run found
# interesting into the package's testdata/fuzz/<Target>/ seed corpus, which
# `go test` (and so `make test`) runs on every test run. Targets are found
# with `go test -list '^Fuzz'` per package, so new ones are picked up
# without editing this script. docs/untrusted-inputs.md lists them.
#
#   FUZZTIME=10m scripts/fuzz.sh          # longer budget
#   FUZZ='FuzzParse' scripts/fuzz.sh      # only targets matching a regexp
#   FUZZKEEP=0 scripts/fuzz.sh            # do not copy new inputs (CI)
#
# It exits non-zero when any target fails; the failing input is then in
# testdata/fuzz/<Target>/ (go test writes it there) for a regression test.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
FUZZTIME=${FUZZTIME:-30s}
FUZZ=${FUZZ:-.}
FUZZKEEP=${FUZZKEEP:-1}
cache=$("$GO" env GOCACHE)/fuzz

# fuzz_one DIR TARGET runs one target for FUZZTIME. Go 1.26's fuzz
# coordinator can fail a target with a bare "context deadline exceeded"
# when -fuzztime ends while a worker is busy (go.dev/issue/75804, fixed in
# Go 1.27): no input failed, and none is written. Such a failure is told
# apart from a real one by that message and by no new file in the target's
# testdata/fuzz/ directory (where go test writes a failing input), and the
# target runs once more; a second failure of any kind counts.
# list_inputs DIR: the names of DIR's corpus files, sorted (none when DIR
# is missing). Go names corpus files by hash, so a name never holds white
# space.
list_inputs() {
	[ -d "$1" ] || return 0
	find "$1" -mindepth 1 -maxdepth 1 -type f -printf '%f\n' | sort
}

count_inputs() { list_inputs "$1" | wc -l; }

fuzz_one() {
	local dir=$1 target=$2 log attempt inputs
	log=$(mktemp)
	for attempt in 1 2; do
		inputs=$(count_inputs "$dir/testdata/fuzz/$target")
		if (cd "$dir" && nice -n 10 "$GO" test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" -parallel 1 .) 2>&1 | tee "$log"; then
			rm -f "$log"
			return 0
		fi
		if [ "$attempt" = 1 ] && [ "$(count_inputs "$dir/testdata/fuzz/$target")" = "$inputs" ] &&
			grep -qx '    context deadline exceeded' "$log" && ! grep -q 'Failing input written to' "$log"; then
			echo "fuzz: $target stopped with Go's fuzz coordinator deadline race (go.dev/issue/75804), no failing input; running it again"
			continue
		fi
		break
	done
	rm -f "$log"
	return 1
}

failed=()
ran=0
for pkg in $("$GO" list github.com/qualbox/qualbox/...); do
	dir=$("$GO" list -f '{{.Dir}}' "$pkg")
	# Only packages with a Fuzz function in a test file are built for -list.
	grep -qs '^func Fuzz' "$dir"/*_test.go || continue
	for target in $("$GO" test -list '^Fuzz' "$pkg" | grep '^Fuzz' | grep -E -- "$FUZZ" || true); do
		before=$(mktemp)
		list_inputs "$cache/$pkg/$target" >"$before"
		echo "== $pkg $target ($FUZZTIME)"
		if ! fuzz_one "$dir" "$target"; then
			failed+=("$pkg $target")
		fi
		ran=$((ran + 1))
		if [ "$FUZZKEEP" = 1 ] && [ -d "$cache/$pkg/$target" ]; then
			kept=0
			mkdir -p "$dir/testdata/fuzz/$target"
			for f in $(list_inputs "$cache/$pkg/$target" | comm -13 "$before" -); do
				cp -n "$cache/$pkg/$target/$f" "$dir/testdata/fuzz/$target/$f"
				kept=$((kept + 1))
			done
			echo "   kept $kept new interesting inputs in ${dir#"$PWD"/}/testdata/fuzz/$target"
		fi
		rm -f "$before"
	done
done

echo "== $ran fuzz targets run for $FUZZTIME each"
if [ "${#failed[@]}" -gt 0 ]; then
	printf 'FAILED: %s\n' "${failed[@]}"
	exit 1
fi
