#!/usr/bin/env bash
# Run pytest and refuse to call an empty run green (pytest exits 5 when no test ran).
set -uo pipefail
py=$1; shift
mkdir -p build
"$py" -m pytest "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "error: no tests were collected or run; that is a failure, not a pass" >&2
  exit 1
fi
exit "$rc"
