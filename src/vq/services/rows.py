"""Report rows: the ``vq list``-shaped mappings the pure reports read, and their helpers.

Pure: no I/O, no clock. A row's timestamps are ISO strings or aware datetimes; rows
without the optional keys of :func:`vq.services.reports.report_row` read with neutral
defaults (``paused_seconds_total`` 0, ``paused_at`` null, ``scheduler_target`` null).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from vq.domain.admission import Caps, capacity_overages
from vq.domain.states import ACTIVE, TERMINAL, JobState
from vq.protocol.report_answers import LaneUse

__all__ = [
    "ACTIVE_NAMES",
    "PENDING",
    "TERMINAL_NAMES",
    "Row",
    "active_seconds",
    "is_local",
    "is_over_capacity",
    "lane_use",
    "scheduler_seconds",
    "time_of",
]

Row = Mapping[str, Any]

ACTIVE_NAMES = frozenset(state.value for state in ACTIVE)
TERMINAL_NAMES = frozenset(state.value for state in TERMINAL)
PENDING = JobState.PENDING.value
#: The one scheduler phase that confirms a lane job executes (§6.3).
CONFIRMED_PHASE = "running"
#: Lane phases before the cluster started the job: it has used no wall time yet.
_NOT_STARTED_PHASES = frozenset({"submitting", "queued", "held"})


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


def lane_use(rows: Iterable[Row]) -> LaneUse:
    """The RUNNING/SUSPENDED scheduler-lane jobs among ``rows``, split by whether the
    last scheduler phase is exactly ``running`` (confirmed) or anything else."""
    use: LaneUse = {
        "jobs": 0,
        "cpus": 0,
        "running_jobs": 0,
        "running_cpus": 0,
        "unconfirmed_scheduler_jobs": 0,
        "unconfirmed_scheduler_cpus": 0,
    }
    for row in rows:
        if is_local(row) or row["state"] not in ACTIVE_NAMES:
            continue
        cpus = int(row.get("cpus") or 0)
        use["jobs"] += 1
        use["cpus"] += cpus
        if row.get("scheduler_state") == CONFIRMED_PHASE:
            use["running_jobs"] += 1
            use["running_cpus"] += cpus
        else:
            use["unconfirmed_scheduler_jobs"] += 1
            use["unconfirmed_scheduler_cpus"] += cpus
    return use


def scheduler_seconds(row: Row) -> float | None:
    """A lane job's wall time as its scheduler reported it (``scheduler_walltime_used``,
    Slurm's or Torque's ``[D-]HH:MM:SS``), 0 while the cluster has not started it
    (phase submitting, queued or held, nothing reported), else None: not a lane job,
    or nothing reported."""
    if is_local(row):
        return None
    used = row.get("scheduler_walltime_used")
    if isinstance(used, str) and used:
        from vq.dialects._values import slurm_duration_seconds

        seconds = slurm_duration_seconds(used)
        if seconds is not None:
            return float(seconds)
    if row["state"] in ACTIVE_NAMES and row.get("scheduler_state") in _NOT_STARTED_PHASES:
        return 0.0
    return None


def active_seconds(row: Row, now: datetime) -> float | None:
    """Wall time of the latest attempt minus pauses; None if it never ran or has no end.

    A scheduler lane job's wall time is the scheduler's own figure when there is one
    (:func:`scheduler_seconds`; §6.3: the time in the cluster's queue is not run time).
    Otherwise the end is ``finished_at``, or ``now`` while the job is RUNNING or
    SUSPENDED, minus pauses, an ongoing pause (``paused_at``) included.
    """
    started = time_of(row, "started_at")
    if started is None:
        return None
    finished = time_of(row, "finished_at")
    ended = row["state"] in TERMINAL_NAMES and finished is not None
    if row["state"] in ACTIVE_NAMES or ended:
        reported = scheduler_seconds(row)
        if reported is not None:
            return reported
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
