"""(c) Queue drain: 1,000 PENDING ``true`` jobs through a daemon with 2 slots, vs tsp.

vq: the jobs are written with the in-process submit service while no daemon runs (not
timed). The clock starts when ``vq daemon start --max-jobs 2`` is invoked and stops at
the first poll that sees every spec COMPLETED.

Polling: every 50 ms, the benchmark walks the jobs in submission order from a cursor. It
reads a job's spec only once the job's exit-code marker exists, and it stops at the first
job that is not terminal (see ``_Poller``). So one poll costs about one stat plus one read
per job finished since the last poll. ``Client.call("list", {"states": ["COMPLETED"]})``
would cost more, and the cost would land *inside the daemon being measured*: on every
poll it re-stats every spec and serialises every completed row. Both costs are measured
once after the drain and reported (the file pass there walks all specs).

tsp: the clock starts when ``tsp -S 2`` (which starts the server) is invoked, covers the
1,000 ``tsp true`` submissions (tsp runs jobs while they are being submitted) and stops
when ``tsp -l`` shows nothing queued or running (after ``tsp -w`` on the last id).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from common import (
    CLOCK_TICKS,
    Figure,
    Result,
    StateRoot,
    Target,
    TspQueue,
    children_of,
    cpu_ticks,
    find_tsp,
    run_checked,
    scaled,
)

JOBS = 1000
POLL_SECONDS = 0.05
NONTERMINAL = {"PENDING", "RUNNING", "SUSPENDED"}
DRAIN_TIMEOUT_SECONDS = 300.0


def _iso(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def _create_pending(state: StateRoot, n: int) -> list[str]:
    from vq.domain.admission import Caps
    from vq.protocol.messages import SubmitParams
    from vq.services.context import ServiceContext
    from vq.services.submit import submit

    ctx = ServiceContext(state.paths, Caps())
    return [submit(ctx, SubmitParams(command=["true"])).spec.id for _ in range(n)]


def _read_state(path: os.PathLike[str]) -> str | None:
    try:
        with open(path, "rb") as handle:
            state: str | None = json.loads(handle.read()).get("state")
            return state
    except (OSError, ValueError):
        return None


class _Poller:
    """Finds when every job is terminal, reading as few files as it can.

    Jobs are checked in submission order (the order the daemon dispatches them in) from a
    cursor: a job counts once its exit-code marker exists *and* its spec is terminal, and
    a pass stops at the first job that is not. Each pass costs about one stat plus one
    spec read per job that finished since the last pass, whatever the queue's length.
    """

    def __init__(self, state: StateRoot, ids: list[str]) -> None:
        paths = state.paths
        self.markers = [str(paths.exit_code(job_id)) for job_id in ids]
        self.specs = [str(paths.spec(job_id)) for job_id in ids]
        self.cursor = 0
        self.ended: list[str] = []

    @property
    def done(self) -> bool:
        return self.cursor == len(self.specs)

    def poll(self) -> None:
        while self.cursor < len(self.specs):
            if not os.path.exists(self.markers[self.cursor]):
                return
            value = _read_state(self.specs[self.cursor])
            if value is None or value in NONTERMINAL:
                return
            self.ended.append(value)
            self.cursor += 1


def _breakdown(state: StateRoot, ids: list[str], wall_invoke: float) -> dict[str, Any]:
    """Where the time went, from the specs' and receipts' own timestamps (not timed)."""
    paths = state.paths
    claims, finishes, claim_to_cmd, cmd_wall, cmd_end_to_done = [], [], [], [], []
    for job_id in ids:
        spec = json.loads(paths.spec(job_id).read_bytes())
        receipt = json.loads(paths.resource_usage(job_id).read_bytes())
        claim, done = _iso(spec["started_at"]), _iso(spec["finished_at"])
        cmd_start, cmd_end = _iso(receipt["started_at"]), _iso(receipt["finished_at"])
        claims.append(claim)
        finishes.append(done)
        claim_to_cmd.append((cmd_start - claim) * 1000)
        cmd_wall.append((cmd_end - cmd_start) * 1000)
        cmd_end_to_done.append((done - cmd_end) * 1000)
    span = max(finishes) - min(claims)
    busy = sum(f - c for c, f in zip(claims, finishes, strict=True))
    return {
        "invoke_to_first_claim_s": min(claims) - wall_invoke,
        "invoke_to_last_finished_at_s": max(finishes) - wall_invoke,
        "first_claim_to_last_finish_s": span,
        "mean_jobs_in_flight": busy / span if span > 0 else None,
        "per_job_median_ms": {
            "claim_to_command_started": statistics.median(claim_to_cmd),
            "command_wall": statistics.median(cmd_wall),
            "command_end_to_spec_completed": statistics.median(cmd_end_to_done),
            "claim_to_spec_completed": statistics.median(
                (f - c) * 1000 for c, f in zip(claims, finishes, strict=True)
            ),
        },
    }


def _cpu_seconds(pid: int) -> dict[str, float]:
    """CPU of the daemon, of its fork server, and of everything the fork server reaped."""
    own, _ = cpu_ticks(pid)
    out = {"daemon": own / CLOCK_TICKS, "fork_server": 0.0, "collectors_and_commands": 0.0}
    for child in children_of(pid):
        try:
            child_own, reaped = cpu_ticks(child)
        except OSError:
            continue
        out["fork_server"] += child_own / CLOCK_TICKS
        out["collectors_and_commands"] += reaped / CLOCK_TICKS
    return out


def vq_drain(n: int) -> tuple[float, dict[str, Any]]:
    with StateRoot("drain") as state:
        setup = time.perf_counter()
        ids = _create_pending(state, n)
        setup = time.perf_counter() - setup
        poller = _Poller(state, ids)
        polls = 0
        poll_busy = 0.0
        wall_invoke = time.time()
        t0 = time.perf_counter()
        answer = state.start_daemon(max_jobs=2)
        ready = time.perf_counter() - t0
        cpu_at_ready = _cpu_seconds(int(answer["pid"]))
        deadline = time.monotonic() + DRAIN_TIMEOUT_SECONDS
        while True:
            p = time.perf_counter()
            poller.poll()
            polls += 1
            poll_busy += time.perf_counter() - p
            if poller.done:
                break
            if time.monotonic() > deadline:
                left = n - poller.cursor
                raise RuntimeError(f"{left} jobs unfinished after {DRAIN_TIMEOUT_SECONDS}s")
            time.sleep(POLL_SECONDS)
        elapsed = time.perf_counter() - t0
        cpu = _cpu_seconds(int(answer["pid"]))
        failed = [(ids[i], s) for i, s in enumerate(poller.ended) if s != "COMPLETED"]
        if failed:
            raise RuntimeError(f"{len(failed)} jobs did not complete: {failed[:5]}")
        # What each polling method costs, once, now that all are COMPLETED.
        p = time.perf_counter()
        rows = state.client().call("list", {"states": ["COMPLETED"]})["jobs"]
        list_rpc_ms = (time.perf_counter() - p) * 1000
        p = time.perf_counter()
        _Poller(state, ids).poll()
        file_pass_ms = (time.perf_counter() - p) * 1000
        extra = {
            "jobs": n,
            "setup_seconds_not_timed": setup,
            "invoke_to_daemon_ready_s": ready,
            "polls": polls,
            "poll_method": "in submission order from a cursor: marker stat, then spec read",
            "poll_cpu_in_benchmark_s": poll_busy,
            "one_full_file_poll_pass_ms": file_pass_ms,
            "one_list_rpc_completed_ms": list_rpc_ms,
            "list_rpc_rows": len(rows),
            "cpu_seconds_invoke_to_done": cpu,
            "cpu_seconds_ready_to_done": {k: cpu[k] - cpu_at_ready[k] for k in cpu},
            **_breakdown(state, ids, wall_invoke),
        }
    return elapsed, extra


FLOOR_SCRIPT = Path(__file__).with_name("drain_floor.py")


def floor_drain(n: int, slots: int, command: list[str]) -> tuple[float, dict[str, Any]]:
    """The durable floor (``drain_floor.py``): vq's promises and nothing else, in Python.

    ``n`` PENDING records are written first (not timed); the clock runs from invoking the
    floor's process (as vq's runs from invoking ``vq daemon start``) until it exits with
    every record terminal.
    """
    with tempfile.TemporaryDirectory(prefix="vq-bench-floor-", dir="/tmp") as root:
        run_checked([sys.executable, str(FLOOR_SCRIPT), "prepare", root, str(n)], dict(os.environ))
        t0 = time.perf_counter()
        proc = run_checked(
            [sys.executable, str(FLOOR_SCRIPT), root, str(n), str(slots), *command],
            dict(os.environ),
            timeout=DRAIN_TIMEOUT_SECONDS,
        )
        elapsed = time.perf_counter() - t0
        states = {
            json.loads((Path(root) / "queue" / name).read_bytes())["state"]
            for name in os.listdir(Path(root) / "queue")
        }
        if states != {"COMPLETED"}:
            raise RuntimeError(f"the floor drain ended with states {sorted(states)}")
    return elapsed, {"jobs": n, **json.loads(proc.stdout)}


def tsp_drain(tsp: str, n: int) -> tuple[float, dict[str, Any]]:
    with TspQueue(tsp, "drain") as queue:
        t0 = time.perf_counter()
        queue.start(slots=2)
        last = -1
        for _ in range(n):
            last = queue.submit("true")
        submitted = time.perf_counter() - t0
        subprocess.run(
            [tsp, "-w", str(last)], env=queue.env, capture_output=True, timeout=300, check=False
        )
        deadline = time.monotonic() + DRAIN_TIMEOUT_SECONDS
        while queue.unfinished():
            if time.monotonic() > deadline:
                raise RuntimeError("tsp jobs unfinished after the timeout")
            time.sleep(POLL_SECONDS)
        elapsed = time.perf_counter() - t0
        listing = run_checked([tsp, "-l"], queue.env).stdout.splitlines()[1:]
        bad = [
            line
            for line in listing
            if len(parts := line.split()) > 3 and parts[1] == "finished" and parts[3] != "0"
        ]
    return elapsed, {
        "jobs": n,
        "submit_all_s": submitted,
        "finished_rows_listed": len(listing),
        "nonzero_rows": len(bad),
    }


def run() -> list[Result]:
    n = scaled(JOBS, minimum=50)
    vq_s, vq_extra = vq_drain(n)
    floor_s, floor_extra = floor_drain(n, 2, ["true"])
    tsp = find_tsp()
    comparison = None
    error = None
    tsp_extra: dict[str, Any] = {}
    if tsp:
        tsp_s, tsp_extra = tsp_drain(tsp, n)
        comparison = Figure(f"tsp: -S 2, submit {n}, all finished", "s", [tsp_s])
        comparison.note = f"{n / tsp_s:.0f} jobs/s"
    else:
        error = "task-spooler not found (run scripts/install-bench-deps.sh)"
    figure = Figure(f"daemon start → {n} COMPLETED", "s", [vq_s], note=f"{n / vq_s:.0f} jobs/s")
    floor = Figure(
        "durable floor (drain_floor.py)", "s", [floor_s], note=f"{n / floor_s:.0f} jobs/s"
    )
    floor_row = Result(
        "drain_floor",
        f"(c) the durable floor: {n} `true` jobs, 2 slots, vq's per-job promises kept by a "
        "minimal Python program (claim, start record, exit marker fsynced; forked collector)",
        floor,
        comparison,
        extra={
            "floor": floor_extra,
            "vq_over_floor": vq_s / floor_s,
            "tsp_seconds": comparison.value if comparison else None,
        },
        error=error,
    )
    return [
        Result(
            "drain",
            f"(c) drain {n} `true` jobs, 2 slots",
            figure,
            comparison,
            Target("≤ 1.5× tsp", "ratio", 1.5),
            extra={
                "vq": {**vq_extra, "jobs_per_second": n / vq_s},
                "tsp": {**tsp_extra, "jobs_per_second": n / comparison.value}
                if comparison
                else None,
            },
            error=error,
        ),
        floor_row,
    ]
