"""The cluster phase of a lane job, in the words every human view shows (§3.3, §8.2).

A job submitted to a scheduler lane stays RUNNING from vq's claim until its outcome is
written: the state includes cluster-queued time, and ``scheduler_state`` carries the
finer phase. A view that printed only RUNNING would say a job waiting in Slurm's queue
runs. So ``vq list``, ``vq status``, ``vq top`` and the web console show, for a lane job
that is RUNNING or SUSPENDED, its :func:`lane_phase` (one word of :data:`PHASES`) and
:func:`phase_label` (the phase with the scheduler's own reason, e.g.
``queued (slurm: Priority)``).

Its elapsed time counts from the cluster's start (:func:`lane_elapsed`): a queued lane
job has none; a running or ended one counts from ``scheduler_started_at`` (what the lane
recorded of the cluster's start), never from vq's claim.

Pure: no I/O, no clock (``now`` is passed in).
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

__all__ = ["PHASES", "lane_elapsed", "lane_phase", "phase_label"]

#: The phase words, in lifecycle order: vq stages and submits the job, the cluster
#: queues (or holds) it, runs it, and vq copies the workspace back.
PHASES: Final = (
    "submitting",
    "queued",
    "held",
    "running",
    "finishing",
    "cancelling",
    "in doubt",
)

#: ``scheduler_state`` (as the lanes write it) → phase word.
_PHASE_OF: Final = {
    None: "submitting",
    "claimed": "submitting",
    "staging": "submitting",
    "stage_retry": "submitting",
    "submitting": "submitting",
    "submit_retry": "submitting",
    "looking_up": "submitting",
    "not_submitted": "submitting",
    "queued": "queued",
    "held": "held",
    "release_outcome_unknown": "held",
    "hold_outcome_unknown": "queued",
    "running": "running",
    "finishing": "finishing",
    "copying": "finishing",
    "ended": "finishing",
    "artifacts_unavailable": "finishing",
    "cancel_pending": "cancelling",
    "reattach_failed": "in doubt",
}

#: Phases in which the cluster has not started the job (no running elapsed time).
_WAITING: Final = frozenset({"submitting", "queued", "held"})


def lane_phase(state: str, scheduler_target: str | None, scheduler_state: str | None) -> str | None:
    """The phase word of a lane job that is RUNNING or SUSPENDED (``state`` by its
    UPPERCASE name); None for any other job (not a lane job, PENDING, or ended).
    A SUSPENDED lane job is one vq held on the cluster: ``held``. An unknown
    ``scheduler_state`` is shown as it is (a newer lane's word is not hidden)."""
    if scheduler_target is None or state not in ("RUNNING", "SUSPENDED"):
        return None
    if state == "SUSPENDED":
        return "held"
    return _PHASE_OF.get(scheduler_state, scheduler_state or "submitting")


def phase_label(
    phase: str | None,
    queued_reason: str | None,
    dialect: str | None = None,
    *,
    scheduler_state: str | None = None,
) -> str | None:
    """The STATE text of a lane job in phase ``phase`` (None: not one, show the state).

    A waiting job names the scheduler's own reason (``scheduler_queued_reason``, set only
    while it waits) with the scheduler's name: ``queued (slurm: Priority)``,
    ``held (slurm: JobHeldUser)``. A submission vq is retrying carries vq's own reason
    in the same field: ``submitting (retry: …)``."""
    if phase is None:
        return None
    if not queued_reason:
        return phase
    if phase == "submitting":
        return f"submitting (retry: {queued_reason})"
    if phase in ("queued", "held"):
        return f"{phase} ({dialect}: {queued_reason})" if dialect else f"{phase} ({queued_reason})"
    return phase


def lane_elapsed(
    phase: str | None,
    scheduler_started_at: datetime | None,
    finished_at: datetime | None,
    now: datetime,
) -> float | None:
    """Seconds since the cluster started a lane job (to its end once it ended), None
    while the cluster has not started it (``phase`` waiting) or when its start is not
    known. ``phase`` None: an ended (or PENDING) lane job, whose elapsed is counted from
    the recorded cluster start to ``finished_at``."""
    if phase in _WAITING or scheduler_started_at is None:
        return None
    end = finished_at or now
    return max(0.0, (end - scheduler_started_at).total_seconds())
