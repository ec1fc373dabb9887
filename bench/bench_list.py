"""(d) ``vq list --json > /dev/null`` over 10,000 specs, with and without a daemon.

Set-up (not timed): 10,000 valid specs written straight to the store, 9 in 10 COMPLETED
and 1 in 10 PENDING with ``not_before`` a day ahead (so the daemon keeps them queued and
stays idle while it serves the listing). Without a daemon the CLI scans and parses every
spec file; with one, the daemon serves its in-memory index (after re-stat'ing every
file to catch writes by others). One untimed warm-up of each also checks the row count.

Also reported (informational): how long ``vq daemon start`` takes over those specs (its
recovery pass and index load read every spec before the socket is published).
"""

from __future__ import annotations

import json
import subprocess
import time

from common import VQ, Figure, Result, StateRoot, Target, scaled, time_process, write_specs

SPECS = 10_000
RUNS = 5


def _check_count(state: StateRoot, expected: int) -> None:
    proc = subprocess.run(
        [VQ, "list", "--json"], env=state.env, capture_output=True, timeout=300, check=True
    )
    rows = len(json.loads(proc.stdout)["jobs"])
    if rows != expected:
        raise RuntimeError(f"vq list --json returned {rows} rows, expected {expected}")


def run() -> list[Result]:
    n = scaled(SPECS, minimum=500)
    runs = scaled(RUNS, minimum=2)
    argv = [VQ, "list", "--json"]
    with StateRoot("list") as state:
        setup = time.perf_counter()
        write_specs(state, n, pending_every=10)
        setup = time.perf_counter() - setup

        _check_count(state, n)
        disk_s = [time_process(argv, state.env, timeout=300) for _ in range(runs)]

        t0 = time.perf_counter()
        state.start_daemon()
        start_s = time.perf_counter() - t0

        _check_count(state, n)
        daemon_s = [time_process(argv, state.env, timeout=300) for _ in range(runs)]
    extra = {"specs": n, "runs": runs, "setup_seconds_not_timed": setup}
    return [
        Result(
            "list_daemon",
            f"(d) `vq list --json` over {n} specs, daemon up",
            Figure("vq list --json > /dev/null", "s", daemon_s),
            target=Target("median ≤ 1 s", "value", 1.0),
            extra=extra,
        ),
        Result(
            "list_disk",
            f"(d) `vq list --json` over {n} specs, no daemon",
            Figure("vq list --json > /dev/null (disk scan)", "s", disk_s),
            extra=extra,
        ),
        Result(
            "daemon_start_specs",
            f"(d) `vq daemon start` over {n} specs",
            Figure("vq daemon start (recovery + index load)", "s", [start_s]),
            extra=extra,
        ),
    ]
