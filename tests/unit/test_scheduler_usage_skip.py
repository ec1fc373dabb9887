"""A lane job cancelled before its batch script ever ran costs no accounting query after
its end; one that ran (its script's first write came back) is asked about as before.
A real lane over the local runner; its worker's queue is the evidence (no sleeps)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from vq.domain.states import JobState
from vq.executors.scheduler.jobs import LaneJob
from vq.executors.scheduler.lane import SchedulerLane
from vq.executors.scheduler.ports import LaneContext
from vq.paths import StatePaths
from vq.transport.local import LocalRunner

from .test_scheduler_stage_submit import _lane

NOW = datetime(2026, 1, 1, tzinfo=UTC)


class EndingLifecycle:
    """The lifecycle port's ending half, keeping what it is told."""

    def __init__(self) -> None:
        self.verdicts: list[tuple[str, JobState]] = []

    def record_scheduler(self, job_id: str, fields: dict[str, Any], **_: Any) -> None:
        pass

    def scheduler_verdict(self, job_id: str, state: JobState, *_: Any) -> None:
        self.verdicts.append((job_id, state))

    def finish_attempt(self, job_id: str, exit_code: int | None) -> None:
        raise AssertionError("a job with no marker has no ordinary ending")

    def ended(self, job_id: str) -> None:
        pass


class NoSpecs:
    def read(self, job_id: str) -> Any:
        raise AssertionError("the ending must not read specs")

    def list_ids(self) -> list[str]:
        return []


@pytest.fixture
def lane(tmp_path: Path) -> Iterator[tuple[SchedulerLane, EndingLifecycle, StatePaths]]:
    """A lane whose worker never runs a call (``close`` first): what it was given stays
    counted in ``in_flight``."""
    paths = StatePaths(tmp_path / "state")
    lifecycle = EndingLifecycle()
    built = SchedulerLane(
        _lane(tmp_path / "scratch"),
        LaneContext(paths, NoSpecs(), lambda: NOW),
        lifecycle,  # type: ignore[arg-type]
        LocalRunner(),
        pending=lambda name: [],
        call_soon=lambda call: None,
        monotonic=lambda: 100.0,
    )
    built.close()  # the worker stops before anything given to it runs
    yield built, lifecycle, paths


def _ended_while_queued(paths: StatePaths, *, script_ran: bool) -> LaneJob:
    meta = paths.meta_dir("j1")
    meta.mkdir(parents=True)
    if script_ran:
        (meta / "scheduler-job-id").write_text("7\n")
    job = LaneJob("j1", "copying", "7", submitted_at=NOW)
    job.end = (JobState.ABORTED_BY_QUEUE, "CANCELLED")
    return job


def test_a_job_cancelled_before_it_started_asks_no_usage(
    lane: tuple[SchedulerLane, EndingLifecycle, StatePaths],
) -> None:
    built, lifecycle, paths = lane
    job = _ended_while_queued(paths, script_ran=False)
    built.jobs.track(job)
    built.observation.finish(job, artifacts=True)
    assert lifecycle.verdicts == [("j1", JobState.ABORTED_BY_QUEUE)]
    assert built._worker.in_flight == 0 and built.jobs.later_due() == []
    assert not paths.samples("j1").exists()


def test_a_job_whose_script_ran_is_asked_about(
    lane: tuple[SchedulerLane, EndingLifecycle, StatePaths],
) -> None:
    built, lifecycle, paths = lane
    job = _ended_while_queued(paths, script_ran=True)
    built.jobs.track(job)
    built.observation.finish(job, artifacts=True)
    assert lifecycle.verdicts == [("j1", JobState.ABORTED_BY_QUEUE)]
    assert built._worker.in_flight == 1  # the one sacct query


def test_without_the_workspace_back_the_usage_is_still_asked_for(
    lane: tuple[SchedulerLane, EndingLifecycle, StatePaths],
) -> None:
    built, _, paths = lane
    job = _ended_while_queued(paths, script_ran=False)
    built.jobs.track(job)
    built.observation.finish(job, artifacts=False)  # copy-back failed: the evidence is unknown
    assert built._worker.in_flight == 1
