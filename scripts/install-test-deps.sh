#!/usr/bin/env bash
# System packages the test suite needs, installed with apt-get when missing (idempotent).
# strace: the chaos tests use it to stop a process at an exact system call.
# chromium: the web console's browser tests drive Debian's Chromium through Playwright
# (never `playwright install`).
set -euo pipefail
need=()
command -v strace >/dev/null || need+=(strace)
command -v chromium >/dev/null || need+=(chromium)
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "error: the tests need: ${need[*]} (install them, or run as root on Debian)" >&2
  exit 1
fi
echo "installing ${need[*]} ..."
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
