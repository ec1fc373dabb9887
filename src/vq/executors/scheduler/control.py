"""Pause and resume of a lane job: ``scontrol hold``/``release`` (``qhold``/``qrls``).

Called by the pause service on its own thread (never the daemon loop), so the one
read-only poll and the scheduler mutation may block. Rules (§7.3):

* only a job the scheduler shows as still waiting can be held; a running one is refused
  with a hint *before* anything is written;
* the pause service writes SUSPENDED (resume: RUNNING) first; when the scheduler then
  refuses the hold (release), the exact inverse write restores the spec and the caller
  gets a :class:`~vq.errors.Conflict`;
* when the answer is lost (a transport failure), the intended state stays and
  ``scheduler_state`` says ``hold_outcome_unknown`` / ``release_outcome_unknown``:
  the next poll shows what the scheduler did, and the opposite verb undoes it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from vq.dialects import ControlAction, SchedulerPhase, StatusReport
from vq.domain.spec import JobSpec
from vq.errors import Conflict, TransportError, VqError

if TYPE_CHECKING:
    from .lane import SchedulerLane

__all__ = ["check_pausable", "hold_or_release"]

log = logging.getLogger(__name__)

_WAITING = (SchedulerPhase.QUEUED, SchedulerPhase.HELD)


def check_pausable(lane: SchedulerLane, spec: JobSpec) -> None:
    scheduler_id = spec.scheduler_job_id
    if scheduler_id is None:
        raise Conflict(f"job {spec.id} is still being submitted", hint="try again in a moment")
    try:
        report = lane.remote.status([scheduler_id])
    except TransportError as exc:
        raise Conflict(
            f"job {spec.id}: the scheduler on {lane.name} did not answer ({exc.message})",
            hint="try again later; nothing was changed",
        ) from exc
    seen = report.observed.get(scheduler_id) if isinstance(report, StatusReport) else None
    if seen is None:
        raise Conflict(
            f"job {spec.id}: the scheduler's state of job {scheduler_id} is unknown",
            hint="try again after the next poll; nothing was changed",
        )
    if seen.phase not in _WAITING:
        raise Conflict(
            f"job {spec.id} is {seen.raw_state} on {lane.name}; only a job still queued "
            "can be paused (held)",
            hint=f"`vq kill {spec.id}` stops it; a running scheduler job cannot be suspended",
        )


def hold_or_release(lane: SchedulerLane, job_id: str, action: ControlAction) -> bool:
    """Send the hold/release for ``job_id``; True when the scheduler accepted it."""
    spec = lane.ctx.store.read(job_id)
    scheduler_id = spec.scheduler_job_id
    if scheduler_id is None:
        return False
    try:
        outcome = lane.remote.control(action, scheduler_id)
    except TransportError as exc:
        state = f"{action}_outcome_unknown"
        lane.forget_observation(job_id)
        lane.lifecycle.record_scheduler(job_id, {"scheduler_state": state})
        log.warning("lane %s: %s of %s unknown: %s", lane.name, action, job_id, exc.message)
        return False
    if outcome.kind == "done":
        lane.forget_observation(job_id)
        lane.lifecycle.record_scheduler(
            job_id, {"scheduler_state": "held" if action == "hold" else "queued"}
        )
        return True
    # Refused: the exact inverse of the write the pause service made.
    try:
        if action == "hold":
            lane.lifecycle.resume(job_id)
        else:
            lane.lifecycle.pause(job_id, spec.paused_by or "operator", started=lane.started)
    except VqError as exc:
        log.error(
            "lane %s: job %s not restored after a refused %s: %s",
            lane.name,
            job_id,
            action,
            exc.message,
        )
    raise Conflict(
        f"job {job_id}: the scheduler refused the {action} ({outcome.kind}"
        + (f": {outcome.detail}" if outcome.detail else "")
        + "); the job was left as it was",
        hint="`vq status` shows its state",
    )
