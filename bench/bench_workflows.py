"""(i) submitting a 1,000-element array through the CLI; (j) draining dependency graphs.

(i) ``vq submit --array 0-999 --not-before 1h -- true`` timed as a whole process, 5 runs,
each on a fresh state root: with a daemon up (``vq daemon start --max-jobs 1
--max-cpus 1``; ``--not-before 1h`` keeps every element PENDING, so nothing runs during
the measurement) and, informational, with no daemon (the CLI writes the specs itself).
The two modes run interleaved, one round at a time. After each run (not timed) the
printed ids and the PENDING specs are counted.

(j) Two queues of the same 1,000 ``true`` jobs, written in-process with no daemon (not
timed): (A) independent jobs, and (B) a layered DAG, 10 layers of 100 jobs where every
job of layer k > 0 depends (``depends_on``) on 2 jobs of layer k - 1 drawn with a fixed
seed. Each queue is drained exactly like (c): the clock starts when ``vq daemon start
--max-jobs 2`` is invoked and stops at the first poll that sees every spec COMPLETED
(polling as in ``bench_drain._Poller``). The row reports B / A. At full scale the drains
run A, B, B, A and each side's figure is the mean of its two drains, so a drift of the
machine's speed over the run hits both alike. Informational: a chain of 200 jobs
(``chain=200``: each segment depends on the previous one) vs 200 independent jobs, per
job, both with 2 slots (a chain can only ever use one of them), plus how long a chain
segment waits between its predecessor's COMPLETED and its own claim.
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import time
from datetime import datetime, timedelta
from typing import Any

from bench_drain import DRAIN_TIMEOUT_SECONDS, POLL_SECONDS, _breakdown, _cpu_seconds, _Poller
from common import VQ, Figure, Result, StateRoot, Target, run_checked, scaled

ARRAY_ELEMENTS = 1000
ARRAY_RUNS = 5
SUBMIT_TIMEOUT_SECONDS = 120.0

GRAPH_JOBS = 1000
GRAPH_LAYERS = 10
GRAPH_FAN_IN = 2
GRAPH_SEED = 20240611
GRAPH_ROUNDS = 2  # A, B, B, A at full scale
CHAIN_JOBS = 200


def _iso(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


# --- (i) array submit ---------------------------------------------------------------------
def _start_daemon(state: StateRoot, *caps: str) -> dict[str, Any]:
    """``vq daemon start --json`` with extra cap options; ``state`` stops it on exit."""
    try:
        proc = run_checked([VQ, "daemon", "start", "--json", *caps], state.env, timeout=180.0)
    except Exception:
        state._adopt_recorded_pid()
        raise
    answer: dict[str, Any] = json.loads(proc.stdout)
    state.daemon_pid = int(answer["pid"])
    return answer


def _timed_submit(argv: list[str], env: dict[str, str]) -> tuple[float, list[str]]:
    """Seconds from spawn to reap of ``argv`` (must exit 0), and its stdout lines."""
    start = time.perf_counter()
    proc = subprocess.run(
        argv,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=SUBMIT_TIMEOUT_SECONDS,
        check=False,
    )
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.decode(errors='replace')}"
        )
    return elapsed, proc.stdout.decode().split()


def _pending_on_disk(state: StateRoot) -> int:
    from vq.store.specs import SpecStore

    scan = SpecStore(state.paths).scan()
    return sum(1 for spec in scan.specs.values() if spec.state.value == "PENDING")


def _array_once(n: int, argv: list[str], *, daemon: bool) -> tuple[float, dict[str, Any]]:
    with StateRoot("array-daemon" if daemon else "array-disk") as state:
        if daemon:
            _start_daemon(state, "--max-jobs", "1", "--max-cpus", "1")
        elapsed, ids = _timed_submit(argv, state.env)
        if len(ids) != n or len(set(ids)) != n:
            raise RuntimeError(f"vq submit --array printed {len(ids)} ids, expected {n}")
        pending = _pending_on_disk(state)
        if pending != n:
            raise RuntimeError(f"{pending} of {n} array specs are PENDING, expected all")
        extra: dict[str, Any] = {}
        if daemon:
            # The same array again through the RPC alone (no CLI process), for comparison.
            from vq.protocol.messages import SubmitParams

            params = SubmitParams(
                command=["true"],
                array=list(range(n)),
                not_before=datetime.now().astimezone() + timedelta(hours=1),
            ).model_dump(mode="json")
            t0 = time.perf_counter()
            state.client(timeout=SUBMIT_TIMEOUT_SECONDS).call("submit", params)
            extra["rpc_only_s"] = time.perf_counter() - t0
    return elapsed, extra


def array_submit() -> list[Result]:
    n = scaled(ARRAY_ELEMENTS, minimum=200)
    runs = scaled(ARRAY_RUNS, minimum=3)
    argv = [VQ, "submit", "--array", f"0-{n - 1}", "--not-before", "1h", "--", "true"]
    daemon_s: list[float] = []
    disk_s: list[float] = []
    rpc_s: list[float] = []
    for _ in range(runs):
        elapsed, extra = _array_once(n, argv, daemon=True)
        daemon_s.append(elapsed)
        rpc_s.append(extra["rpc_only_s"])
        elapsed, _ = _array_once(n, argv, daemon=False)
        disk_s.append(elapsed)
    extra = {
        "elements": n,
        "runs": runs,
        "argv": argv[1:],
        "daemon_caps": "--max-jobs 1 --max-cpus 1",
        "daemon_up_s": Figure("cli", "s", daemon_s).stats,
        "no_daemon_s": Figure("cli", "s", disk_s).stats,
        "rpc_only_same_array_again_s": Figure("rpc", "s", rpc_s).stats,
    }
    per_spec = statistics.median(daemon_s) / n * 1000
    return [
        Result(
            "array_submit_daemon",
            f"(i) CLI `vq submit --array 0-{n - 1}`, daemon up",
            Figure(
                f"vq submit --array 0-{n - 1} --not-before 1h",
                "s",
                daemon_s,
                note=f"{per_spec:.2f} ms/element",
            ),
            target=Target("median < 2 s", "value", 2.0, strict=True),
            extra=extra,
        ),
        Result(
            "array_submit_disk",
            f"(i) CLI `vq submit --array 0-{n - 1}`, no daemon",
            Figure(
                f"vq submit --array 0-{n - 1} --not-before 1h (CLI writes)",
                "s",
                disk_s,
                note=f"{statistics.median(disk_s) / n * 1000:.2f} ms/element",
            ),
            extra=extra,
        ),
    ]


# --- (j) dependency graphs -----------------------------------------------------------------
def _create_independent(state: StateRoot, n: int) -> list[str]:
    from bench_drain import _create_pending

    return _create_pending(state, n)


def _create_layered(state: StateRoot, n: int, layers: int, fan_in: int, seed: int) -> list[str]:
    """``layers`` layers of ``n // layers`` jobs; each job after layer 0 depends on
    ``fan_in`` distinct jobs of the layer before, drawn with ``seed``."""
    from vq.domain.admission import Caps
    from vq.protocol.messages import SubmitParams
    from vq.services.context import ServiceContext
    from vq.services.submit import submit

    ctx = ServiceContext(state.paths, Caps())
    rng = random.Random(seed)
    width = n // layers
    ids: list[str] = []
    previous: list[str] = []
    for _ in range(layers):
        layer = []
        for _ in range(width):
            after = rng.sample(previous, fan_in) if previous else []
            params = SubmitParams(command=["true"], depends_on=after)
            layer.append(submit(ctx, params).spec.id)
        ids.extend(layer)
        previous = layer
    return ids


def _create_chain(state: StateRoot, n: int) -> list[str]:
    from vq.domain.admission import Caps
    from vq.protocol.messages import SubmitParams
    from vq.services.context import ServiceContext
    from vq.services.submit import submit

    ctx = ServiceContext(state.paths, Caps())
    result = submit(ctx, SubmitParams(command=["true"], chain=n))
    return [spec.id for spec in sorted(result.specs, key=lambda s: s.chain_index or 0)]


def _handoffs_ms(state: StateRoot, ids: list[str]) -> dict[str, Any] | None:
    """For every job with predecessors: its claim minus the latest predecessor's finish."""
    specs = {job_id: json.loads(state.paths.spec(job_id).read_bytes()) for job_id in ids}
    gaps = [
        (_iso(spec["started_at"]) - max(_iso(specs[d]["finished_at"]) for d in deps)) * 1000
        for spec in specs.values()
        if (deps := spec.get("depends_on"))
    ]
    return Figure("gap", "ms", gaps).stats if gaps else None


