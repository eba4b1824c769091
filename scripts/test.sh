#!/usr/bin/env bash
# make test: the whole suite, in stages, each said as it starts and timed
# as it ends: the test dependencies (apt), vet and gofmt, then every
# test with the race detector (packages print as they finish; the longest,
# e2e, runs the real programs for several minutes), then the tests that
# were skipped and why. Fails exactly when a stage fails.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
start=$(date +%s)
stage() {
  local name=$1; shift
  local t0; t0=$(date +%s)
  echo "== $name"
  if "$@"; then
    echo "== $name: done in $(( $(date +%s) - t0 )) s"
  else
    local status=$?
    echo "== $name: FAILED after $(( $(date +%s) - t0 )) s"
    exit "$status"
  fi
}
alltests() {
  echo "   (25 to 35 minutes on 2 cores; each package's line comes when it is done)"
  $GO test -json -race -timeout 60m ./... | $GO run ./internal/tools/testsummary
}
stage "test dependencies" scripts/install-test-deps.sh
stage "vet and gofmt" make --no-print-directory check
stage "go test -race ./..." alltests
echo "== make test: passed in $(( ($(date +%s) - start) / 60 )) min $(( ($(date +%s) - start) % 60 )) s"
