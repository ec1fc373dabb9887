#!/usr/bin/env bash
# Run the suite's two phases (tests/suite_phases.py) at the same time:
#   - hermetic: the tests on private state roots and free ports, side by side on
#     VQ_TEST_WORKERS pytest-xdist workers (default: one per CPU; 0 runs them in-process),
#     its report on stdout as it goes;
#   - testbed: the tests on the shared SSH/Slurm testbed, one at a time in one process,
#     its report in build/testbed-phase.log, printed when both are done.
# They touch disjoint state, so they overlap; VQ_TEST_SEQUENTIAL=1 runs the testbed phase
# after the hermetic one instead. Both always run to the end, and the result is non-zero
# if either fails. pytest exits 5 when a phase had nothing to run: fine for one phase
# (e.g. PYTEST_ARGS=tests/unit), but a run where neither phase ran a test is a failure.
set -uo pipefail
py=$1; shift
mkdir -p build
workers=${VQ_TEST_WORKERS:-$(nproc 2>/dev/null || echo 1)}
parallel=(-n "$workers")
[ "$workers" -eq 0 ] && parallel=()
log=build/testbed-phase.log

# The testbed phase is the long one: its report ends with its 25 slowest tests.
run_testbed() { "$py" -m pytest --suite-phase=testbed --durations=25 "$@" >"$log" 2>&1; }
show_testbed() {
  echo "== tests on the shared testbed (one at a time; $log)"
  cat "$log"
}

if [ "${VQ_TEST_SEQUENTIAL:-0}" = 1 ]; then
  "$py" -m pytest "${parallel[@]}" --suite-phase=hermetic "$@"
  hermetic=$?
  run_testbed "$@"
  shared=$?
else
  run_testbed "$@" &
  testbed_pid=$!
  # A background job ignores SIGINT, so an interrupted run stops it with SIGTERM.
  trap 'kill -TERM "$testbed_pid" 2>/dev/null; exit 130' INT TERM
  "$py" -m pytest "${parallel[@]}" --suite-phase=hermetic "$@"
  hermetic=$?
  wait "$testbed_pid"
  shared=$?
fi
show_testbed

echo "== hermetic tests: exit $hermetic; tests on the shared testbed: exit $shared"
if [ "$hermetic" -eq 5 ] && [ "$shared" -eq 5 ]; then
  echo "error: no tests were collected or run; that is a failure, not a pass" >&2
  exit 1
fi
for rc in "$hermetic" "$shared"; do
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then
    exit "$rc"
  fi
done
exit 0
