"""(t) swarm: a 2,000-element ``--array`` of ``sleep 0.05``, ``--max-parallel 2``.

The daemon is up with 2 slots before the clock starts. The clock starts when
``vq submit --array 1-2000 --max-parallel 2 -- sleep 0.05`` is invoked and stops at the
first poll that sees every element COMPLETED (the same cursor poll as (c): a marker stat,
then a spec read, per element finished since the last poll). The ideal is
``2,000 × 0.05 s / 2 = 50 s``; the figure reported is the overhead above it, which is
what a user running a sweep of short tasks pays per element (between one element's end
and the next one's start in a slot).
"""

from __future__ import annotations

import statistics
import subprocess
import time
from typing import Any

from bench_drain import POLL_SECONDS, _iso, _Poller, floor_drain
from common import VQ, Figure, Result, StateRoot, Target, scaled

ELEMENTS = 2000
SLEEP_SECONDS = 0.05
SLOTS = 2
TIMEOUT_SECONDS = 600.0


def _gaps_ms(state: StateRoot, ids: list[str]) -> dict[str, float]:
    """Median slot hand-over: next element's command start − previous one's command end."""
    import json

    spans = []
    for job_id in ids:
        receipt = json.loads(state.paths.resource_usage(job_id).read_bytes())
        spans.append((_iso(receipt["started_at"]), _iso(receipt["finished_at"])))
    ends = sorted(end for _, end in spans)
    starts = sorted(start for start, _ in spans)
    # Element k+SLOTS starts in the slot element k freed (in steady state).
    gaps = [(starts[i + SLOTS] - ends[i]) * 1000 for i in range(len(ends) - SLOTS)]
    return {"median_handover_ms": statistics.median(gaps) if gaps else 0.0}


def run() -> list[Result]:
    n = scaled(ELEMENTS, minimum=100)
    ideal = n * SLEEP_SECONDS / SLOTS
    with StateRoot("swarm") as state:
        state.start_daemon(max_jobs=SLOTS)
        argv = [VQ, "submit", "--array", f"1-{n}", "--max-parallel", str(SLOTS)]
        argv += ["--", "sleep", str(SLEEP_SECONDS)]
        t0 = time.perf_counter()
        proc = subprocess.run(
            argv, env=state.env, capture_output=True, timeout=120, check=False, text=True
        )
        submitted = time.perf_counter() - t0
        if proc.returncode != 0:
            raise RuntimeError(f"vq submit --array exited {proc.returncode}: {proc.stderr}")
        ids = proc.stdout.split()
        if len(ids) != n:
            raise RuntimeError(f"vq submit --array printed {len(ids)} ids, expected {n}")
        poller = _Poller(state, ids)
        deadline = time.monotonic() + TIMEOUT_SECONDS
        while not poller.done:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{n - poller.cursor} elements unfinished")
            time.sleep(POLL_SECONDS)
            poller.poll()
        elapsed = time.perf_counter() - t0
        failed = [s for s in poller.ended if s != "COMPLETED"]
        if failed:
            raise RuntimeError(f"{len(failed)} elements did not complete")
        extra: dict[str, Any] = {
            "elements": n,
            "ideal_s": ideal,
            "submit_cli_s": submitted,
            "overhead_percent": (elapsed / ideal - 1) * 100,
            **_gaps_ms(state, ids),
        }
    floor_s, floor_extra = floor_drain(n, SLOTS, ["sleep", str(SLEEP_SECONDS)])
    extra["vq_over_floor"] = elapsed / floor_s
    figure = Figure(f"submit → {n} COMPLETED", "s", [elapsed])
    figure.note = f"overhead {(elapsed / ideal - 1) * 100:.1f} %"
    ideal_figure = Figure(f"ideal {n} × {SLEEP_SECONDS} s / {SLOTS} slots", "s", [ideal])
    return [
        Result(
            "swarm",
            f"(t) swarm: --array of {n} `sleep {SLEEP_SECONDS}`, --max-parallel {SLOTS}",
            figure,
            ideal_figure,
            Target("overhead ≤ 10 % (≤ 1.10× ideal)", "ratio", 1.10),
            extra=extra,
        ),
        Result(
            "swarm_floor",
            f"(t) the durable floor: {n} `sleep {SLEEP_SECONDS}` through {SLOTS} slots, vq's "
            "per-job promises kept by a minimal Python program (bench/drain_floor.py)",
            Figure("durable floor (drain_floor.py)", "s", [floor_s]),
            ideal_figure,
            extra={"floor": floor_extra, "overhead_percent": (floor_s / ideal - 1) * 100},
        ),
    ]