def _drain(label: str, create: Any, max_jobs: int = 2) -> tuple[float, dict[str, Any]]:
    """Create the jobs with no daemon (not timed), then time the drain like (c)."""
    with StateRoot(label) as state:
        setup = time.perf_counter()
        ids: list[str] = create(state)
        setup = time.perf_counter() - setup
        n = len(ids)
        poller = _Poller(state, ids)
        polls = 0
        wall_invoke = time.time()
        t0 = time.perf_counter()
        answer = state.start_daemon(max_jobs=max_jobs)
        ready = time.perf_counter() - t0
        cpu_at_ready = _cpu_seconds(int(answer["pid"]))
        deadline = time.monotonic() + DRAIN_TIMEOUT_SECONDS
        while True:
            poller.poll()
            polls += 1
            if poller.done:
                break
            if time.monotonic() > deadline:
                left = n - poller.cursor
                raise RuntimeError(f"{label}: {left} jobs unfinished after the timeout")
            time.sleep(POLL_SECONDS)
        elapsed = time.perf_counter() - t0
        cpu = _cpu_seconds(int(answer["pid"]))
        failed = [(ids[i], s) for i, s in enumerate(poller.ended) if s != "COMPLETED"]
        if failed:
            raise RuntimeError(f"{label}: {len(failed)} jobs did not complete: {failed[:5]}")
        extra = {
            "jobs": n,
            "drain_s": elapsed,
            "jobs_per_second": n / elapsed,
            "setup_seconds_not_timed": setup,
            "invoke_to_daemon_ready_s": ready,
            "polls": polls,
            "cpu_seconds_invoke_to_done": cpu,
            "cpu_seconds_ready_to_done": {k: cpu[k] - cpu_at_ready[k] for k in cpu},
            "predecessor_completed_to_claim_ms": _handoffs_ms(state, ids),
            **_breakdown(state, ids, wall_invoke),
        }
    return elapsed, extra


