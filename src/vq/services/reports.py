"""Operator reports (§6.3, §5.1, §4.3): ``vq overview``, ``vq usage`` and the queue ETA.

Pure: no I/O, no clock (``now`` is an argument). Every function takes *rows*, mappings in
the shape of :func:`vq.services.query.list_row` (what ``vq list --json`` and the daemon's
``list`` method return), with timestamps as ISO strings or aware datetimes.
:func:`report_row` adds the optional keys some reports use; rows without them are read
with neutral defaults: ``paused_seconds_total`` 0, ``paused_at`` / ``not_before`` null,
``scheduler_target`` null (a local job).

Contracts:

* Reservations are declared resources, never measurements: a RUNNING or SUSPENDED job
  reserves its ``cpus`` and its effective memory (``mem_mb``, else the daemon's
  ``default_job_mem_mb``, else 0; with unknown caps an undeclared request counts 0).
* ``over_capacity_pending_jobs`` counts PENDING local jobs whose request exceeds a
  configured base cap (``max_cpus``/``max_mem_mb``); it is null whenever the caps are
  unknown (no daemon answered and no last advertised snapshot is readable) and 0 only
  when both inputs were read.
* ``running`` and ``reserved`` are this host's: a scheduler lane's jobs run on a
  cluster and are never in them. ``lanes`` counts those (RUNNING/SUSPENDED), split by
  the last scheduler phase: exactly ``running`` is confirmed execution, any other phase
  is ``unconfirmed_scheduler_jobs``/``_cpus``, which stay in ``pending_cpus`` (§6.3).
* Usage is accounting (§6.3): wall = ``finished_at`` (now while RUNNING/SUSPENDED) −
  ``started_at`` − paused time, except that a lane job's scheduler-reported wall time
  (``scheduler_walltime_used``) is preferred when there is one, so its time in the
  cluster's queue is not charged; CPU-hours = wall × declared ``cpus``. Only the latest
  attempt of a retried job is on record (``started_at`` is re-stamped per attempt).

The queue ETA lives in :mod:`vq.services.queue_eta` and the row helpers in
:mod:`vq.services.rows`; both are re-exported here for the callers that use them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from vq.domain.admission import Caps, effective_mem_mb
from vq.domain.quotas import Holder, OwnerLoad, QuotaPolicy, load_of
from vq.domain.states import JobState
from vq.domain.summary import Listed
from vq.protocol.answers import PingAnswer, ReportRow
from vq.protocol.report_answers import (
    OverviewAnswer,
    OwnerUse,
    Reservation,
    UsageAnswer,
    UsageGroup,
    UsageTotals,
)
from vq.services.query import list_row
from vq.services.queue_eta import ETA_HISTORY, EtaBasis, eta_basis, queue_eta
from vq.services.rows import (
    ACTIVE_NAMES,
    PENDING,
    TERMINAL_NAMES,
    Row,
    active_seconds,
    is_local,
    is_over_capacity,
    lane_use,
    time_of,
)

__all__ = [
    "ETA_HISTORY",
    "RECENT_WINDOW",
    "USAGE_GROUPINGS",
    "EtaBasis",
    "active_seconds",
    "build_overview",
    "build_usage",
    "caps_from_ping",
    "eta_basis",
    "is_over_capacity",
    "queue_eta",
    "report_row",
    "state_counts",
]

#: "Recent" terminal counts in ``vq overview`` cover this window of ``finished_at``.
RECENT_WINDOW = timedelta(hours=24)
#: ``vq usage --by`` keys.
USAGE_GROUPINGS = ("tag", "name", "day", "state", "submitter", "total")
_RUNNING = JobState.RUNNING.value


def report_row(spec: Listed, caps: Caps | None, now: datetime) -> ReportRow:
    """:func:`list_row` plus the fields usage and ETA need (pauses, not_before, and a
    lane job's scheduler-reported wall time: a full spec has it, a summary reads null)."""
    used = getattr(spec, "scheduler_walltime_used", None)
    return {
        **list_row(spec, caps, now),
        "paused_seconds_total": spec.paused_seconds_total,
        "paused_at": spec.paused_at.isoformat() if spec.paused_at else None,
        "not_before": spec.not_before.isoformat() if spec.not_before else None,
        "scheduler_walltime_used": used if isinstance(used, str) else None,
    }


def caps_from_ping(ping: Mapping[str, Any]) -> Caps:
    """The daemon's advertised caps from its ``ping`` answer."""
    raw = ping.get("caps") or {}
    return Caps(
        max_jobs=raw.get("max_jobs"),
        max_cpus=raw.get("max_cpus"),
        max_mem_mb=raw.get("max_mem_mb"),
        default_job_mem_mb=raw.get("default_job_mem_mb"),
    )


def state_counts(rows: Iterable[Row]) -> dict[str, int]:
    """Jobs per state, every :class:`JobState` present (zeros included), in §3.3 order."""
    counts = {state.value: 0 for state in JobState}
    for row in rows:
        counts[row["state"]] = counts.get(row["state"], 0) + 1
    return counts


def _reservation(rows: Iterable[Row], caps: Caps | None) -> Reservation:
    jobs = cpus = mem = 0
    for row in rows:
        jobs += 1
        cpus += int(row["cpus"])
        mem += effective_mem_mb(row.get("mem_mb"), caps or Caps())
    return {"jobs": jobs, "cpus": cpus, "mem_mb": mem}


def build_overview(
    rows: Iterable[Row],
    caps: Caps | None,
    now: datetime,
    daemon: PingAnswer | None = None,
    quarantined: int = 0,
    quotas: QuotaPolicy | None = None,
) -> OverviewAnswer:
    """The ``vq overview --json`` snapshot (schema in ``docs/json.md``).

    ``caps`` and ``daemon`` come from the daemon's ``ping`` (None when none answered);
    ``quotas`` (multi-user mode) adds ``owners``: each owner's holders and quota use.
    """
    rows = list(rows)
    recent_since = now - RECENT_WINDOW
    recent: dict[str, int] = {s.value: 0 for s in JobState if s.value in TERMINAL_NAMES}
    for row in rows:
        finished = time_of(row, "finished_at")
        if row["state"] in TERMINAL_NAMES and finished is not None and finished >= recent_since:
            recent[row["state"]] += 1
    local = [row for row in rows if is_local(row)]
    over = [is_over_capacity(row, caps) for row in local if row["state"] == PENDING]
    lanes = lane_use(rows)
    return {
        "generated_at": now.isoformat(),
        "daemon": {
            "running": daemon is not None,
            "pid": daemon.get("pid") if daemon else None,
            "version": daemon.get("version") if daemon else None,
            "started_at": daemon.get("started_at") if daemon else None,
            "uptime_seconds": daemon.get("uptime_seconds") if daemon else None,
            "cgroup_mode": daemon.get("cgroup_mode") if daemon else None,
        },
        "counts": state_counts(rows),
        "total_jobs": len(rows),
        "quarantined": quarantined,
        "recent_terminal": {
            "window_hours": RECENT_WINDOW.total_seconds() / 3600,
            "since": recent_since.isoformat(),
            "counts": recent,
        },
        "running": _reservation((r for r in local if r["state"] == _RUNNING), caps),
        "reserved": _reservation((r for r in local if r["state"] in ACTIVE_NAMES), caps),
        "capacity": None
        if caps is None
        else {
            "max_jobs": caps.max_jobs,
            "max_cpus": caps.max_cpus,
            "max_mem_mb": caps.max_mem_mb,
            "default_job_mem_mb": caps.default_job_mem_mb,
        },
        # A lane job the scheduler has not confirmed running stays in the pending total
        # (§6.3); ``unconfirmed_scheduler_cpus`` is that subset, never to be added again.
        "pending_cpus": sum(int(r["cpus"]) for r in rows if r["state"] == PENDING)
        + lanes["unconfirmed_scheduler_cpus"],
        "over_capacity_pending_jobs": None if caps is None else sum(1 for o in over if o),
        "owners": None if quotas is None else owner_use(rows, quotas),
        "unconfirmed_scheduler_jobs": lanes["unconfirmed_scheduler_jobs"],
        "unconfirmed_scheduler_cpus": lanes["unconfirmed_scheduler_cpus"],
        "lanes": lanes,
    }


def owner_use(rows: Iterable[Row], quotas: QuotaPolicy) -> list[OwnerUse]:
    """Per owner (the numeric ``submitter``; multi-user mode): the active holders the
    quotas count (running, suspended, reserved; each id once), their CPUs, the owner's
    pending jobs, and the owner's limits (``None``: unlimited), by uid."""
    from vq.services.ownership import owner_of_submitter

    holders: list[Holder] = []
    pending: dict[int, int] = {}
    for row in rows:
        owner = owner_of_submitter(row.get("submitter"))
        if owner is None:
            continue
        if row["state"] in ACTIVE_NAMES:
            holders.append(Holder(owner, str(row["id"]), int(row["cpus"])))
        elif row["state"] == PENDING:
            pending[owner] = pending.get(owner, 0) + 1
    load = load_of(holders)
    owners: list[OwnerUse] = []
    for uid in sorted(set(load) | set(pending)):
        used, limits = load.get(uid, OwnerLoad()), quotas.limits(uid)
        owners.append(
            {
                "uid": uid,
                "holders": used.jobs,
                "cpus": used.cpus,
                "pending": pending.get(uid, 0),
                "max_pending_jobs": limits.max_pending_jobs,
                "max_concurrent_cpus": limits.max_concurrent_cpus,
            }
        )
    return owners


def _usage_keys(row: Row, by: str) -> list[str | None]:
    if by == "tag":
        return list(dict.fromkeys(row.get("tags") or [])) or [None]
    if by == "name":
        return [row.get("job_name")]
    if by == "state":
        return [row["state"]]
    if by == "total":
        return ["total"]
    if by == "submitter":  # multi-user: the owner's numeric uid (admitted specs only)
        return [row.get("submitter")]
    started = time_of(row, "started_at")
    return [started.astimezone(UTC).date().isoformat() if started else None]


def _totals(jobs: int, wall: float, cpu: float) -> UsageTotals:
    return {"jobs": jobs, "wall_hours": round(wall / 3600, 6), "cpu_hours": round(cpu / 3600, 6)}


def build_usage(rows: Iterable[Row], by: str, since: datetime | None, now: datetime) -> UsageAnswer:
    """The ``vq usage --json`` report: wall- and CPU-hours per group of jobs that ran.

    A job counts when it has a measurable attempt (see :func:`active_seconds`) that
    started at or after ``since``. With ``by="tag"`` a job counts under each of its tags
    (untagged jobs under key null), so group sums can exceed ``total``, which counts
    every job once. ``by="submitter"`` groups by the spec's submitter (in multi-user
    mode the owner's uid: only specs whose submitter is their tree's uid are read).
    ``by="day"`` groups by the UTC date of ``started_at``; ``by="total"`` puts every job
    in one group keyed ``"total"`` (none when no job ran). Groups are sorted by
    CPU-hours, largest first (``day``: chronologically).
    """
    if by not in USAGE_GROUPINGS:
        raise ValueError(f"unknown usage grouping {by!r}")
    groups: dict[str | None, list[float]] = {}
    total = [0.0, 0.0, 0.0]
    for row in rows:
        started = time_of(row, "started_at")
        if started is None or (since is not None and started < since):
            continue
        wall = active_seconds(row, now)
        if wall is None:
            continue
        cpu = wall * int(row["cpus"])
        for key in _usage_keys(row, by):
            acc = groups.setdefault(key, [0.0, 0.0, 0.0])
            acc[0] += 1
            acc[1] += wall
            acc[2] += cpu
        total[0] += 1
        total[1] += wall
        total[2] += cpu
    items: list[UsageGroup] = [
        {"key": key, **_totals(int(a[0]), a[1], a[2])} for key, a in groups.items()
    ]
    if by == "day":
        items.sort(key=lambda g: (g["key"] is None, g["key"] or ""))
    else:
        items.sort(key=lambda g: (-g["cpu_hours"], g["key"] is None, str(g["key"] or "")))
    return {
        "by": by,
        "since": since.isoformat() if since else None,
        "generated_at": now.isoformat(),
        "groups": items,
        "total": _totals(int(total[0]), total[1], total[2]),
    }
