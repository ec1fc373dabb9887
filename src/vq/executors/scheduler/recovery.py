"""A lane's recovery after a restart (§4.7): handles rebuilt from the specs (a part of
:class:`~.lane.SchedulerLane`, on the daemon loop; its look-ups run on the lane's worker).

* A RUNNING/SUSPENDED spec with a ``scheduler_job_id`` is observed again (the next poll
  decides); a terminal one whose scheduler job may still run (a kill whose cancel was
  pending) is tracked until it is gone.
* A spec with an intent (``_vq/scheduler-intent.json``, or ``scheduler_state =
  "submitting"``) may have been submitted. Its submit guard's records on the login host
  (:mod:`vq.dialects.submit_guard`, named in the intent) are read first:

  - ``busy``: a call (an orphaned ssh of a killed daemon, a slow ``sbatch``) still holds
    the guard and may still submit: never evidence of absence, asked again later;
  - a recorded answer of the submit command decides (adopt, refuse, or retry an
    unreachable controller), unless it is ambiguous;
  - ``none``: no call ever started the submit command, and none can any more without
    going through the guard: it is submitted now (under the guard);
  - ``in_doubt`` (a call started it and ended without recording its answer) or an
    ambiguous recorded answer: the job's tag decides (``squeue --name``/``sacct
    --name``, the comment nonce, the remote ``_vq/scheduler-job-id``). One match is
    adopted; none, twice ``absent_recheck_seconds`` apart with accounting enabled and
    the guard free, means it was never submitted: it is submitted again, superseding
    exactly that call; several matches, or no accounting to be sure, is
    ``reattach_failed``: the capacity stays reserved and ``vq scheduler resolve``
    decides.

  An intent written before the guard existed (no records named) is looked up by tag
  alone, as in the last case.
* A claimed spec without an intent never reached the scheduler: it is staged again.
* A packed array element (``scheduler_pack``) is never looked up by tag: its allocation
  is rebuilt from its elements and intent (:meth:`.packed.PackedLane.recover`).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any, NamedTuple

from vq.dialects import TagMatch
from vq.dialects.submit_guard import GuardState
from vq.domain.states import ACTIVE
from vq.errors import TransportError, VqError

from .jobs import LaneJob, submit_verdict
from .lane_jobs import LaneJobs
from .packed import PackedLane
from .remote import LaneRemote
from .submission import Submission
from .worker import Worker

__all__ = ["Recovery"]

log = logging.getLogger(__name__)

#: scheduler_state values after which nothing of the job runs on the cluster.
_SETTLED = frozenset({"ended", "artifacts_unavailable", "not_submitted"})


class Recovery:
    """Adopt a lane's jobs from disk and find submissions in doubt (module docstring)."""

    def __init__(
        self,
        jobs: LaneJobs,
        remote: LaneRemote,
        worker: Worker,
        submission: Submission,
        packed: PackedLane,
    ) -> None:
        self._jobs = jobs
        self._remote = remote
        self._worker = worker
        self._submission = submission
        self._packed = packed
        self._basis = jobs.basis

    def adopt_all(self) -> None:
        """Track every spec of this lane that holds capacity (once, when the lane starts
        driving its jobs: at the daemon's recovery pass, or when a reload builds it)."""
        self._jobs.guard.assert_on_loop()
        name, store = self._basis.name, self._basis.ctx.store
        packed = []
        for job_id in sorted(store.list_ids()):
            try:
                spec = store.read(job_id)
            except VqError:
                continue
            if spec.scheduler_target != name:
                continue
            if spec.scheduler_pack is not None:
                packed.append(spec)  # never the tag look-up: its allocation is found by identity
                continue
            intent = self._submission.read_intent(job_id)
            if spec.state not in ACTIVE:
                if spec.scheduler_job_id and spec.scheduler_state not in _SETTLED:
                    job = LaneJob(job_id, spec.scheduler_state or "queued", spec.scheduler_job_id)
                    job.cancel_wanted = True
                    job.cluster_started_at = spec.scheduler_started_at
                    self._jobs.track(job)
                continue
            if spec.scheduler_job_id is not None:
                job = LaneJob(job_id, spec.scheduler_state or "queued", spec.scheduler_job_id)
                job.submitted_at = _written_at(intent) or spec.started_at
                job.cluster_started_at = spec.scheduler_started_at
                job.cancel_wanted = spec.scheduler_state == "cancel_pending"
                self._jobs.track(job)
            elif intent is not None or spec.scheduler_state == "submitting":
                job = LaneJob(job_id, "submitting", nonce=(intent or {}).get("nonce"))
                job.submitted_at = _written_at(intent) or spec.started_at
                job.cluster_started_at = spec.scheduler_started_at
                records = (intent or {}).get("submit_records")
                job.records = records if isinstance(records, str) and records else None
                self._jobs.track(job)
            else:
                self._jobs.track(LaneJob(job_id, "staging"))
            log.info("lane %s: job %s adopted (%s)", name, job_id, spec.scheduler_state)
        self._packed.recover(packed)

    def look_up(self, job: LaneJob) -> None:
        """Find a ``submitting`` job's submission: its guard's records, then (in doubt)
        its tag (on the worker)."""
        self._jobs.guard.assert_on_loop()
        job.busy = True
        since = job.submitted_at or self._basis.ctx.now()
        records = job.records
        remote = self._remote

        def work() -> _LookUp:
            state = remote.submit_state(records) if records is not None else None
            if state is not None and not self._needs_tag(job, state):
                return _LookUp(state, (), None)
            matches = remote.find_by_tag(job.job_id, since)
            recorded = remote.read_small(job.job_id, "_vq/scheduler-job-id")
            return _LookUp(state, matches, (recorded or "").strip() or None)

        self._worker.submit(work, lambda result: self._looked_up(job, result))

    def _needs_tag(self, job: LaneJob, state: GuardState) -> bool:
        """Whether only the scheduler can tell: the guard's call is in doubt, its
        recorded answer is ambiguous, or the probe could not be read."""
        if state.kind == "answer":
            return submit_verdict(self._remote.parse_submit(job.job_id, state)) == "ambiguous"
        return state.kind in ("in_doubt", "unreadable", "stage_failed")

    def _looked_up(self, job: LaneJob, result: object) -> None:
        job.busy = False
        name, submission = self._basis.name, self._submission
        retry = self._basis.monotonic() + self._basis.settings.absent_recheck_seconds
        if isinstance(result, TransportError):
            self._jobs.host_failed(result)
            job.due = retry
            return
        if not isinstance(result, _LookUp):
            log.warning("lane %s: look-up of %s failed: %s", name, job.job_id, result)
            job.due = retry
            return
        guard = result.guard
        if guard is not None and guard.kind == "none":
            log.info("lane %s: job %s never reached sbatch; submitting it now", name, job.job_id)
            submission.submit(job)
            return
        if guard is not None and guard.kind in ("busy", "no_lock"):
            submission.answered(job, guard)
            return
        if guard is not None and not self._needs_tag(job, guard):
            submission.answered(job, guard)  # the submit command's recorded answer decides
            return
        if guard is not None and guard.kind in ("in_doubt", "answer"):
            job.in_doubt = guard.token
        self._by_tag(job, result.matches, result.recorded, retry)

    def _by_tag(
        self,
        job: LaneJob,
        matches: tuple[TagMatch, ...] | None,
        recorded: str | None,
        retry: float,
    ) -> None:
        """The scheduler's word on a submission in doubt: adopt one match, wait, or
        submit again (superseding the call in doubt) once absence is proven."""
        name = self._basis.name
        if matches is None:
            job.due = retry  # a query could not be read: not evidence
            return
        ours = [m for m in matches if m.nonce in (None, job.nonce)]
        ids = {m.scheduler_job_id for m in ours}
        if recorded is not None:
            ids.add(recorded)
        if len(ids) == 1:
            found = ids.pop()
            log.info("lane %s: job %s found as scheduler job %s", name, job.job_id, found)
            self._submission.adopt(job, found)
            return
        if len(ids) > 1:
            job.phase = "reattach_failed"
            self._jobs.record(job, {"scheduler_state": "reattach_failed"})
            log.error(
                "lane %s: job %s matches several scheduler jobs (%s); `vq scheduler resolve`",
                name,
                job.job_id,
                ", ".join(sorted(ids)),
            )
            return
        job.absent_checks += 1
        if job.absent_checks < 2:
            job.due = retry
            return
        if self._basis.settings.accounting == "none":
            job.phase = "reattach_failed"
            self._jobs.record(job, {"scheduler_state": "reattach_failed"})
            return
        log.info("lane %s: job %s was never submitted; submitting it now", name, job.job_id)
        job.absent_checks = 0
        self._submission.submit(job, supersede=job.in_doubt)


def _written_at(intent: dict[str, Any] | None) -> datetime | None:
    try:
        return datetime.fromisoformat(str((intent or {})["written_at"]))
    except (KeyError, ValueError):
        return None


class _LookUp(NamedTuple):
    """One look-up's evidence: the guard's state (None: no guard), the tag's matches
    (None: a query could not be read) and the remote ``_vq/scheduler-job-id``."""

    guard: GuardState | None
    matches: tuple[TagMatch, ...] | None
    recorded: str | None
