#!/usr/bin/env bash
# Run a command with the testbed up, and take the testbed down afterwards (trap).
# Used by `make test`. As root: scripts/testbed/up.sh first; when it fails the command
# still runs (the testbed's tests then fail under CI=true, or skip otherwise) and the
# exit status is non-zero. Not root: the command runs alone (the testbed tests skip).
# VQ_TESTBED_KEEP=1 leaves the testbed running afterwards.
set -uo pipefail
here=$(dirname "$0")
if [ "$(id -u)" != 0 ]; then
  echo "testbed: not root; tests that need the SSH/Slurm testbed will be skipped" >&2
  exec "$@"
fi
up_rc=0
if [ "${VQ_TESTBED_KEEP:-0}" != 1 ]; then
  trap '"$here/down.sh" >/dev/null 2>&1 || echo "testbed: down.sh failed" >&2' EXIT
fi
"$here/up.sh" || up_rc=$?
"$@"
rc=$?
if [ "$rc" -eq 0 ] && [ "$up_rc" -ne 0 ]; then
  echo "testbed: scripts/testbed/up.sh failed (exit $up_rc)" >&2
  rc=$up_rc
fi
exit "$rc"
