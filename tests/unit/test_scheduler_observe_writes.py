"""A poll round writes a job's spec only when what the scheduler reports changed (or its
heartbeat is due for a refresh): 1,000 unchanged held jobs cost no spec writes."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from vq.dialects import JobObservation, SchedulerPhase, StatusReport
from vq.executors.scheduler.jobs import LaneJob
from vq.executors.scheduler.lane import SchedulerLane
from vq.executors.scheduler.observe import HEARTBEAT_REFRESH
from vq.executors.scheduler.ports import LaneContext
from vq.paths import StatePaths
from vq.transport.local import LocalRunner

from .test_scheduler_stage_submit import _lane

NOW = datetime(2026, 1, 1, tzinfo=UTC)


class RecordingLifecycle:
    """The lane's lifecycle port, keeping every scheduler-field write it is given."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, dict[str, Any]]] = []

    def record_scheduler(self, job_id: str, fields: dict[str, Any], **_: Any) -> None:
        self.writes.append((job_id, fields))


class NoSpecs:
    def read(self, job_id: str) -> Any:
        raise AssertionError("observation must not read specs")

    def list_ids(self) -> list[str]:
        return []


@pytest.fixture
def lane(tmp_path: Path) -> Iterator[tuple[SchedulerLane, RecordingLifecycle, list[float]]]:
    clock = [100.0]
    lifecycle = RecordingLifecycle()
    ctx = LaneContext(StatePaths(tmp_path), NoSpecs(), lambda: NOW)
    built = SchedulerLane(
        _lane(tmp_path / "scratch"),
        ctx,
        lifecycle,  # type: ignore[arg-type]
        LocalRunner(),
        pending=lambda name: [],
        call_soon=lambda call: call(),
        monotonic=lambda: clock[0],
    )
    yield built, lifecycle, clock
    built.close()


def _held(reason: str = "JobHeldUser") -> JobObservation:
    return JobObservation("7", SchedulerPhase.HELD, "PENDING", queued_reason=reason)


def test_an_unchanged_observation_is_written_once_then_only_on_refresh(
    lane: tuple[SchedulerLane, RecordingLifecycle, list[float]],
) -> None:
    built, lifecycle, clock = lane
    job = LaneJob("j1", "queued", "7")
    built.jobs.track(job)
    built.observation.observe(job, _held(), NOW)
    assert [f["scheduler_state"] for _, f in lifecycle.writes] == ["held"]
    for _ in range(5):  # five more rounds saying the same: nothing written
        clock[0] += 2
        built.observation.observe(job, _held(), NOW)
    assert len(lifecycle.writes) == 1
    clock[0] += HEARTBEAT_REFRESH  # the heartbeat is refreshed at least this often
    built.observation.observe(job, _held(), NOW)
    assert len(lifecycle.writes) == 2 and "last_heartbeat_at" in lifecycle.writes[-1][1]
    built.observation.observe(job, _held("Priority"), NOW)  # a change is written at once
    assert lifecycle.writes[-1][1]["scheduler_queued_reason"] == "Priority"


def test_a_write_outside_observation_makes_the_next_observation_written(
    lane: tuple[SchedulerLane, RecordingLifecycle, list[float]],
) -> None:
    built, lifecycle, _ = lane
    job = LaneJob("j1", "queued", "7")
    built.jobs.track(job)
    built.observation.observe(job, _held(), NOW)
    built.control.forget_observation("j1")  # e.g. a hold whose outcome was lost
    built.observation.observe(job, _held(), NOW)
    assert len(lifecycle.writes) == 2


def test_a_round_asked_before_a_hold_is_not_applied_to_the_held_job(
    lane: tuple[SchedulerLane, RecordingLifecycle, list[float]],
) -> None:
    """A round in flight when a hold lands saw the job still queued: applying it would
    write "queued" over "held" until the next round."""
    built, lifecycle, clock = lane
    job = LaneJob("j1", "queued", "7")
    built.jobs.track(job)
    queued = JobObservation("7", SchedulerPhase.QUEUED, "PENDING", queued_reason="Priority")
    stale = (StatusReport(observed={"7": queued}), {}, 5.0, None)
    asked_at = clock[0]
    clock[0] += 1
    built.control.forget_observation("j1")  # the hold's own write follows this
    built.observation.polled({"7": job}, stale, asked_at)
    assert lifecycle.writes == []
    built.observation.polled(
        {"7": job}, (StatusReport(observed={"7": _held()}), {}, 5.0, None), clock[0] + 1
    )
    assert [f["scheduler_state"] for _, f in lifecycle.writes] == ["held"]
