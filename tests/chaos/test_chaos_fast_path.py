"""Chaos on the fast path: kill -9 of the daemon, its fork server and collectors while
short jobs drain two at a time (claims group-committed, slots turning over every few
milliseconds) and while a swarm (``--array``, ``--max-parallel 2``) runs.

Same invariants as :mod:`tests.chaos.test_chaos`: nothing acknowledged is lost, no job
runs twice, ABORTED only without an exit marker (:func:`tests.chaos.harness.verify`).
The bounded runs stay well under a minute on an idle machine; the soak is ``make soak``.
The bounded runs draw from fixed seeds, the soaks from fresh ones; reproduce a run with
``VQ_CHAOS_SEED=<seed>``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.harness import ChaosPlan, run_checked, seed_from_env
from tests.conftest import Vq


def _fast_drain(jobs: int, kills: int, seed: int | None = None) -> ChaosPlan:
    return ChaosPlan(
        jobs=jobs,
        daemon_kills=kills,
        seed=seed_from_env(fixed=seed),
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


def _swarm(arrays: int, size: int, kills: int, seed: int | None = None) -> ChaosPlan:
    return ChaosPlan(
        jobs=arrays,
        array_size=size,
        daemon_kills=kills,
        seed=seed_from_env(fixed=seed),
        collector_kills=max(3, kills // 2),
        graceful_restarts=1,
        max_jobs=2,
        max_sleep=0.05,
        long_share=0.0,
        backlog=2 * size,
        drain_base=45.0,
        drain_per_job=0.1 * size,
    )


@pytest.mark.timeout(180)
def test_chaos_fast_drain_bounded(vq: Vq, tmp_path: Path) -> None:
    summary = run_checked(vq, tmp_path, _fast_drain(jobs=60, kills=4, seed=6004))
    assert summary["completed"] >= 1


@pytest.mark.timeout(180)
def test_chaos_swarm_bounded(vq: Vq, tmp_path: Path) -> None:
    summary = run_checked(vq, tmp_path, _swarm(arrays=6, size=20, kills=4, seed=620))
    assert summary["completed"] >= 1


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_chaos_fast_drain_soak(vq: Vq, tmp_path: Path) -> None:
    run_checked(vq, tmp_path, _fast_drain(jobs=2000, kills=100))


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_chaos_swarm_soak(vq: Vq, tmp_path: Path) -> None:
    run_checked(vq, tmp_path, _swarm(arrays=50, size=40, kills=50))
