#!/bin/sh
# Verifier: checks the agent's working directory and writes the reward.
WORKDIR="${HEMRA_WORKDIR:-/app}"
LOGS="${HEMRA_VERIFIER_LOGS:-/logs/verifier}"
mkdir -p "$LOGS"
expected="1
2
Fizz
4
Buzz
Fizz
7
8
Fizz
Buzz
11
Fizz
13
14
FizzBuzz"
if [ "$(cat "$WORKDIR/fizzbuzz.txt" 2>/dev/null)" = "$expected" ]; then
  echo 1 > "$LOGS/reward.txt"
else
  echo 0 > "$LOGS/reward.txt"
fi
