#!/usr/bin/env bash
# Installs what the test suite talks to: a real IMAP server (Dovecot) for
# the watcher's tests, a real IMAP client (fetchmail) for the IMAP
# server's, Chromium for the resolver's browser test, b4 and lei (which
# fetch and search public-inbox archives) for e2e TestB4, TestB4Series and
# TestLei, public-inbox itself (tests compare with its search and its
# inboxes, and index what resolver export writes) and git (which the
# public-inbox import and export run), and what
# the Riak test kit (../shared/riak, when it is there) needs to unpack and
# start its nodes: tar, xz, and curl (or python3).
#
# apt takes a lock that another apt (an unattended upgrade on a fresh
# machine, another job) may hold: wait for it, up to APT_LOCK_TIMEOUT
# seconds (default 600), rather than fail at once.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
# dovecot-core alone has the dovecot command but not its IMAP service.
{ command -v dovecot >/dev/null 2>&1 && [ -x /usr/lib/dovecot/imap ]; } || need+=(dovecot-imapd)
command -v fetchmail >/dev/null 2>&1 || need+=(fetchmail)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v bzip2 >/dev/null 2>&1 || need+=(bzip2)
command -v b4 >/dev/null 2>&1 || need+=(b4)
command -v lei >/dev/null 2>&1 || need+=(lei)
command -v curl >/dev/null 2>&1 || need+=(curl) # lei's HTTP client
command -v public-inbox-index >/dev/null 2>&1 || need+=(public-inbox)
command -v git >/dev/null 2>&1 || need+=(git) # the public-inbox export's clones (resolver)
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
command -v git >/dev/null 2>&1 || need+=(git)
if [ -e ../shared/riak/riak-node ] || [ -n "${CHIBRARY_RIAK_KIT:-}" ]; then
  command -v tar >/dev/null 2>&1 || need+=(tar)
  command -v xz >/dev/null 2>&1 || need+=(xz-utils)
  command -v curl >/dev/null 2>&1 || command -v python3 >/dev/null 2>&1 || need+=(curl)
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "installing test dependencies: ${need[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  wait_lock=(-o "DPkg::Lock::Timeout=${APT_LOCK_TIMEOUT:-600}")
  # A fresh machine has no package lists yet: update before installing.
  $sudo apt-get "${wait_lock[@]}" update -qq
  $sudo apt-get "${wait_lock[@]}" install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# axe-core, at the version resolver/a11y_test.go names (axeVersion), where
# that test looks for it: $XDG_CACHE_HOME (else ~/.cache)/chibrary/npm.
axe_version=4.14.1
axe_dir="${XDG_CACHE_HOME:-$HOME/.cache}/chibrary/npm"
if ! grep -qs "\"version\": \"$axe_version\"" "$axe_dir/node_modules/axe-core/package.json"; then
  echo "installing axe-core@$axe_version into $axe_dir"
  mkdir -p "$axe_dir"
  npm install --prefix "$axe_dir" --no-audit --no-fund --no-save --silent "axe-core@$axe_version"
fi
