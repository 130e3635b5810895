#!/bin/sh
LOGS="${HEMRA_VERIFIER_LOGS:-/logs/verifier}"
if [ -f "${HEMRA_WORKDIR:-/app}/done.txt" ]; then echo 1; else echo 0; fi > "$LOGS/reward.txt"
