#!/bin/sh
# Reference solution, run by the oracle harness.
set -eu
WORKDIR="${HEMRA_WORKDIR:-/app}"
echo "Hello, world!" > "$WORKDIR/hello.txt"
