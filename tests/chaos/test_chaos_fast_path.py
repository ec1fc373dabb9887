"""Chaos on the fast path: kill -9 of the daemon, its fork server and collectors while
short jobs drain two at a time (claims group-committed, slots turning over every few
milliseconds) and while a swarm (``--array``, ``--max-parallel 2``) runs.

Same invariants as :mod:`tests.chaos.test_chaos`: nothing acknowledged is lost, no job
runs twice, ABORTED only without an exit marker (:func:`tests.chaos.harness.verify`).
The bounded runs stay well under a minute on an idle machine; the soak is ``make soak``.
Reproduce a run with ``VQ_CHAOS_SEED=<seed>``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.chaos.harness import ChaosPlan, format_report, run_chaos, verify
from tests.chaos.test_chaos import _seed
from tests.conftest import Vq, processes_with_env, wait_until


def _fast_drain(jobs: int, kills: int) -> ChaosPlan:
    return ChaosPlan(
        jobs=jobs,
        daemon_kills=kills,
        seed=_seed(),
        collector_kills=max(3, kills // 2),
        graceful_restarts=1,
        max_jobs=2,
        max_sleep=0.02,
        long_share=0.02,
        long_sleep=1.0,
        backlog=48,
        drain_base=45.0,
        drain_per_job=0.1,
    )


def _swarm(arrays: int, size: int, kills: int) -> ChaosPlan:
    return ChaosPlan(
        jobs=arrays,
        array_size=size,
        daemon_kills=kills,
        seed=_seed(),
        collector_kills=max(3, kills // 2),
        graceful_restarts=1,
        max_jobs=2,
        max_sleep=0.05,
        long_share=0.0,
        backlog=2 * size,
        drain_base=45.0,
        drain_per_job=0.1 * size,
    )


def _run(vq: Vq, tmp_path: Path, plan: ChaosPlan) -> dict[str, Any]:
    print(f"chaos: {plan.describe()} — reproduce with VQ_CHAOS_SEED={plan.seed}", flush=True)
    log_path = tmp_path / "chaos.log"
    try:
        result = verify(run_chaos(vq, tmp_path / "ledger", plan, log_path))
    except Exception as exc:
        exc.add_note(f"chaos run {plan.describe()}: reproduce with VQ_CHAOS_SEED={plan.seed}")
        exc.add_note(f"chaos log: {log_path}; daemon log: {vq.root / 'daemon.log'}")
        raise
    print("chaos summary: " + json.dumps(result.summary, indent=1), flush=True)
    tail = log_path.read_text().splitlines()[-40:] if log_path.exists() else []
    assert not result.problems, format_report(result, tail)
    wait_until(lambda: not processes_with_env(f"VQ_STATE_DIR={vq.root}"), timeout=15)
    summary = result.summary
    assert summary["submitted"] == plan.jobs * plan.array_size
    assert summary["daemon_kills"] >= plan.daemon_kills
    return summary


@pytest.mark.timeout(180)
def test_chaos_fast_drain_bounded(vq: Vq, tmp_path: Path) -> None:
    summary = _run(vq, tmp_path, _fast_drain(jobs=120, kills=5))
    assert summary["completed"] >= 1


@pytest.mark.timeout(180)
def test_chaos_swarm_bounded(vq: Vq, tmp_path: Path) -> None:
    summary = _run(vq, tmp_path, _swarm(arrays=6, size=20, kills=4))
    assert summary["completed"] >= 1


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_chaos_fast_drain_soak(vq: Vq, tmp_path: Path) -> None:
    _run(vq, tmp_path, _fast_drain(jobs=2000, kills=100))


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_chaos_swarm_soak(vq: Vq, tmp_path: Path) -> None:
    _run(vq, tmp_path, _swarm(arrays=50, size=40, kills=50))
