"""Chaos: kill -9 the daemon, its fork server and job collectors under a stream of jobs.

Invariants (§1.2 item 2, §4.4, §4.7): nothing acknowledged is lost, no job runs twice,
every ending is explained (see :func:`tests.chaos.harness.verify`).

Reproduce a run with ``VQ_CHAOS_SEED=<seed>`` (printed at the start of every run and in
every failure). ``VQ_CHAOS_JOBS`` / ``VQ_CHAOS_KILLS`` override the size of a run.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from tests.chaos.harness import ChaosPlan, format_report, run_chaos, verify
from tests.conftest import Vq, processes_with_env, wait_until


def _seed() -> int:
    text = os.environ.get("VQ_CHAOS_SEED")
    return int(text) if text else random.SystemRandom().randrange(2**32)


def _size(name: str, default: int) -> int:
    text = os.environ.get(name)
    return int(text) if text else default


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
    # The harness's own check, repeated with the suite's helper.
    wait_until(lambda: not processes_with_env(f"VQ_STATE_DIR={vq.root}"), timeout=15)
    summary = result.summary
    assert summary["submitted"] == plan.jobs
    assert summary["daemon_kills"] >= plan.daemon_kills
    return summary


@pytest.mark.timeout(300)
def test_chaos_bounded(vq: Vq, tmp_path: Path) -> None:
    plan = ChaosPlan(
        jobs=_size("VQ_CHAOS_JOBS", 200),
        daemon_kills=_size("VQ_CHAOS_KILLS", 20),
        seed=_seed(),
        collector_kills=8,
        graceful_restarts=3,
    )
    summary = _run(vq, tmp_path, plan)
    assert summary["collector_kills"] >= 1


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_chaos_soak(vq: Vq, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    jobs = _size("VQ_CHAOS_JOBS", 2000)
    plan = ChaosPlan(
        jobs=jobs,
        daemon_kills=_size("VQ_CHAOS_KILLS", 200),
        seed=_seed(),
        collector_kills=max(10, jobs // 25),
        graceful_restarts=max(3, jobs // 200),
    )
    summary = _run(vq, tmp_path, plan)
    keys = ["seed", "elapsed_seconds", "submitted", "completed", "failed", "aborted"]
    keys += ["daemon_kills", "collector_kills", "forkserver_kills", "restarts"]
    with capsys.disabled():  # shown by `make soak` even when the run passes
        print(f"\nchaos soak: {json.dumps({key: summary[key] for key in keys})}", flush=True)
        print(f"chaos soak recovery: {json.dumps(summary['recovery'])}", flush=True)
