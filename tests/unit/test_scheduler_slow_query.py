"""A scheduler query that hangs on the login host (a stuck ``squeue``, a controller under
load) is stopped there within the SSH call's deadline: the host answered, so the lane
reads it as a slow scheduler (health ``slow``, the lane backs off), never as a lost host
(``unreachable``). Through the real local runner and real ``timeout``, with a stand-in
``squeue`` on PATH that never answers."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vq.dialects import ParseFailure, dialect_for
from vq.executors.scheduler.jobs import LaneJob
from vq.executors.scheduler.lane import SchedulerLane
from vq.executors.scheduler.ports import LaneContext
from vq.executors.scheduler.remote import LaneRemote
from vq.hosts.health import read_health
from vq.paths import StatePaths
from vq.transport.local import LocalRunner

from .test_scheduler_stage_submit import _lane

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _hanging_runner(tmp_path: Path) -> LocalRunner:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    squeue = bin_dir / "squeue"
    squeue.write_text("#!/bin/sh\nexec sleep 120\n")
    squeue.chmod(0o755)
    return LocalRunner({**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})


def _settings(tmp_path: Path) -> Any:
    # ssh_timeout 1 s: the call's deadline is 5 s, a query may run 2 s on the login host.
    return _lane(tmp_path / "scratch").model_copy(update={"ssh_timeout": 1.0})


def test_a_hung_squeue_is_stopped_on_the_login_host_and_reads_as_timed_out(
    tmp_path: Path,
) -> None:
    remote = LaneRemote(_settings(tmp_path), _hanging_runner(tmp_path), dialect_for("slurm"))
    assert remote.query_limit < remote.deadline
    started = time.monotonic()
    answer = remote.status(["12"])
    assert time.monotonic() - started < remote.deadline
    assert isinstance(answer, ParseFailure)
    assert answer.kind == "timed_out" and "squeue timed out" in answer.detail


class _Lifecycle:
    def record_scheduler(self, job_id: str, fields: dict[str, Any], **_: Any) -> None:
        return None


class _NoSpecs:
    def read(self, job_id: str) -> Any:
        raise AssertionError("a poll reads no spec")

    def list_ids(self) -> list[str]:
        return []


def test_a_poll_round_against_a_hung_squeue_marks_the_lane_slow_not_unreachable(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    answers: list[Any] = []
    lane = SchedulerLane(
        _settings(tmp_path),
        LaneContext(StatePaths(state), _NoSpecs(), lambda: NOW),
        _Lifecycle(),  # type: ignore[arg-type]
        _hanging_runner(tmp_path),
        pending=lambda name: [],
        call_soon=answers.append,  # the worker's answer, applied below on this thread
    )
    try:
        lane.jobs.track(LaneJob("j1", "queued", "12"))
        lane.observation.maybe_poll(lane.monotonic())
        deadline = time.monotonic() + 20
        while not answers and time.monotonic() < deadline:
            time.sleep(0.05)
        assert answers, "the poll never answered"
        answers.pop()()
        health = read_health(state, "cluster")
        assert health.status == "slow", health
        assert "squeue timed out" in (health.last_error or "")
        assert health.consecutive_failures == 0
    finally:
        lane.close()
