#!/usr/bin/env bash
# Imports the fixtures into a data directory and shows a call number that
# resolves: the resolver's own `get` reads it back, and the URL to open once
# `resolver serve` runs.
set -euo pipefail
bin=${1:-bin}
data=${2:-./archive}
manifest=$(mktemp)
trap 'rm -f "$manifest"' EXIT

"$bin/importer" --data "$data" --list demo --manifest "$manifest" fixtures/mbox/demo.mbox

# The first message of the fixture that was stored (new or already there).
cn=$(sed -n 's/.*"callnumber":"\([0-9A-Za-z]\{8\}\)".*/\1/p' "$manifest" | head -n 1)
if [ -z "$cn" ]; then
  echo "demo: no message was stored" >&2
  exit 1
fi
echo
echo "Call number $cn resolves:"
"$bin/resolver" inspect --data "$data" "$cn"
echo
"$bin/resolver" get --data "$data" "$cn" | sed -n '1,/^\r\?$/p' | grep -iE '^(from|subject|date|message-id):' || true
echo
echo "Serve the archive and open the message:"
echo "  $bin/resolver serve --data $data --listen 127.0.0.1:8080"
echo "  http://127.0.0.1:8080/$cn"
