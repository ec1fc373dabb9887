"""The chaos oracle itself: :func:`verify` must catch each violation it claims to catch.

No daemon here: hand-made evidence, one planted violation per case.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.chaos.harness import ChaosPlan, ChaosResult, job_command, parse_ledger, verify

A, B, C = "aaaaaaaaaaaa", "bbbbbbbbbbbb", "cccccccccccc"


def _spec(job_id: str, state: str, **extra: Any) -> dict[str, Any]:
    return {"id": job_id, "state": state, "retry_count": 0, **extra}


def _clean() -> ChaosResult:
    """A: completed; B: collector killed -> FAILED; C: claimed, never launched -> aborted."""
    return ChaosResult(
        plan=ChaosPlan(jobs=3, daemon_kills=1, seed=7),
        acknowledged=[A, B, C],
        collector_killed={B},
        counts=Counter(daemon_kills=1, collector_kills=1),
        specs={
            A: _spec(A, "COMPLETED", exit_code=0),
            B: _spec(B, "FAILED", failure_reason="the job's collector (pid 9) was killed"),
            C: _spec(C, "ABORTED_BY_QUEUE", failure_reason="outcome unknown"),
        },
        markers={A: "0\n", B: None, C: None},
        ledger={A: Counter(start=1, end=1), B: Counter(start=1)},
        ledger_garbage=[],
        stray_pids=[],
        anomalies=[],
        recovery=Counter(),
        elapsed=1.0,
    )


def test_clean_evidence_passes() -> None:
    result = verify(_clean())
    assert result.problems == []
    assert result.summary["completed"] == 1
    assert result.summary["failed"] == 1
    assert result.summary["aborted"] == 1
    assert result.summary["aborted_never_started"] == 1


@pytest.mark.parametrize(
    ("plant", "expected"),
    [
        (lambda r: r.specs.pop(A), "spec is missing"),
        (lambda r: r.specs[A].update(state="RUNNING"), "not terminal"),
        (lambda r: r.ledger[A].update(start=1), "ran 2 times"),
        (lambda r: r.ledger.__setitem__("dddddddddddd", Counter(start=1)), "has no spec"),
        (lambda r: r.ledger[A].update(end=-1), "COMPLETED with 1 starts and 0 ends"),
        (lambda r: r.markers.__setitem__(A, None), "COMPLETED with exit_code 0"),
        (lambda r: r.collector_killed.clear(), "collector was not killed"),
        (lambda r: r.specs[B].update(failure_reason="launch failed"), "not naming"),
        (lambda r: r.markers.__setitem__(C, "0\n"), "exit marker exists"),
        (lambda r: r.specs[C].update(failure_reason=None), "without a recorded reason"),
        (lambda r: r.specs[A].update(state="KILLED"), "unexpected state KILLED"),
        (lambda r: r.specs[A].update(retry_count=1), "retried"),
        (lambda r: r.stray_pids.append(4242), "survive the final stop"),
        (lambda r: r.ledger_garbage.append("junk"), "unparsable"),
        (lambda r: r.anomalies.append("daemon found dead"), "anomaly: daemon found dead"),
    ],
)
def test_each_planted_violation_is_reported(plant: Any, expected: str) -> None:
    result = _clean()
    plant(result)
    problems = verify(result).problems
    assert any(expected in p for p in problems), problems


def test_ledger_round_trip(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    ledger.write_text(f"{A} start\n{A} end\n{B} start\npartial")
    seen, garbage = parse_ledger(ledger)
    assert seen == {A: Counter(start=1, end=1), B: Counter(start=1)}
    assert garbage == ["partial"]
    argv = job_command(tmp_path / "it's here", 0.125)
    assert argv[:2] == ["sh", "-c"] and "sleep 0.12" in argv[2] and "'\"'\"'" in argv[2]
