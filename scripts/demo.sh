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

# Serve it for a moment and fetch the page, to show the URL resolves.
log=$(mktemp)
"$bin/resolver" serve --data "$data" --listen 127.0.0.1:0 2>"$log" &
pid=$!
trap 'kill $pid 2>/dev/null; rm -f "$manifest" "$log"' EXIT
addr=""
for _ in $(seq 50); do
  addr=$(sed -n 's/.*msg=serving addr=\([0-9.:]*\).*/\1/p' "$log")
  [ -n "$addr" ] && break
  sleep 0.1
done
if [ -z "$addr" ]; then
  echo "demo: the resolver did not start:" >&2
  cat "$log" >&2
  exit 1
fi
echo
if command -v curl >/dev/null; then
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://$addr/$cn")
else # bash's own /dev/tcp, for machines without curl
  host=${addr%:*} port=${addr##*:}
  exec 3<>"/dev/tcp/$host/$port"
  printf 'GET /%s HTTP/1.0\r\nHost: %s\r\n\r\n' "$cn" "$addr" >&3
  code=$(head -n 1 <&3 | cut -d' ' -f2)
  exec 3<&-
fi
echo "GET http://$addr/$cn -> HTTP $code"
kill $pid
[ "$code" = 200 ] || exit 1

echo
echo "Serve the archive and open the message:"
echo "  $bin/resolver serve --data $data --listen 127.0.0.1:8080"
echo "  http://127.0.0.1:8080/$cn"
