"""The overview's queue chart data (vq.web.pages.views.queue_over_time) on hand-made rows.

Each row carries only what the listing gives: state and the three timestamps. The clock
is fixed (``NOW``), so every bucket can be checked exactly.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from vq.web.pages.views import queue_over_time

NOW = datetime(2026, 3, 10, 12, 40, tzinfo=UTC)


def at(minutes_ago: float) -> str:
    return (NOW - timedelta(minutes=minutes_ago)).isoformat()


def row(
    state: str, submitted: float, started: float | None = None, finished: float | None = None
) -> dict[str, Any]:
    return {
        "state": state,
        "submitted_at": at(submitted),
        "started_at": at(started) if started is not None else None,
        "finished_at": at(finished) if finished is not None else None,
    }


def value_at(chart: dict[str, Any], key: str, minutes_ago: float) -> int:
    """The bucket of ``key`` that holds the instant ``minutes_ago``."""
    moment = (NOW - timedelta(minutes=minutes_ago)).timestamp()
    starts = chart["t"][:-1]
    index = max(i for i, start in enumerate(starts) if start <= moment)
    return int(chart[key][index])


def test_a_running_a_pending_and_finished_jobs() -> None:
    rows = [
        row("RUNNING", submitted=120, started=100),  # still running
        row("PENDING", submitted=50),  # still waiting
        row("COMPLETED", submitted=300, started=290, finished=200),
        row("FAILED", submitted=70, started=65, finished=62),
        row("KILLED", submitted=400, finished=380),  # killed while pending, never ran
    ]
    chart = queue_over_time(rows, NOW)

    assert chart["t"][-1] == NOW.timestamp()
    assert all(b - a <= 15 * 60 for a, b in zip(chart["t"], chart["t"][1:], strict=False))
    assert chart["t"][0] <= (NOW - timedelta(hours=24)).timestamp() < chart["t"][1]
    assert datetime.fromtimestamp(chart["t"][1], UTC).minute % 15 == 0  # clock-aligned
    assert len(chart["running"]) == len(chart["pending"]) == len(chart["t"])

    assert (chart["now_running"], chart["now_pending"]) == (1, 1)
    assert value_at(chart, "running", 90) == 1  # only the running one
    assert value_at(chart, "running", 64) == 2  # plus the failed one, 3 minutes long
    assert value_at(chart, "running", 250) == 1  # the completed one
    assert value_at(chart, "pending", 390) == 1  # the killed one, while it waited
    assert value_at(chart, "pending", 110) == 1  # the running one before it started
    assert value_at(chart, "running", 600) == 0
    assert value_at(chart, "pending", 600) == 0
    assert chart["peak_running"] == 2

    assert len(chart["hours_t"]) == len(chart["completed"]) == 24
    assert chart["hours_t"][-1] == datetime(2026, 3, 10, 12, 30, tzinfo=UTC).timestamp()
    assert chart["ended"] == {"completed": 1, "failed": 2}
    assert chart["completed"][-4] == 1  # 09:20 falls in the 09:00 hour
    assert chart["failed"][-2] == 1  # 11:38, the 11:00 hour
    assert chart["failed"][-7] == 1  # 06:20, the 06:00 hour
    assert sum(chart["completed"]) + sum(chart["failed"]) == 3


def test_a_job_shorter_than_a_bucket_still_shows_and_sequential_jobs_do_not_stack() -> None:
    rows = [
        row("COMPLETED", submitted=44, started=44, finished=43.9),  # six seconds
        row("COMPLETED", submitted=43, started=43, finished=42),  # after it, same bucket
    ]
    chart = queue_over_time(rows, NOW)
    assert value_at(chart, "running", 43.5) == 1
    assert chart["peak_running"] == 1
    assert chart["now_running"] == 0


def test_a_retry_waiting_counts_as_pending_and_old_jobs_fall_outside() -> None:
    rows = [
        row("PENDING", submitted=30, started=20),  # a retry waits; earlier end unknown
        row("COMPLETED", submitted=3000, started=2990, finished=2000),  # days ago
        row("SUSPENDED", submitted=10, started=5),
    ]
    chart = queue_over_time(rows, NOW)
    assert (chart["now_running"], chart["now_pending"]) == (1, 1)
    assert chart["ended"] == {"completed": 0, "failed": 0}
    assert chart["peak_pending"] == 2  # the retry and the suspended one, 10-5 min ago


def test_no_rows_gives_zero_series() -> None:
    chart = queue_over_time([], NOW)
    assert set(chart["running"]) == {0} and set(chart["pending"]) == {0}
    assert chart["peak_running"] == chart["peak_pending"] == 0
    assert sum(chart["completed"]) == sum(chart["failed"]) == 0
