#!/bin/bash
# Grades hello.txt; writes the reward where Harbor (or hemra's local sandbox) expects it.
LOGS="${HEMRA_VERIFIER_LOGS:-/logs/verifier}"
WORK="${HEMRA_WORKDIR:-/app}"
mkdir -p "$LOGS"
if [ "$(cat "$WORK/hello.txt" 2>/dev/null)" = "Hello, world!" ]; then
  echo 1 > "$LOGS/reward.txt"
else
  echo 0 > "$LOGS/reward.txt"
fi
