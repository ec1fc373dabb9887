"""An undelivered pause is undone only while the spec still records that very pause."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from vq.domain.spec import JobSpec
from vq.domain.states import JobState
from vq.services.lifecycle_decisions import decide_pause, decide_pause_undelivered

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _running() -> JobSpec:
    return JobSpec(
        id="0123456789ab",
        job_name="j",
        submitted_at=T0,
        command=["true"],
        cpus=1,
        state=JobState.RUNNING,
        started_at=T0,
        pgid=4242,
    )


def _paused(at: datetime) -> JobSpec:
    spec = decide_pause(_running(), now=at, now_monotonic=10.0, by="operator", started=bool)
    assert spec is not None
    return spec


def test_the_pause_written_is_undone_without_counting_pause_time() -> None:
    paused = _paused(T0 + timedelta(seconds=5))
    undone = decide_pause_undelivered(
        paused.model_copy(deep=True), now=T0 + timedelta(seconds=6), paused_at=paused.paused_at
    )
    assert undone is not None and undone.state is JobState.RUNNING
    assert (undone.paused_at, undone.paused_by, undone.paused_seconds_total) == (None, None, 0.0)


def test_a_later_pause_or_another_state_stays() -> None:
    later = _paused(T0 + timedelta(seconds=9))
    assert decide_pause_undelivered(later, now=T0, paused_at=T0 + timedelta(seconds=5)) is None
    assert decide_pause_undelivered(_running(), now=T0, paused_at=None) is None
