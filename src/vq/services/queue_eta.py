"""The queue ETA of a pending job (:func:`queue_eta`), from report rows. Pure.

The replay itself is :func:`vq.domain.eta.estimate_start`; this module turns rows into
its inputs (remaining declared wall time, or run history) and keeps, in
:class:`EtaBasis`, what does not depend on the job or the clock so the daemon can reuse it.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from vq.domain.admission import Caps, effective_mem_mb
from vq.domain.eta import HISTORY, WALL, Queued, Running, estimate_start, remaining_from_history
from vq.domain.states import JobState
from vq.protocol.answers import QueueEta
from vq.services.rows import (
    ACTIVE_NAMES,
    PENDING,
    TERMINAL_NAMES,
    Row,
    active_seconds,
    is_local,
    is_over_capacity,
    time_of,
)

__all__ = ["ETA_HISTORY", "EtaBasis", "eta_basis", "queue_eta", "unavailable_eta"]

#: How many of the most recently finished runs the queue ETA takes its median from.
ETA_HISTORY = 20
#: The ``now`` given where the result provably does not depend on it.
_NO_CLOCK = datetime.fromtimestamp(0, UTC)


def _order_key(row: Row) -> tuple[int, datetime, int, str]:
    """Admission order (:func:`vq.domain.admission.order_key`) of a row."""
    submitted = time_of(row, "submitted_at") or datetime.max.replace(tzinfo=UTC)
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


def unavailable_eta(basis: str) -> QueueEta:
    """A ``queue_eta`` with no estimate, and why (``basis``): a job that cannot start."""
    return {
        "eta_seconds": None,
        "basis": basis,
        "median_run_seconds": None,
        "jobs_ahead": None,
        "slots": None,
    }


def queue_eta(
    pending_row: Row,
    all_rows: Iterable[Row],
    caps: Caps | None,
    now: datetime,
    basis: EtaBasis | None = None,
) -> QueueEta:
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
    result: QueueEta = {
        "eta_seconds": None,
        "basis": "",
        "median_run_seconds": None,
        "jobs_ahead": None,
        "slots": None,
    }
    if pending_row["state"] != PENDING:
        return {**result, "basis": "not pending"}
    if not is_local(pending_row):
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
    result["median_run_seconds"] = basis.median
    result["jobs_ahead"] = len(ahead_rows)
    result["slots"] = _slots(pending_row, caps)
    if estimate.seconds is None:
        return {**result, "basis": f"unknown: {estimate.why_unknown}"}
    eta = estimate.seconds
    not_before = time_of(pending_row, "not_before")
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
    rows = [row for row in all_rows if is_local(row)]
    finished = sorted(
        (row for row in rows if row["state"] in TERMINAL_NAMES and time_of(row, "finished_at")),
        key=lambda row: time_of(row, "finished_at") or datetime.max.replace(tzinfo=UTC),
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
            if row["state"] == PENDING and not is_over_capacity(row, caps)
        ),
        key=lambda pair: pair[0],
    )
    key_of = {str(row["id"]): key for key, row in pending}
    running_rows = tuple(row for row in rows if row["state"] in ACTIVE_NAMES)
    return EtaBasis(
        median,
        len(running_rows),
        [key for key, _ in pending],
        key_of,
        recent,
        running_rows,
        tuple(pending),
    )
