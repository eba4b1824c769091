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
cn=$(sed -n 's/.*"callnumber":"\([0-9A-Za-z]\{8\}\)".*/\1/p' "$manifest" | sed -n 1p)
if [ -z "$cn" ]; then
  echo "demo: no message was stored" >&2
  exit 1
fi
echo
echo "Call number $cn resolves:"
# The lease lines (which program took the run, where, when) are for
# operators: the demo shows the message's own fields.
"$bin/resolver" inspect --data "$data" "$cn" | grep -v '^lease\.'
echo "(resolver inspect --data $data $cn also shows which program numbered it, where and when)"
echo
"$bin/resolver" get --data "$data" "$cn" | sed -n '1,/^\r\?$/p' | grep -iE '^(from|subject|date|message-id):' || true

# Serve it for a moment and fetch the page, to show the URL resolves.
log=$(mktemp)
"$bin/resolver" serve --data "$data" --listen 127.0.0.1:0 2>"$log" &
pid=$!
# (kill fails once the resolver is gone, which under set -e would make the
# demo fail after it succeeded.)
trap 'kill $pid 2>/dev/null || true; rm -f "$manifest" "$log"' EXIT
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
# fetch PATH prints "STATUS" on the first line, then the body. (Its
# readers take the first line with sed, which reads to the end: head would
# close the pipe early, and fetch die of SIGPIPE, which pipefail turns
# into a failed demo.)
fetch() {
  if command -v curl >/dev/null; then
    curl -s -w '\n%{http_code}' "http://$addr$1" | { body=$(cat); printf '%s\n%s\n' "${body##*$'\n'}" "${body%$'\n'*}"; }
  else # bash's own /dev/tcp, for machines without curl
    local host=${addr%:*} port=${addr##*:}
    exec 3<>"/dev/tcp/$host/$port"
    printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$1" "$addr" >&3
    local response
    response=$(cat <&3)
    exec 3<&-
    printf '%s\n' "$(printf '%s' "$response" | sed -n 1p | cut -d' ' -f2)"
    printf '%s\n' "${response#*$'\r\n\r\n'}"
  fi
}
echo
code=$(fetch "/$cn" | sed -n 1p)
echo "GET http://$addr/$cn -> HTTP $code"
[ "$code" = 200 ] || exit 1

# The resolver indexes the archive into its catalog as it starts: wait
# for the list, then show its page.
for _ in $(seq 100); do
  code=$(fetch /l/demo/ | sed -n 1p)
  [ "$code" = 200 ] && break
  sleep 0.1
done
page=$(fetch /l/demo/)
echo "GET http://$addr/l/demo/ -> HTTP $(printf '%s\n' "$page" | sed -n 1p), the list's threads:"
printf '%s\n' "$page" | sed -n 's|.*<a class="subject" href="/t/\([0-9A-Za-z]\{8\}\)/">\(.*\)</a>.*|  /t/\1/  \2|p' |
  sed 's/&amp;/\&/g; s/&lt;/</g; s/&gt;/>/g; s/&#34;/"/g; s/&#39;/'"'"'/g'
kill $pid 2>/dev/null || true
[ "$(printf '%s\n' "$page" | sed -n 1p)" = 200 ] || exit 1

echo
echo "Serve the archive and read it:"
echo "  $bin/resolver serve --data $data --listen 127.0.0.1:8080"
echo "  http://127.0.0.1:8080/l/demo/       the demo list's threads"
echo "  http://127.0.0.1:8080/$cn       a message, in its thread"
