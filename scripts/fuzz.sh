#!/bin/sh
# Runs every fuzz target of the repository for a short, bounded time each
# (HEMRA_FUZZTIME, default 5s), one after the other: what .ci/run runs
# after the tests. A failure leaves the crashing input under the package's
# testdata/fuzz/<Target>/ and fails the script; `go test -run
# '^<Target>$/<file>' ./<pkg>` replays it. A run that fails without a
# failing input (the fuzzing engine's own worker lost, or its coordinator
# stalled past the deadline: "context deadline exceeded") is tried up to
# twice more.
set -eu
cd "$(dirname "$0")/.."
FUZZTIME="${HEMRA_FUZZTIME:-5s}"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
n=0
for file in $(grep -rl --include='*_test.go' '^func Fuzz' . | sort); do
	pkg="./$(dirname "${file#./}")"
	for target in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file"); do
		echo "== fuzz $pkg $target ($FUZZTIME)"
		for try in 1 2 3; do
			if go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "$pkg" >"$log" 2>&1; then
				tail -1 "$log"
				break
			fi
			if grep -q 'Failing input written to' "$log" || [ "$try" = 3 ]; then
				cat "$log" >&2
				echo "fuzz: $pkg $target failed" >&2
				exit 1
			fi
			echo "   the fuzzing engine failed without an input; again:"
			grep -v '^fuzz: elapsed' "$log" | tail -5
		done
		n=$((n + 1))
	done
done
echo "== $n fuzz targets ran $FUZZTIME each"
