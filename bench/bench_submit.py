"""(a) ``vq submit -- true`` wall time, and (b) submit → running latency, daemon up.

(a) Four commands are timed as whole processes, interleaved round by round so that a
noisy stretch of the VM hits all alike: the CLI ``vq submit -- true`` (which captures
the submitting environment), the same with ``--export NONE`` (no capture: the cost of
the capture), the interpreter floor ``<venv python> -I -c 'import json, socket'`` and
``tsp true`` on a private task-spooler with 2 slots.

(b) In-process, one job at a time: ``t0 = time.time()`` just before
``Client.call("submit", ...)``, then the spec file is polled until the job is terminal.
submit → claim is the spec's ``started_at`` (written when the daemon claims the job,
before the launch); submit → command started is the collector's receipt ``started_at``
(stamped just before it forks the command).
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from common import (
    PYTHON,
    VQ,
    Figure,
    Result,
    StateRoot,
    Target,
    TspQueue,
    find_tsp,
    scaled,
    time_process,
)
from vq.domain.states import TERMINAL_NAMES

SUBMIT_RUNS = 60
SUBMIT_WARMUPS = 5
LATENCY_JOBS = 100
LATENCY_WARMUPS = 5
JOB_TIMEOUT_SECONDS = 30.0
POLL_SECONDS = 0.002

TERMINAL = TERMINAL_NAMES


def submit_cli() -> list[Result]:
    runs = scaled(SUBMIT_RUNS, minimum=5)
    warmups = SUBMIT_WARMUPS
    floor_argv = [PYTHON, "-I", "-c", "import json, socket"]
    tsp = find_tsp()
    vq_ms: list[float] = []
    none_ms: list[float] = []
    floor_ms: list[float] = []
    tsp_ms: list[float] = []
    with StateRoot("submit") as state, TspQueue(tsp or "tsp", "submit") as queue:
        state.start_daemon()
        vq_argv = [VQ, "submit", "--", "true"]  # captures the whole environment (ALL)
        none_argv = [VQ, "submit", "--export", "NONE", "--", "true"]  # captures nothing
        tsp_argv = [tsp or "tsp", "true"]
        if tsp:
            queue.start(slots=2)
        for i in range(warmups + runs):
            keep = i >= warmups
            sample = time_process(vq_argv, state.env) * 1000
            if keep:
                vq_ms.append(sample)
            sample = time_process(none_argv, state.env) * 1000
            if keep:
                none_ms.append(sample)
            sample = time_process(floor_argv, state.env) * 1000
            if keep:
                floor_ms.append(sample)
            if tsp:
                sample = time_process(tsp_argv, queue.env) * 1000
                if keep:
                    tsp_ms.append(sample)
        jobs = state.client().call("list", {})["jobs"]
    vq_fig = Figure("vq submit -- true", "ms", vq_ms)
    results = [
        Result(
            "submit_cli",
            "(a) CLI `vq submit -- true`, daemon up",
            vq_fig,
            Figure("python -I -c 'import json, socket'", "ms", floor_ms),
            Target("≤ 2.5× floor", "ratio", 2.5),
            extra={"runs": runs, "warmups": warmups, "jobs_accepted": len(jobs)},
        ),
        Result(
            "submit_cli_env_capture",
            "(a) environment capture: `vq submit -- true` vs `--export NONE`",
            vq_fig,
            Figure("vq submit --export NONE -- true", "ms", none_ms),
            Target("≤ 1.1× without capture", "ratio", 1.1),
            extra={"environment_variables": len(state.env)},
        ),
    ]
    if tsp:
        results.append(
            Result(
                "submit_cli_vs_tsp",
                "(a) CLI `vq submit -- true` vs `tsp true`",
                vq_fig,
                Figure("tsp true (2 slots)", "ms", tsp_ms),
                extra={"tsp": tsp, "note": "informational: a C client, no durable spec"},
            )
        )
    else:
        results.append(
            Result(
                "submit_cli_vs_tsp",
                "(a) CLI `vq submit -- true` vs `tsp true`",
                vq_fig,
                error="task-spooler not found (run scripts/install-bench-deps.sh)",
            )
        )
    return results


def _iso(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def _wait_terminal(spec_path: Path, deadline: float) -> dict[str, Any]:
    while True:
        try:
            spec: dict[str, Any] = json.loads(spec_path.read_bytes())
        except (OSError, ValueError):
            spec = {}
        if spec.get("state") in TERMINAL:
            return spec
        if time.monotonic() > deadline:
            raise RuntimeError(f"{spec_path.name} not terminal after {JOB_TIMEOUT_SECONDS}s")
        time.sleep(POLL_SECONDS)


def latency() -> list[Result]:
    jobs = scaled(LATENCY_JOBS, minimum=10)
    claim_ms: list[float] = []
    start_ms: list[float] = []
    rpc_ms: list[float] = []
    done_ms: list[float] = []
    with StateRoot("latency") as state:
        state.start_daemon()
        client = state.client()
        paths = state.paths
        for i in range(LATENCY_WARMUPS + jobs):
            t0 = time.time()
            p0 = time.perf_counter()
            answer = client.call("submit", {"command": ["true"]})
            p1 = time.perf_counter()
            job_id = answer["id"]
            spec = _wait_terminal(paths.spec(job_id), time.monotonic() + JOB_TIMEOUT_SECONDS)
            p2 = time.perf_counter()
            if spec["state"] != "COMPLETED":
                raise RuntimeError(f"job {job_id} ended {spec['state']}: {spec}")
            receipt = json.loads(paths.resource_usage(job_id).read_bytes())
            if i < LATENCY_WARMUPS:
                continue
            claim_ms.append((_iso(spec["started_at"]) - t0) * 1000)
            start_ms.append((_iso(receipt["started_at"]) - t0) * 1000)
            rpc_ms.append((p1 - p0) * 1000)
            done_ms.append((p2 - p0) * 1000)
    claim = Figure("submit → spec started_at", "ms", claim_ms, show_p95=True)
    started = Figure("submit → receipt started_at", "ms", start_ms, show_p95=True)
    extra = {
        "jobs": jobs,
        "warmups": LATENCY_WARMUPS,
        "submit_rpc_round_trip_ms": Figure("rpc", "ms", rpc_ms).stats,
        "submit_to_completed_seen_ms": Figure("done", "ms", done_ms).stats,
        "poll_interval_ms": POLL_SECONDS * 1000,
    }
    return [
        Result("latency_claim", "(b) submit → claimed (spec started_at)", claim, extra=extra),
        Result(
            "latency_start",
            "(b) submit → command started (receipt)",
            started,
            target=Target("median ≤ 25 ms", "value", 25.0),
            extra=extra,
        ),
    ]


def run() -> list[Result]:
    return [*submit_cli(), *latency()]
