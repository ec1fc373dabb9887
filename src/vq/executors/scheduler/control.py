"""Cancel, hold and release of a lane's scheduler jobs: ``scancel``/``qdel``,
``scontrol hold``/``release`` (``qhold``/``qrls``).

Every method runs on the daemon loop; every scheduler call runs on the lane's worker and
its answer is applied back on the loop. A caller on another thread (the kill and pause
services, on an RPC thread) reaches these methods through the loop's call mechanism and
waits for ``reply``, which the loop calls exactly once with the answer (or the
:class:`~vq.errors.Conflict` to raise).

Rules (§7.3):

* kill writes KILLED first (the kill service); the cancel is then retried as
  ``cancel_pending`` until the scheduler says it is done or gone; the job keeps its
  capacity until a poll shows it gone;
* only a job the scheduler shows as still waiting can be held; a running one is refused
  with a hint *before* anything is written (:meth:`Control.check_pausable`);
* the pause service writes SUSPENDED (resume: RUNNING) first; when the scheduler then
  refuses the hold (release), the exact inverse write restores the spec and the caller
  gets a :class:`~vq.errors.Conflict`;
* when the answer is lost (a transport failure), the intended state stays and
  ``scheduler_state`` says ``hold_outcome_unknown`` / ``release_outcome_unknown``:
  the next poll shows what the scheduler did, and the opposite verb undoes it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from vq.dialects import ControlAction, ControlOutcome, SchedulerPhase, StatusReport
from vq.domain.spec import JobSpec
from vq.errors import Conflict, TransportError, VqError

from .jobs import LaneJob
from .lane_jobs import LaneJobs
from .remote import LaneRemote
from .worker import Worker

__all__ = ["Control", "Reply"]

log = logging.getLogger(__name__)

_WAITING = (SchedulerPhase.QUEUED, SchedulerPhase.HELD)

#: How the loop answers a control call: a value, or the exception the caller raises.
Reply = Callable[[object], None]


def started(spec: JobSpec) -> bool:
    """Whether a lane job has a scheduler job to hold (its id is recorded)."""
    return spec.scheduler_job_id is not None


class Control:
    """Cancel, hold and release (see the module docstring)."""

    def __init__(self, jobs: LaneJobs, remote: LaneRemote, worker: Worker) -> None:
        self._jobs = jobs
        self._remote = remote
        self._worker = worker
        self._basis = jobs.basis

    # --- cancel ----------------------------------------------------------------------------
    def request_cancel(self, job_id: str) -> None:
        """Cancel the job's scheduler job (KILLED is already written)."""
        self._jobs.guard.assert_on_loop()
        job = self._jobs.get(job_id)
        if job is None:
            return
        job.cancel_wanted = True
        if job.scheduler_job_id is not None and not job.busy:
            self.send_cancel(job)

    def send_cancel(self, job: LaneJob) -> None:
        self._jobs.guard.assert_on_loop()
        scheduler_id = job.scheduler_job_id
        if scheduler_id is None:
            return
        job.busy = True
        self._worker.submit(
            lambda: self._remote.control("cancel", scheduler_id),
            lambda result: self._cancelled(job, result),
        )

    def _cancelled(self, job: LaneJob, result: object) -> None:
        job.busy = False
        if isinstance(result, ControlOutcome) and result.kind in (
            "done",
            "already_ended",
            "unknown_job",
        ):
            job.cancel_wanted = False
            self._jobs.poll_at(self._basis.monotonic())  # learn soon that it is gone
            return
        if isinstance(result, TransportError):
            self._jobs.host_failed(result)
        job.phase = "cancel_pending"
        job.due = self._basis.monotonic() + self._basis.settings.poll_interval
        self._jobs.record(job, {"scheduler_state": "cancel_pending"}, durable=False)

    # --- pause and resume --------------------------------------------------------------------
    def check_pausable(self, spec: JobSpec, reply: Reply) -> None:
        """One read-only status query: ``reply(None)`` when the job is still waiting
        (it can be held), ``reply(Conflict)`` otherwise."""
        self._jobs.guard.assert_on_loop()
        name = self._basis.name
        scheduler_id = spec.scheduler_job_id
        if spec.scheduler_pack is not None:
            reply(
                Conflict(
                    f"job {spec.id} is a packed array element: its slot cannot be held alone",
                    hint=f"`vq kill {spec.id}` stops it",
                )
            )
            return
        if scheduler_id is None:
            reply(Conflict(f"job {spec.id} is still being submitted", hint="try again in a moment"))
            return

        def answered(result: object) -> None:
            if isinstance(result, TransportError):
                reply(
                    Conflict(
                        f"job {spec.id}: the scheduler on {name} did not answer ({result.message})",
                        hint="try again later; nothing was changed",
                    )
                )
                return
            seen = result.observed.get(scheduler_id) if isinstance(result, StatusReport) else None
            if seen is None:
                reply(
                    Conflict(
                        f"job {spec.id}: the scheduler's state of job {scheduler_id} is unknown",
                        hint="try again after the next poll; nothing was changed",
                    )
                )
            elif seen.phase not in _WAITING:
                reply(
                    Conflict(
                        f"job {spec.id} is {seen.raw_state} on {name}; only a job still "
                        "queued can be paused (held)",
                        hint=f"`vq kill {spec.id}` stops it; a running scheduler job cannot "
                        "be suspended",
                    )
                )
            else:
                reply(None)

        self._worker.submit(lambda: self._remote.status([scheduler_id]), answered)

    def hold_or_release(self, job_id: str, action: ControlAction, reply: Reply) -> None:
        """Send the hold/release for ``job_id``: ``reply(True)`` when the scheduler
        accepted it, ``reply(False)`` when there is nothing to send or its answer was
        lost, ``reply(Conflict)`` when it refused (the spec restored)."""
        self._jobs.guard.assert_on_loop()
        spec = self._basis.ctx.store.read(job_id)
        scheduler_id = spec.scheduler_job_id
        if scheduler_id is None:
            reply(False)
            return
        self._worker.submit(
            lambda: self._remote.control(action, scheduler_id),
            lambda result: reply(self._held(spec, action, result)),
        )

    def _held(self, spec: JobSpec, action: ControlAction, result: object) -> object:
        """Apply the scheduler's answer to a hold/release (on the loop)."""
        job_id, name, lifecycle = spec.id, self._basis.name, self._basis.lifecycle
        if isinstance(result, TransportError):
            self.forget_observation(job_id)
            lifecycle.record_scheduler(job_id, {"scheduler_state": f"{action}_outcome_unknown"})
            log.warning("lane %s: %s of %s unknown: %s", name, action, job_id, result.message)
            return False
        if not isinstance(result, ControlOutcome):
            return result if isinstance(result, BaseException) else False
        if result.kind == "done":
            self.forget_observation(job_id)
            lifecycle.record_scheduler(
                job_id, {"scheduler_state": "held" if action == "hold" else "queued"}
            )
            return True
        # Refused: the exact inverse of the write the pause service made.
        try:
            if action == "hold":
                lifecycle.resume(job_id)
            else:
                lifecycle.pause(job_id, spec.paused_by or "operator", started=started)
        except VqError as exc:
            log.error(
                "lane %s: job %s not restored after a refused %s: %s",
                name,
                job_id,
                action,
                exc.message,
            )
        return Conflict(
            f"job {job_id}: the scheduler refused the {action} ({result.kind}"
            + (f": {result.detail}" if result.detail else "")
            + "); the job was left as it was",
            hint="`vq status` shows its state",
        )

    def forget_observation(self, job_id: str) -> None:
        """The spec's scheduler fields were written outside an observation: the next
        observation of ``job_id`` is written whatever it says, and a round asked before
        now is not applied to it (it could undo a hold it did not see)."""
        self._jobs.guard.assert_on_loop()
        job = self._jobs.get(job_id)
        if job is not None:
            job.observed = None
            job.written_outside_at = self._basis.monotonic()
