#!/bin/sh
touch "${HEMRA_WORKDIR:-/app}/done.txt"
