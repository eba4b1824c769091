#!/usr/bin/env bash
# Builds the importer of an older commit (make bench's "before" row: the
# store before compression) into DIR/importer, with its source in DIR/src
# for its own benchmarks. Exits 1 without git or the commit.
set -euo pipefail
commit=$1
dir=$2
if ! git rev-parse --verify --quiet "$commit^{commit}" >/dev/null; then
  echo "before.sh: commit $commit not found (not a git checkout?): no before figures" >&2
  exit 1
fi
rm -rf "$dir/src"
mkdir -p "$dir/src"
git archive "$commit" | tar -x -C "$dir/src"
(cd "$dir/src" && go build -o ../importer ./cmd/importer)
