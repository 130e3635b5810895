#!/bin/sh
# Verifier: checks the agent's working directory and writes the reward.
WORKDIR="${HEMRA_WORKDIR:-/app}"
LOGS="${HEMRA_VERIFIER_LOGS:-/logs/verifier}"
mkdir -p "$LOGS"
if [ "$(cat "$WORKDIR/hello.txt" 2>/dev/null)" = "Hello, world!" ]; then
  echo 1 > "$LOGS/reward.txt"
else
  echo 0 > "$LOGS/reward.txt"
fi
