#!/usr/bin/env bash
# Runs every fuzz target of the module for the given time each.
#
# A failing input is written to the package's testdata/fuzz/TARGET/ and fails
# the run. One failure is not a failing input: Go's fuzz coordinator before
# 1.27 can report the end of -fuzztime itself as "context deadline exceeded"
# with no input written (golang/go#75804). That case, and only that one, runs
# the target again, at most twice.
#
# An input that finds new code is not minimized (-fuzzminimizetime 1x; set
# FUZZ_MINIMIZE to a time or count for that): Go gives each up to 60 s, and
# a target that finds new code with almost every input early on, as
# resolver's FuzzPages does, spent a whole 30 s run minimizing a handful
# of them. A failing input is written as it was found.
set -euo pipefail
fuzztime=${1:-5m}
minimize=${FUZZ_MINIMIZE:-1x}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

inputs() { if [ -d "$1" ]; then find "$1" -type f | sort; fi; }

for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
    for attempt in 1 2 3; do
      echo "== $pkg $target ($fuzztime)"
      before=$(inputs "$dir/testdata/fuzz/$target")
      status=0
      go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimize" "$pkg" 2>&1 | tee "$out" || status=$?
      [ "$status" -eq 0 ] && break
      after=$(inputs "$dir/testdata/fuzz/$target")
      if [ "$before" = "$after" ] && [ "$attempt" -lt 3 ] &&
        grep -A1 -- "^--- FAIL: $target " "$out" | tail -n 1 | grep -qx '[[:space:]]*context deadline exceeded'; then
        echo "== $target: stopped by the fuzz coordinator's deadline with no failing input (golang/go#75804); again"
        continue
      fi
      exit "$status"
    done
  done
done
