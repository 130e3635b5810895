#!/bin/sh
# make bench: the planner at scale. Generates (once, cached) an eval
# directory of 20,000 Harbor tasks x 5 harnesses = 100,000 attempts and a
# store where every attempt is recorded as finished, then measures:
#
#   1. no-op `hemra plan` (config load + prior read + plan): wall, CPU, peak RSS
#      goal: < 1 s and < 300 MB RSS. Measured once without the file hash
#      cache (.hemra/cache, dropped first: every task file read, the cache
#      written) and three times with it (task files stat'ed, not read)
#   2. cold `hemra plan` (empty state, 100,000 manifests built)
#      goal: within 2x of reading every task file once
#   3. reading every task file once (the floor for 2)
#   4. the Go benchmarks (go test -bench) of internal/benchgen
#
# HEMRA_BENCH_TASKS=2000 makes a quick, smaller run. Wall times depend on
# what else the machine is doing: the script prints the load average.
set -eu
cd "$(dirname "$0")/.."

TASKS="${HEMRA_BENCH_TASKS:-20000}"
DIR="${HEMRA_BENCH_DIR:-${TMPDIR:-/tmp}/hemra-bench-$TASKS}"
BIN="$(mktemp -d)/hemra"
TIME=/usr/bin/time
[ -x "$TIME" ] || { echo "bench.sh needs GNU time at /usr/bin/time (apt-get install time)" >&2; exit 1; }

go build -o "$BIN" ./cmd/hemra

if [ ! -f "$DIR/.ready" ]; then
	rm -rf "$DIR"
	go run ./internal/benchgen/cmd/benchgen -dir "$DIR" -tasks "$TASKS" -apply
	touch "$DIR/.ready"
fi

measure() { # label, command...
	label="$1"
	shift
	"$TIME" -f "$label: wall %e s, cpu %U s user + %S s sys, peak RSS %M KB" "$@" >/dev/null 2>"$DIR/.time" || {
		cat "$DIR/.time" >&2
		exit 1
	}
	tail -1 "$DIR/.time"
}

echo "== $TASKS tasks x 5 harnesses = $((TASKS * 5)) attempts in $DIR"
echo "== load average: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || uptime)"
"$BIN" plan -chdir "$DIR" -summary | tail -1
rm -rf "$DIR/.hemra/cache"
measure "no-op plan, no file hash cache" "$BIN" plan -chdir "$DIR" -summary
for i in 1 2 3; do
	measure "no-op plan #$i" "$BIN" plan -chdir "$DIR" -summary
done
EMPTY="$(mktemp -d)/store"
for i in 1 2; do
	measure "cold plan #$i" "$BIN" plan -chdir "$DIR" -store "$EMPTY" -summary
done
for i in 1 2; do
	measure "read every task file #$i" sh -c "find '$DIR/tasks' -type f -print0 | xargs -0 cat"
done

echo "== go test -bench (internal/benchgen)"
HEMRA_BENCH_TASKS="$TASKS" go test ./internal/benchgen -run '^$' -bench . -benchtime 3x -benchmem