def graph_drain() -> list[Result]:
    n = scaled(GRAPH_JOBS, minimum=100)
    layers = GRAPH_LAYERS
    n -= n % layers
    rounds = scaled(GRAPH_ROUNDS, minimum=1)
    chain_n = scaled(CHAIN_JOBS, minimum=20)

    def independent(state: StateRoot) -> list[str]:
        return _create_independent(state, n)

    def layered(state: StateRoot) -> list[str]:
        return _create_layered(state, n, layers, GRAPH_FAN_IN, GRAPH_SEED)

    a_s: list[float] = []
    b_s: list[float] = []
    a_extra: list[dict[str, Any]] = []
    b_extra: list[dict[str, Any]] = []
    for i in range(rounds):
        order = [("a", independent), ("b", layered)]
        if i % 2:
            order.reverse()  # A, B, then B, A: linear drift cancels out
        for side, create in order:
            elapsed, extra = _drain(f"graph-{side}", create)
            (a_s if side == "a" else b_s).append(elapsed)
            (a_extra if side == "a" else b_extra).append(extra)

    chain_s, chain_extra = _drain("chain", lambda state: _create_chain(state, chain_n))
    flat_s, flat_extra = _drain("chain-flat", lambda state: _create_independent(state, chain_n))

    def mean_figure(label: str, samples: list[float], extras: list[dict[str, Any]]) -> Figure:
        figure = Figure(label, "s", [statistics.fmean(samples)])
        figure.note = f"{n / figure.value:.0f} jobs/s"
        if len(samples) > 1:
            figure.note += "\n" + " / ".join(f"{s:.2f}" for s in samples) + " s"
        daemon_cpu = statistics.fmean(e["cpu_seconds_ready_to_done"]["daemon"] for e in extras)
        figure.note += f"\ndaemon CPU {daemon_cpu:.2f} s"
        return figure

    graph = mean_figure(f"DAG {layers}×{n // layers}, {GRAPH_FAN_IN} deps each", b_s, b_extra)
    flat = mean_figure(f"{n} independent jobs", a_s, a_extra)
    chain_per_job = chain_s / chain_n * 1000
    flat_per_job = flat_s / chain_n * 1000
    gap = chain_extra["predecessor_completed_to_claim_ms"]
    return [
        Result(
            "graph_drain",
            f"(j) drain a {n}-job dependency DAG vs {n} independent, 2 slots",
            graph,
            flat,
            Target("≤ 1.2× independent", "ratio", 1.2),
            extra={
                "jobs": n,
                "layers": layers,
                "fan_in": GRAPH_FAN_IN,
                "seed": GRAPH_SEED,
                "rounds": rounds,
                "order": "A, B, B, A" if rounds > 1 else "A, B",
                "independent": a_extra,
                "dag": b_extra,
            },
        ),
        Result(
            "chain_drain",
            f"(j) drain a {chain_n}-job chain vs {chain_n} independent, per job, 2 slots",
            Figure(
                f"chain={chain_n}, per job",
                "ms",
                [chain_per_job],
                note=f"{chain_s:.2f} s total"
                + (f"\nhand-off {gap['median']:.1f} ms med" if gap else ""),
            ),
            Figure(
                f"{chain_n} independent, per job",
                "ms",
                [flat_per_job],
                note=f"{flat_s:.2f} s total",
            ),
            extra={
                "jobs": chain_n,
                "note": "a chain runs one job at a time, so it can use only one of the 2 slots",
                "chain": chain_extra,
                "independent": flat_extra,
            },
        ),
    ]
