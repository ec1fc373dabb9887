"""(u) 100k: a queue of 100,000 specs on disk (90 % COMPLETED, 10 % PENDING for tomorrow).

The specs are written by :func:`common.write_specs` in the documented JobSpec format (not
timed). Then, on that one state root:

* the first ``vq daemon start`` until it answers (target ≤ 10 s): no terminal index
  exists yet, so every spec is parsed (the daemon then writes the index on a thread;
  the time until it is written is in ``extra``, and the timed work waits for it);
* ``vq submit -- true``, median of interleaved rounds against the same command on an
  empty queue with its own daemon (target ≤ 1.2×: per-submit work must not grow with the
  queue);
* ``vq list --state RUNNING --json`` and ``vq status ID`` (a COMPLETED job), medians
  (target ≤ 150 ms each);
* the daemon's resident memory, VmRSS (target ≤ 300 MB);
* idle CPU of the daemon and its fork server over a quiet window (target < 1 % of a core);
* ``vq daemon stop``, then ``vq daemon start`` again until it answers (target ≤ 10 s):
  finished jobs come from the terminal index; and the RSS after that restart.
"""

from __future__ import annotations

import statistics
import time

from bench_idle import _ticks
from common import (
    CLOCK_TICKS,
    VQ,
    Figure,
    Result,
    StateRoot,
    Target,
    children_of,
    scale,
    scaled,
    time_process,
    write_specs,
)

SPECS = 100_000
PENDING_EVERY = 10
ROUNDS = 15
IDLE_WINDOW_SECONDS = 20.0
SETTLE_SECONDS = 2.0


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def _wait_for_log(root: StateRoot, text: str, timeout: float = 180.0) -> float:
    """``time.perf_counter()`` once ``daemon.log`` holds ``text`` (polled every 50 ms)."""
    log = root.root / "daemon.log"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return time.perf_counter()
        time.sleep(0.05)
    raise RuntimeError(f"{log} never said {text!r} within {timeout:.0f} s")


def _ms(samples: list[float]) -> list[float]:
    return [s * 1000 for s in samples]


def run() -> list[Result]:
    n = scaled(SPECS, minimum=2000)
    rounds = max(5, scaled(ROUNDS))
    window = max(5.0, IDLE_WINDOW_SECONDS * scale())
    with StateRoot("scale") as big, StateRoot("scale-empty") as empty:
        t = time.perf_counter()
        ids = write_specs(big, n, pending_every=PENDING_EVERY)
        written = time.perf_counter() - t
        done_id = ids[1]  # index 0 is PENDING; every other one is COMPLETED
        t0 = time.perf_counter()
        answer = big.start_daemon()
        start_s = time.perf_counter() - t0
        # The first start writes the terminal index on a thread of its own: let it finish
        # before the timed work (its cost is reported, once, not spread over the rounds).
        index_written_s = _wait_for_log(big, "terminal index written") - t0
        empty.start_daemon()
        submit_big: list[float] = []
        submit_empty: list[float] = []
        for _ in range(rounds):  # interleaved: a noisy stretch hits both alike
            submit_big.append(time_process([VQ, "submit", "--", "true"], big.env))
            submit_empty.append(time_process([VQ, "submit", "--", "true"], empty.env))
        time.sleep(SETTLE_SECONDS)  # the submitted `true` jobs finish
        running = [
            time_process([VQ, "list", "--state", "RUNNING", "--json"], big.env)
            for _ in range(rounds)
        ]
        status = [time_process([VQ, "status", done_id], big.env) for _ in range(rounds)]
        daemon = int(answer["pid"])
        rss = _rss_mb(daemon)
        time.sleep(SETTLE_SECONDS)
        pids = [daemon, *children_of(daemon)]
        before = _ticks(pids)
        t1 = time.monotonic()
        time.sleep(window)
        elapsed = time.monotonic() - t1
        after = _ticks(pids)
        idle = sum(after[p] - before[p] for p in pids) / CLOCK_TICKS / elapsed * 100
        # A restart on the same root: finished jobs come from the terminal index.
        big.stop_daemon()
        t2 = time.perf_counter()
        again = big.start_daemon()
        restart_s = time.perf_counter() - t2
        time.sleep(SETTLE_SECONDS)
        restart_rss = _rss_mb(int(again["pid"]))
    label = f"(u) {n:,} specs"
    common_extra = {
        "specs": n,
        "pending": len(ids[::PENDING_EVERY]),
        "write_s": written,
        "first_start_terminal_index_written_s": index_written_s,
    }
    return [
        Result(
            "scale_start",
            f"{label}: first `vq daemon start` (no terminal index yet) until it answers",
            Figure("invoke → answers", "s", [start_s]),
            target=Target("≤ 10 s", "value", 10.0),
            extra=common_extra,
        ),
        Result(
            "scale_restart",
            f"{label}: `vq daemon start` again (stopped daemon, terminal index) until it answers",
            Figure("invoke → answers", "s", [restart_s]),
            target=Target("≤ 10 s", "value", 10.0),
        ),
        Result(
            "scale_submit",
            f"{label}: `vq submit -- true`",
            Figure("vq submit, big queue", "ms", _ms(submit_big)),
            Figure("vq submit, empty queue", "ms", _ms(submit_empty)),
            Target("≤ 1.2× empty queue", "ratio", 1.2),
            extra={"rounds": rounds, "medians_ms": [statistics.median(_ms(submit_empty))]},
        ),
        Result(
            "scale_list_running",
            f"{label}: `vq list --state RUNNING --json`",
            Figure("CLI wall", "ms", _ms(running)),
            target=Target("≤ 150 ms", "value", 150.0),
        ),
        Result(
            "scale_status",
            f"{label}: `vq status ID`",
            Figure("CLI wall", "ms", _ms(status)),
            target=Target("≤ 150 ms", "value", 150.0),
        ),
        Result(
            "scale_rss",
            f"{label}: daemon RSS",
            Figure("VmRSS", "MB", [rss]),
            target=Target("≤ 300 MB", "value", 300.0),
        ),
        Result(
            "scale_restart_rss",
            f"{label}: daemon RSS after the restart",
            Figure("VmRSS", "MB", [restart_rss]),
            target=Target("≤ 300 MB", "value", 300.0),
        ),
        Result(
            "scale_idle_cpu",
            f"{label}: idle CPU over {elapsed:.0f} s, daemon + fork server",
            Figure("utime+stime / window", "%", [idle]),
            target=Target("< 1 % of a core", "value", 1.0, strict=True),
        ),
    ]
