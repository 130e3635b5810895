#!/bin/bash
WORK="${HEMRA_WORKDIR:-/app}"
echo "Hello, world!" > "$WORK/hello.txt"
