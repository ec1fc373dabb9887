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
  unknown (no daemon answered) and 0 only when both inputs were read.
* Usage is accounting (§6.3): wall = ``finished_at`` (now while RUNNING/SUSPENDED) −
  ``started_at`` − paused time; CPU-hours = wall × declared ``cpus``. Only the latest
  attempt of a retried job is on record (``started_at`` is re-stamped per attempt).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from vq.domain.admission import Caps, capacity_overages, effective_mem_mb
from vq.domain.eta import HISTORY, WALL, Queued, Running, estimate_start, remaining_from_history
from vq.domain.spec import JobSpec
from vq.domain.states import ACTIVE, TERMINAL, JobState
from vq.services.query import list_row

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

Row = Mapping[str, Any]

#: "Recent" terminal counts in ``vq overview`` cover this window of ``finished_at``.
RECENT_WINDOW = timedelta(hours=24)
#: ``vq usage --by`` keys.
USAGE_GROUPINGS = ("tag", "name", "day", "state", "total")
#: How many of the most recently finished runs the queue ETA takes its median from.
ETA_HISTORY = 20

_ACTIVE = frozenset(state.value for state in ACTIVE)
_TERMINAL = frozenset(state.value for state in TERMINAL)
_PENDING = JobState.PENDING.value
_RUNNING = JobState.RUNNING.value
#: The ``now`` given where the result provably does not depend on it.
_NO_CLOCK = datetime.fromtimestamp(0, UTC)


def report_row(spec: JobSpec, caps: Caps | None, now: datetime) -> dict[str, Any]:
    """:func:`list_row` plus the fields usage and ETA need (pauses, not_before, target)."""
    row = list_row(spec, caps, now)
    row["paused_seconds_total"] = spec.paused_seconds_total
    row["paused_at"] = spec.paused_at.isoformat() if spec.paused_at else None
    row["not_before"] = spec.not_before.isoformat() if spec.not_before else None
    row["scheduler_target"] = spec.scheduler_target
    return row


def caps_from_ping(ping: Mapping[str, Any]) -> Caps:
    """The daemon's advertised caps from its ``ping`` answer."""
    raw = ping.get("caps") or {}
    return Caps(
        max_jobs=raw.get("max_jobs"),
        max_cpus=raw.get("max_cpus"),
        max_mem_mb=raw.get("max_mem_mb"),
        default_job_mem_mb=raw.get("default_job_mem_mb"),
    )


def _time(row: Row, key: str) -> datetime | None:
    value = row.get(key)
    if value is None or value == "":
        return None
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _local(row: Row) -> bool:
    return not row.get("scheduler_target")


def state_counts(rows: Iterable[Row]) -> dict[str, int]:
    """Jobs per state, every :class:`JobState` present (zeros included), in §3.3 order."""
    counts = {state.value: 0 for state in JobState}
    for row in rows:
        counts[row["state"]] = counts.get(row["state"], 0) + 1
    return counts


def is_over_capacity(row: Row, caps: Caps | None) -> bool | None:
    """Tri-state like ``pending_over_capacity``: null unless a PENDING local job with caps."""
    if caps is None or row["state"] != _PENDING or not _local(row):
        return None
    return bool(capacity_overages(int(row["cpus"]), row.get("mem_mb"), caps))


