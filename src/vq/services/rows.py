"""Report rows: the ``vq list``-shaped mappings the pure reports read, and their helpers.

Pure: no I/O, no clock. A row's timestamps are ISO strings or aware datetimes; rows
without the optional keys of :func:`vq.services.reports.report_row` read with neutral
defaults (``paused_seconds_total`` 0, ``paused_at`` null, ``scheduler_target`` null).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from vq.domain.admission import Caps, capacity_overages
from vq.domain.states import ACTIVE, TERMINAL, JobState

__all__ = [
    "ACTIVE_NAMES",
    "PENDING",
    "TERMINAL_NAMES",
    "Row",
    "active_seconds",
    "is_local",
    "is_over_capacity",
    "time_of",
]

Row = Mapping[str, Any]

ACTIVE_NAMES = frozenset(state.value for state in ACTIVE)
TERMINAL_NAMES = frozenset(state.value for state in TERMINAL)
PENDING = JobState.PENDING.value


def time_of(row: Row, key: str) -> datetime | None:
    """The time at ``key`` as an aware datetime (naive means UTC), or None."""
    value = row.get(key)
    if value is None or value == "":
        return None
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def is_local(row: Row) -> bool:
    """A job of this host's daemon (not a scheduler lane's)."""
    return not row.get("scheduler_target")


def is_over_capacity(row: Row, caps: Caps | None) -> bool | None:
    """Tri-state like ``pending_over_capacity``: null unless a PENDING local job with caps."""
    if caps is None or row["state"] != PENDING or not is_local(row):
        return None
    return bool(capacity_overages(int(row["cpus"]), row.get("mem_mb"), caps))


def active_seconds(row: Row, now: datetime) -> float | None:
    """Wall time of the latest attempt minus pauses; None if it never ran or has no end.

    The end is ``finished_at``, or ``now`` while the job is RUNNING or SUSPENDED; an
    ongoing pause (``paused_at``) is excluded too.
    """
    started = time_of(row, "started_at")
    if started is None:
        return None
    finished = time_of(row, "finished_at")
    if row["state"] in ACTIVE_NAMES:
        end = now
    elif row["state"] in TERMINAL_NAMES and finished is not None:
        end = finished
    else:  # PENDING again (a retry waits): the previous attempt's end is not on record
        return None
    paused = float(row.get("paused_seconds_total") or 0.0)
    paused_at = time_of(row, "paused_at")
    if paused_at is not None and row["state"] in ACTIVE_NAMES:
        paused += max(0.0, (end - paused_at).total_seconds())
    return max(0.0, (end - started).total_seconds() - paused)
