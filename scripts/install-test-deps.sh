#!/usr/bin/env bash
# Installs what the test suite talks to: a real IMAP server (Dovecot) for
# the watcher's tests and Chromium for the resolver's browser test.
set -euo pipefail
need=()
command -v dovecot >/dev/null 2>&1 || need+=(dovecot-imapd)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v bzip2 >/dev/null 2>&1 || need+=(bzip2)
[ ${#need[@]} -eq 0 ] && exit 0
echo "installing test dependencies: ${need[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
