#!/bin/sh
test -d "${HEMRA_WORKDIR:-/app}/repo" && echo 1 > "${HEMRA_VERIFIER_LOGS:-/logs/verifier}/reward.txt"
