#!/bin/sh
# Reference solution, run by the oracle harness.
set -eu
WORKDIR="${HEMRA_WORKDIR:-/app}"
n=1 total=0
while [ "$n" -le 100 ]; do
  total=$((total + n))
  n=$((n + 1))
done
echo "$total" > "$WORKDIR/sum.txt"
