#!/bin/sh
# Reference solution, run by the oracle harness.
set -eu
WORKDIR="${HEMRA_WORKDIR:-/app}"
n=1
: > "$WORKDIR/fizzbuzz.txt"
while [ "$n" -le 15 ]; do
  if [ $((n % 15)) -eq 0 ]; then echo FizzBuzz
  elif [ $((n % 3)) -eq 0 ]; then echo Fizz
  elif [ $((n % 5)) -eq 0 ]; then echo Buzz
  else echo "$n"
  fi >> "$WORKDIR/fizzbuzz.txt"
  n=$((n + 1))
done
