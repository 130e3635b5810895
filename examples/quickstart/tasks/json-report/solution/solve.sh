#!/bin/sh
# Reference solution, run by the oracle harness.
set -eu
WORKDIR="${HEMRA_WORKDIR:-/app}"
touch "$WORKDIR/a.txt" "$WORKDIR/b.txt" "$WORKDIR/c.txt"
printf '{"status": "ok", "files": 3}\n' > "$WORKDIR/report.json"
