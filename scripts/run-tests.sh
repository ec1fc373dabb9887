#!/usr/bin/env bash
# Run pytest on VQ_TEST_WORKERS pytest-xdist workers and refuse to call an empty run green
# (pytest exits 5 when no test ran).
#
# --dist loadgroup: the tests on the shared SSH/Slurm testbed form one group
# (tests/suite_phases.py), so one worker runs them one at a time while the other workers
# run the hermetic tests (private state roots, free ports) side by side. The default is
# one worker per CPU plus the testbed's; VQ_TEST_WORKERS=0 runs everything in-process,
# one test at a time.
set -uo pipefail
py=$1; shift
mkdir -p build
cpus=$(nproc 2>/dev/null || echo 1)
workers=${VQ_TEST_WORKERS:-$((cpus + 1))}
if [ "$workers" -eq 0 ]; then
  "$py" -m pytest "$@"
else
  "$py" -m pytest -n "$workers" --dist loadgroup "$@"
fi
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "error: no tests were collected or run; that is a failure, not a pass" >&2
  exit 1
fi
exit "$rc"
