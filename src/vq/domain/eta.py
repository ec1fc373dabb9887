"""When would a pending job start? A small simulation of local admission. Pure.

The queue is replayed forward in time: every running job frees its reservation when its
expected remaining time has passed, and at each such moment the pending jobs are started
in admission order wherever they fit the caps (skipping those that do not, as
:func:`vq.domain.admission.plan_dispatch` does). The job's start time in that replay is
its estimate.

Durations come from what is known, in this order:

* a declared wall time (``--wall-time``): the job cannot run longer (pauses aside), so a
  running job's remaining time is the wall time minus its active time so far, and a
  pending job's run is its wall time. These are limits, so the estimate leans late;
* otherwise the run history: a pending job runs the median of recent runs; a running job
  that has run ``e`` seconds runs on for the median of ``r - e`` over the recent runs
  ``r`` longer than ``e`` (none longer: unknown);
* otherwise unknown. A job whose start depends on an unknown end gets no estimate, and
  :class:`Estimate` says which job it waits for and why.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from vq.domain.admission import Caps, effective_mem_mb

__all__ = ["Estimate", "Queued", "Running", "estimate_start", "remaining_from_history"]

#: How a duration was known: a declared wall time, the run history, or not at all.
WALL, HISTORY = "declared wall time", "dispatch history"


@dataclass(frozen=True)
class Running:
    """A running (or suspended) job: its reservation and expected remaining seconds."""

    job_id: str
    cpus: int
    mem_mb: int | None
    remaining: float | None  # None: unknown
    source: str | None = None  # WALL or HISTORY
    why_unknown: str = ""


@dataclass(frozen=True)
class Queued:
    """A pending job (ahead of the one estimated, in admission order, or that job)."""

    job_id: str
    cpus: int
    mem_mb: int | None
    duration: float | None  # None: unknown
    source: str | None = None
    why_unknown: str = ""


@dataclass(frozen=True)
class Estimate:
    """Seconds from now until the job starts (None: unknown), what it rests on
    (``sources``: WALL and/or HISTORY; empty when it starts at once) and, when unknown,
    one line saying why."""

    seconds: float | None
    sources: frozenset[str] = field(default_factory=frozenset)
    why_unknown: str = ""


def remaining_from_history(elapsed: float, runs: Sequence[float]) -> float | None:
    """Expected remaining seconds of a job that has run ``elapsed`` seconds, from recent
    run times ``runs``: the median of ``r - elapsed`` over the runs longer than it."""
    longer = [r - elapsed for r in runs if r > elapsed]
    return float(statistics.median(longer)) if longer else None


def _fits(cpus: int, mem: int, used: tuple[int, int, int], caps: Caps) -> bool:
    jobs, used_cpus, used_mem = used
    if caps.max_jobs is not None and jobs + 1 > caps.max_jobs:
        return False
    if caps.max_cpus is not None and used_cpus + cpus > caps.max_cpus:
        return False
    return caps.max_mem_mb is None or used_mem + mem <= caps.max_mem_mb


def estimate_start(
    running: Sequence[Running], ahead: Sequence[Queued], job: Queued, caps: Caps
) -> Estimate:
    """When ``job`` would start after the ``ahead`` jobs (admission order) under ``caps``.

    Jobs that can never fit the caps must not be passed. ``job.duration`` is unused.
    """
    # (end time, cpus, memory, what is known about the end)
    active: list[tuple[float, int, int, str | None, str]] = [
        (
            math.inf if r.remaining is None else max(0.0, r.remaining),
            r.cpus,
            effective_mem_mb(r.mem_mb, caps),
            r.source,
            r.why_unknown,
        )
        for r in running
    ]
    queue = [*ahead, job]
    sources: set[str] = set()
    now = 0.0
    while True:
        used = (
            len(active),
            sum(a[1] for a in active),
            sum(a[2] for a in active),
        )
        for item in list(queue):
            memory = effective_mem_mb(item.mem_mb, caps)
            if caps.max_jobs is not None and used[0] >= caps.max_jobs:
                break
            if not _fits(item.cpus, memory, used, caps):
                continue
            if item is job:
                return Estimate(now, frozenset(sources) if now > 0 else frozenset())
            end = math.inf if item.duration is None else now + item.duration
            active.append((end, item.cpus, memory, item.source, item.why_unknown))
            used = (used[0] + 1, used[1] + item.cpus, used[2] + memory)
            queue.remove(item)
        finite = [a for a in active if a[0] != math.inf]
        if not finite:
            blocker = next((a for a in active if a[0] == math.inf), None)
            why = blocker[4] if blocker is not None else "it cannot fit the caps"
            return Estimate(None, frozenset(sources), why)
        now = min(a[0] for a in finite)
        sources.update(a[3] for a in finite if a[0] <= now and a[3])
        active = [a for a in active if a[0] > now]
