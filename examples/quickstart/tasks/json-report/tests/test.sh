#!/bin/sh
# Verifier: checks the agent's working directory and writes the reward.
WORKDIR="${HEMRA_WORKDIR:-/app}"
LOGS="${HEMRA_VERIFIER_LOGS:-/logs/verifier}"
mkdir -p "$LOGS"
# Two scores in reward.json: the report's format and the files it counts.
format=0 files=0
report="$WORKDIR/report.json"
if grep -q '"status": *"ok"' "$report" 2>/dev/null && grep -q '"files": *3' "$report"; then
  format=1
fi
if [ -f "$WORKDIR/a.txt" ] && [ -f "$WORKDIR/b.txt" ] && [ -f "$WORKDIR/c.txt" ]; then
  files=1
fi
reward=0
if [ "$format" -eq 1 ] && [ "$files" -eq 1 ]; then reward=1; fi
printf '{"reward": %s, "format": %s, "files": %s}\n' "$reward" "$format" "$files" > "$LOGS/reward.json"
