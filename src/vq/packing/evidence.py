"""Scheduler evidence of packed allocations, and what it means for each task (pure).

One accepted attempt is observed by one single-job ``squeue`` (its active row, if any),
one ``sacct --duplicates --name=vqp-<alloc>`` (its accounting records, already filtered
to this identity by :func:`vq.dialects.slurm_alloc.parse_sacct`) and one read of its slot
markers. :func:`attempt_evidence` turns them into one state:

* Accounting anchors the attempt: the records with the receipt's job id. Another job id
  carrying the exact comment is a second allocation of one attempt — ambiguous history,
  so the view is aborted (:class:`~vq.dialects.slurm_alloc.ObservationError`). Another job
  id with an empty comment (a site whose accounting stores no comments cannot tell a
  same-name job apart) is listed as *unattributed* and never adopted. Requeues repeat
  the job id with a later submit time: the latest incarnation owns the accounting
  evidence.
* Without an anchor the state is ``UNKNOWN``, even when ``squeue`` shows an active row
  (accounting may lag; the planner then asks for ``--allow-duplicate-risk``).
* With an anchor, an active queue row is fresher than accounting and wins; otherwise the
  latest incarnation's state stands.

Each task of an attempt (slot = its position in the attempt) is ``SUCCEEDED`` or ``FAILED``
by its marker's exit status. Without a marker, in an allocation that ended, the slot's
own step row (named ``vqp-<alloc>-<slot>``) decides: a step that ended without writing the
marker did not succeed, so ``COMPLETED`` still counts as ``FAILED``, and ``CANCELLED`` or
``FAILED`` stand with the step's exit status. With neither, the task shares a queued,
running, failed or cancelled allocation's state, and is ``UNKNOWN`` otherwise.

A task's ``elapsed_seconds`` is its step's End − Start in accounting (:func:`slot_elapsed`):
the scheduler's own figure of the task's run, never the allocation's time in the queue.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from vq.dialects.slurm_alloc import (
    MAX_FIELD_BYTES,
    MAX_LINES,
    MAX_STREAM_BYTES,
    AccountingRecord,
    ObservationError,
    QueueRow,
    State,
)

__all__ = [
    "ACTIVE",
    "TERMINAL",
    "AttemptEvidence",
    "TaskOutcome",
    "attempt_evidence",
    "parse_markers",
    "slot_elapsed",
]

ACTIVE = frozenset({"QUEUED", "RUNNING"})
TERMINAL = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})
_MARKER = re.compile(r"(\d{1,6})\|(-?\d{1,6})?")


@dataclass(frozen=True)
class TaskOutcome:
    key: str
    slot: int
    state: State
    exit_code: int | None
    #: the slot's step's wall time as accounting reports it (End − Start), when both
    #: times are there: the task's own run, never its allocation's time in the queue
    elapsed_seconds: float | None = None


@dataclass(frozen=True)
class AttemptEvidence:
    """The normalized evidence of one accepted attempt."""

    allocation_id: str
    job_id: str
    state: State
    raw_state: str | None
    exit_code: str | None
    submit: str | None
    start: str | None
    end: str | None
    incarnations: int
    tasks: tuple[TaskOutcome, ...]
    unattributed: tuple[str, ...] = ()


def parse_markers(text: str) -> dict[int, int | None]:
    """``slot|code`` lines (an empty code: the marker exists but is unreadable)."""
    if len(text.encode()) > MAX_STREAM_BYTES:
        raise ObservationError(f"slot markers: output over {MAX_STREAM_BYTES} bytes")
    lines = [line for line in text.split("\n") if line]
    if len(lines) > MAX_LINES:
        raise ObservationError(f"slot markers: more than {MAX_LINES} lines")
    markers: dict[int, int | None] = {}
    for line in lines:
        if len(line) > MAX_FIELD_BYTES:
            raise ObservationError("slot markers: a line over the field bound")
        match = _MARKER.fullmatch(line.strip())
        if match is None:
            raise ObservationError("slot markers: a malformed line")
        slot, code = match.groups()
        markers[int(slot)] = int(code) if code is not None else None
    return markers


def _anchor(
    records: Sequence[AccountingRecord], job_id: str, allocation_id: str
) -> tuple[list[AccountingRecord], list[str]]:
    """(the receipt's incarnations by submit time, unattributed job ids)."""
    exact = f"vq-pack:{allocation_id}"
    duplicates = sorted({r.job_id for r in records if r.job_id != job_id and r.comment == exact})
    if duplicates:
        raise ObservationError(
            f"accounting holds another job ({duplicates[0]}) of allocation {allocation_id} "
            f"besides job {job_id}: ambiguous history"
        )
    unattributed = sorted({r.job_id for r in records} - {job_id})
    return sorted((r for r in records if r.job_id == job_id), key=lambda r: r.submit), unattributed


def _task_state(allocation: State, code: int | None, has_marker: bool) -> State:
    if has_marker:
        return "SUCCEEDED" if code == 0 else "FAILED"
    if allocation in ACTIVE or allocation in ("CANCELLED", "FAILED"):
        return allocation
    return "UNKNOWN"


def _slot_steps(
    record: AccountingRecord | None, allocation_id: str
) -> dict[int, tuple[State, int | None]]:
    """Each slot's latest named step row: (state, exit status) — the evidence when the
    slot's marker is missing (a step killed, out of memory, cancelled)."""
    found: dict[int, tuple[State, int | None]] = {}
    if record is None:
        return found
    prefix = f"vqp-{allocation_id}-"
    for step, name in record.step_names.items():
        if not name.startswith(prefix) or not name[len(prefix) :].isdigit():
            continue
        state, exit_code = record.steps[step]
        code = exit_code.partition(":")[0]
        found[int(name[len(prefix) :])] = (state, int(code) if code.isdigit() else None)
    return found


def _utc(text: str) -> datetime | None:
    """An accounting time (printed under ``TZ=UTC``), or None for Unknown/None."""
    try:
        return datetime.fromisoformat(text).replace(tzinfo=UTC)
    except ValueError:
        return None


def slot_elapsed(record: AccountingRecord | None, allocation_id: str) -> dict[int, float]:
    """Each slot's step wall time (End − Start of its latest named step row), for the
    slots whose step has both times in accounting."""
    found: dict[int, float] = {}
    if record is None:
        return found
    prefix = f"vqp-{allocation_id}-"
    for step, name in record.step_names.items():
        suffix = name[len(prefix) :]
        if not name.startswith(prefix) or not suffix.isdigit():
            continue
        start, end = (_utc(t) for t in record.step_times.get(step, ("Unknown", "Unknown")))
        if start is not None and end is not None and end >= start:
            found[int(suffix)] = (end - start).total_seconds()
    return found


def _task(
    key: str,
    slot: int,
    allocation: State,
    markers: dict[int, int | None],
    steps: dict[int, tuple[State, int | None]],
) -> TaskOutcome:
    if slot in markers:
        return TaskOutcome(key, slot, _task_state(allocation, markers[slot], True), markers[slot])
    if slot in steps and steps[slot][0] in TERMINAL and allocation not in ACTIVE:
        state, code = steps[slot]
        return TaskOutcome(key, slot, "FAILED" if state == "SUCCEEDED" else state, code)
    return TaskOutcome(key, slot, _task_state(allocation, None, False), None)


def attempt_evidence(
    allocation_id: str,
    job_id: str,
    task_keys: Sequence[str],
    queue_row: QueueRow | None,
    records: Sequence[AccountingRecord],
    markers: dict[int, int | None],
) -> AttemptEvidence:
    """One accepted attempt's state and its tasks' outcomes (see the module contract)."""
    if queue_row is not None and queue_row.job_id != job_id:
        raise ObservationError(f"squeue answered job {queue_row.job_id} for job {job_id}")
    incarnations, unattributed = _anchor(records, job_id, allocation_id)
    latest = incarnations[-1] if incarnations else None
    state: State
    raw: str | None
    if latest is None:
        state, raw = "UNKNOWN", queue_row.raw_state if queue_row else None
    elif queue_row is not None and queue_row.state in ACTIVE:
        state, raw = queue_row.state, queue_row.raw_state
    else:
        state, raw = latest.state, latest.raw_state
    steps = _slot_steps(latest, allocation_id)
    walls = slot_elapsed(latest, allocation_id)
    tasks = tuple(
        replace(_task(key, slot, state, markers, steps), elapsed_seconds=walls.get(slot))
        for slot, key in enumerate(task_keys)
    )
    return AttemptEvidence(
        allocation_id=allocation_id,
        job_id=job_id,
        state=state,
        raw_state=raw,
        exit_code=latest.exit_code if latest else None,
        submit=latest.submit if latest else None,
        start=latest.start if latest else None,
        end=latest.end if latest else None,
        incarnations=len(incarnations),
        tasks=tasks,
        unattributed=tuple(unattributed),
    )