def _reservation(rows: Iterable[Row], caps: Caps | None) -> dict[str, int]:
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
    daemon: Mapping[str, Any] | None = None,
    quarantined: int = 0,
) -> dict[str, Any]:
    """The ``vq overview --json`` snapshot (schema in ``docs/json.md``).

    ``caps`` and ``daemon`` come from the daemon's ``ping`` (None when none answered).
    """
    rows = list(rows)
    recent_since = now - RECENT_WINDOW
    recent = {state.value: 0 for state in JobState if state.value in _TERMINAL}
    for row in rows:
        finished = _time(row, "finished_at")
        if row["state"] in _TERMINAL and finished is not None and finished >= recent_since:
            recent[row["state"]] += 1
    local = [row for row in rows if _local(row)]
    over = [is_over_capacity(row, caps) for row in local if row["state"] == _PENDING]
    return {
        "generated_at": now.isoformat(),
        "daemon": {
            "running": daemon is not None,
            "pid": (daemon or {}).get("pid"),
            "version": (daemon or {}).get("version"),
            "started_at": (daemon or {}).get("started_at"),
            "uptime_seconds": (daemon or {}).get("uptime_seconds"),
            "cgroup_mode": (daemon or {}).get("cgroup_mode"),
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
        "reserved": _reservation((r for r in local if r["state"] in _ACTIVE), caps),
        "capacity": None
        if caps is None
        else {
            "max_jobs": caps.max_jobs,
            "max_cpus": caps.max_cpus,
            "max_mem_mb": caps.max_mem_mb,
            "default_job_mem_mb": caps.default_job_mem_mb,
        },
        "pending_cpus": sum(int(r["cpus"]) for r in rows if r["state"] == _PENDING),
        "over_capacity_pending_jobs": None if caps is None else sum(1 for o in over if o),
    }


def active_seconds(row: Row, now: datetime) -> float | None:
    """Wall time of the latest attempt minus pauses; None if it never ran or has no end.

    The end is ``finished_at``, or ``now`` while the job is RUNNING or SUSPENDED; an
    ongoing pause (``paused_at``) is excluded too.
    """
    started = _time(row, "started_at")
    if started is None:
        return None
    finished = _time(row, "finished_at")
    if row["state"] in _ACTIVE:
        end = now
    elif row["state"] in _TERMINAL and finished is not None:
        end = finished
    else:  # PENDING again (a retry waits): the previous attempt's end is not on record
        return None
    paused = float(row.get("paused_seconds_total") or 0.0)
    paused_at = _time(row, "paused_at")
    if paused_at is not None and row["state"] in _ACTIVE:
        paused += max(0.0, (end - paused_at).total_seconds())
    return max(0.0, (end - started).total_seconds() - paused)


def _usage_keys(row: Row, by: str) -> list[str | None]:
    if by == "tag":
        return list(dict.fromkeys(row.get("tags") or [])) or [None]
    if by == "name":
        return [row.get("job_name")]
    if by == "state":
        return [row["state"]]
    if by == "total":
        return ["total"]
    started = _time(row, "started_at")
    return [started.astimezone(UTC).date().isoformat() if started else None]


def _totals(jobs: int, wall: float, cpu: float) -> dict[str, Any]:
    return {"jobs": jobs, "wall_hours": round(wall / 3600, 6), "cpu_hours": round(cpu / 3600, 6)}


def build_usage(
    rows: Iterable[Row], by: str, since: datetime | None, now: datetime
) -> dict[str, Any]:
    """The ``vq usage --json`` report: wall- and CPU-hours per group of jobs that ran.

    A job counts when it has a measurable attempt (see :func:`active_seconds`) that
    started at or after ``since``. With ``by="tag"`` a job counts under each of its tags
    (untagged jobs under key null), so group sums can exceed ``total``, which counts
    every job once. ``by="day"`` groups by the UTC date of ``started_at``; ``by="total"``
    puts every job in one group keyed ``"total"`` (none when no job ran). Groups are
    sorted by CPU-hours, largest first (``day``: chronologically).
    """
    if by not in USAGE_GROUPINGS:
        raise ValueError(f"unknown usage grouping {by!r}")
    groups: dict[str | None, list[float]] = {}
    total = [0.0, 0.0, 0.0]
    for row in rows:
        started = _time(row, "started_at")
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
    items = [{"key": key, **_totals(int(a[0]), a[1], a[2])} for key, a in groups.items()]
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


def _order_key(row: Row) -> tuple[int, datetime, int, str]:
    """Admission order (:func:`vq.domain.admission.order_key`) of a row."""
    submitted = _time(row, "submitted_at") or datetime.max.replace(tzinfo=UTC)
    index = row.get("array_index")
    if index is None:
        index = row.get("chain_index")
    return (-int(row.get("priority") or 0), submitted, int(index or 0), str(row["id"]))


def _slots(row: Row, caps: Caps) -> int | None:
    limits: list[int] = []
    if caps.max_jobs is not None:
        limits.append(caps.max_jobs)
    if caps.max_cpus is not None:
        limits.append(max(1, caps.max_cpus // max(1, int(row["cpus"]))))
    memory = effective_mem_mb(row.get("mem_mb"), caps)
    if caps.max_mem_mb is not None and memory > 0:
        limits.append(max(1, caps.max_mem_mb // memory))
    return min(limits) if limits else None


def _running(row: Row, runs: tuple[float, ...], now: datetime) -> Running:
    """A running row as the ETA simulation sees it: its expected remaining time."""
    job_id, cpus, mem = str(row["id"]), int(row["cpus"]), row.get("mem_mb")
    if row["state"] == JobState.SUSPENDED.value:
        return Running(job_id, cpus, mem, None, why_unknown=f"running job {job_id} is paused")
    elapsed = active_seconds(row, now) or 0.0
    wall = row.get("wall_time_seconds")
    if wall:
        return Running(job_id, cpus, mem, max(0.0, float(wall) - elapsed), WALL)
    remaining = remaining_from_history(elapsed, runs)
    if remaining is not None:
        return Running(job_id, cpus, mem, remaining, HISTORY)
    why = (
        f"running job {job_id} declares no wall time and no job has finished yet to time it"
        if not runs
        else f"running job {job_id} declares no wall time and has run longer than any of "
        f"the last {len(runs)} finished jobs"
    )
    return Running(job_id, cpus, mem, None, why_unknown=why)


def _queued(row: Row, median: float | None) -> Queued:
    job_id, cpus, mem = str(row["id"]), int(row["cpus"]), row.get("mem_mb")
    wall = row.get("wall_time_seconds")
    if wall:
        return Queued(job_id, cpus, mem, float(wall), WALL)
    if median is not None:
        return Queued(job_id, cpus, mem, median, HISTORY)
    why = f"job {job_id} ahead declares no wall time and no job has finished yet to time it"
    return Queued(job_id, cpus, mem, None, why_unknown=why)


def queue_eta(
    pending_row: Row,
    all_rows: Iterable[Row],
    caps: Caps | None,
    now: datetime,
    basis: EtaBasis | None = None,
) -> dict[str, Any]:
    """Estimated seconds until ``pending_row`` starts (:mod:`vq.domain.eta`).

    Returns ``{"eta_seconds": float | None, "basis": str, "median_run_seconds",
    "jobs_ahead", "slots"}``. ``eta_seconds`` is null with ``basis``:

    * ``"over configured capacity"`` — the job exceeds a base cap and cannot dispatch
      (§4.3: its ETA is *unavailable*);
    * ``"unknown: <why>"`` — the job waits for the end of a job whose duration nobody
      knows: a running job without ``--wall-time`` that has run longer than every recent
      run (or with no finished job to go by), a paused job, or a job ahead without
      ``--wall-time`` and no history;
    * ``"capacity unknown"`` (no caps), ``"not pending"``, ``"scheduler job"``.

    Otherwise ``basis`` says what the estimate rests on: ``"free capacity"`` (it fits
    now), ``"declared wall time"``, ``"dispatch history"``, or both joined by "and".
    The replay starts the PENDING local jobs ahead of it in admission order (priority,
    submission time, array index, id) that fit the caps, and each running job ends after
    its remaining declared wall time (a limit: the estimate leans late) or, without one,
    its expected remaining time from the :data:`ETA_HISTORY` most recent runs. Their
    ``not_before`` and dependencies, and retries, are ignored; the job's own
    ``not_before`` is a lower bound. ``slots`` is the tightest of ``max_jobs``,
    ``max_cpus // cpus`` and ``max_mem_mb // memory`` for a job of this size.

    ``basis``: :func:`eta_basis` of ``all_rows`` and ``caps``, when the caller keeps one
    (it depends on the rows and caps only, not on ``now``); ``all_rows`` is then unused.
    """
    result: dict[str, Any] = {
        "eta_seconds": None,
        "basis": "",
        "median_run_seconds": None,
        "jobs_ahead": None,
        "slots": None,
    }
    if pending_row["state"] != _PENDING:
        return {**result, "basis": "not pending"}
    if not _local(pending_row):
        return {**result, "basis": "scheduler job"}
    if caps is None:
        return {**result, "basis": "capacity unknown"}
    if is_over_capacity(pending_row, caps):
        return {**result, "basis": "over configured capacity"}
    if basis is None:
        basis = eta_basis(all_rows, caps)
    mine = _order_key(pending_row)
    own_id = str(pending_row["id"])
    ahead_rows = [row for key, row in basis.pending if key < mine and str(row["id"]) != own_id]
    estimate = estimate_start(
        [_running(row, basis.runs, now) for row in basis.running_rows],
        [_queued(row, basis.median) for row in ahead_rows],
        _queued(pending_row, basis.median),
        caps,
    )
    result.update(
        median_run_seconds=basis.median, jobs_ahead=len(ahead_rows), slots=_slots(pending_row, caps)
    )
    if estimate.seconds is None:
        return {**result, "basis": f"unknown: {estimate.why_unknown}"}
    eta = estimate.seconds
    not_before = _time(pending_row, "not_before")
    if not_before is not None:
        eta = max(eta, (not_before - now).total_seconds())
    label = " and ".join(sorted(estimate.sources)) or "free capacity"
    return {**result, "eta_seconds": eta, "basis": label}


@dataclass(frozen=True)
class EtaBasis:
    """What :func:`queue_eta` takes from every row: independent of ``now`` and the job.

    ``median``: the median active run time of the :data:`ETA_HISTORY` most recently
    finished local jobs (None: no history), ``runs`` those run times; ``running``: local
    RUNNING/SUSPENDED jobs, ``running_rows`` their rows; ``pending``: (admission key, row)
    of the local PENDING jobs within the caps, sorted; ``pending_keys`` and
    ``pending_key_of``: their keys, sorted and by job id.
    """

    median: float | None
    running: int
    pending_keys: list[tuple[int, datetime, int, str]]
    pending_key_of: dict[str, tuple[int, datetime, int, str]]
    runs: tuple[float, ...] = ()
    running_rows: tuple[Row, ...] = ()
    pending: tuple[tuple[tuple[int, datetime, int, str], Row], ...] = ()


def eta_basis(all_rows: Iterable[Row], caps: Caps) -> EtaBasis:
    """The :class:`EtaBasis` of ``all_rows`` (report rows of every job) under ``caps``."""
    rows = [row for row in all_rows if _local(row)]
    finished = sorted(
        (row for row in rows if row["state"] in _TERMINAL and _time(row, "finished_at")),
        key=lambda row: _time(row, "finished_at") or datetime.max.replace(tzinfo=UTC),
        reverse=True,
    )
    # Terminal rows: their active time ends at finished_at, whatever the clock says.
    runs = [s for s in (active_seconds(row, _NO_CLOCK) for row in finished) if s is not None]
    recent = tuple(runs[:ETA_HISTORY])
    median = float(statistics.median(recent)) if recent else None
    pending = sorted(
        (
            (_order_key(row), row)
            for row in rows
            if row["state"] == _PENDING and not is_over_capacity(row, caps)
        ),
        key=lambda pair: pair[0],
    )
    key_of = {str(row["id"]): key for key, row in pending}
    running_rows = tuple(row for row in rows if row["state"] in _ACTIVE)
    return EtaBasis(
        median,
        len(running_rows),
        [key for key, _ in pending],
        key_of,
        recent,
        running_rows,
        tuple(pending),
    )
