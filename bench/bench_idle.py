"""(e) CPU the daemon burns while idle: daemon + fork server, percent of one core.

A daemon starts over ~100 COMPLETED specs and is left alone for 2 s. Then utime+stime of
the daemon (all its threads) and of each of its children (the fork server), read from
``/proc/<pid>/stat``, are sampled before and after a quiet window of 30 s (scaled by
VQ_BENCH_SCALE, at least 5 s). Resolution: one clock tick (usually 10 ms), i.e. 0.03 %
of a core over 30 s.
"""

from __future__ import annotations

import time

from common import (
    CLOCK_TICKS,
    Figure,
    Result,
    StateRoot,
    Target,
    children_of,
    cpu_ticks,
    scale,
    write_specs,
)

SPECS = 100
WINDOW_SECONDS = 30.0
SETTLE_SECONDS = 2.0


def _ticks(pids: list[int]) -> dict[int, int]:
    out = {}
    for pid in pids:
        try:
            out[pid] = cpu_ticks(pid)[0]
        except OSError:
            out[pid] = 0
    return out


def run() -> list[Result]:
    window = max(5.0, WINDOW_SECONDS * scale())
    with StateRoot("idle") as state:
        write_specs(state, SPECS)
        answer = state.start_daemon()
        daemon = int(answer["pid"])
        time.sleep(SETTLE_SECONDS)
        pids = [daemon, *children_of(daemon)]
        before = _ticks(pids)
        t0 = time.monotonic()
        time.sleep(window)
        elapsed = time.monotonic() - t0
        after = _ticks(pids)
    per_pid = {str(pid): (after[pid] - before[pid]) / CLOCK_TICKS / elapsed * 100 for pid in pids}
    total = sum(after[pid] - before[pid] for pid in pids) / CLOCK_TICKS / elapsed * 100
    return [
        Result(
            "idle_cpu",
            f"(e) idle CPU over {elapsed:.0f} s, daemon + fork server",
            Figure("utime+stime / window", "%", [total]),
            target=Target("< 1 % of a core", "value", 1.0, strict=True),
            extra={
                "window_seconds": elapsed,
                "specs": SPECS,
                "daemon_pid": daemon,
                "percent_by_pid": per_pid,
                "clock_ticks_per_second": CLOCK_TICKS,
            },
        )
    ]
