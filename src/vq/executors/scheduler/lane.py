"""A scheduler lane: jobs run by Slurm or Torque over SSH, driven by this daemon.

The lane is an object that holds its state (:class:`~.lane_jobs.LaneJobs`) and composes
its parts, each a class of its own module given its collaborators by constructor:

* :class:`~.submission.Submission`: **claim** PENDING → RUNNING under the lock (this
  module: the job holds one of ``max_jobs`` from here until the scheduler job is gone),
  then **intent**, **stage and submit** in one SSH call;
* :class:`~.observe.Observation`: **observe** and **complete**, one status round per
  ``poll_interval`` within the host's token bucket, then the exit marker and the
  workspace copied back (:func:`.outcome.ending`);
* :class:`~.control.Control`: cancel, hold and release;
* :class:`~.recovery.Recovery`: adopt the lane's jobs from disk, and find a submission
  in doubt by its guard and tag;
* :class:`~.packed.PackedLane`: packed array elements (``vq submit LANE --array …
  --pack P``) share allocations; the lane is their :class:`~.packed_ports.PackHost`.

Thread ownership: every method here runs on the daemon loop (checked by the lane's
:class:`~.loop_guard.LoopGuard`); everything that talks to the cluster runs on the
lane's :class:`~.worker.Worker` and its result is applied back on the loop. A control
asked for from another thread (kill, pause, resume on an RPC thread) is queued to the
loop by the daemon, which waits for the ``reply`` the lane gives (:mod:`.control`).

Kill writes KILLED first (the kill service), then :meth:`SchedulerLane.cancel` queues
``scancel`` / ``qdel``, retried as ``cancel_pending``; the job keeps its capacity until
it is gone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from vq.config.hosts import LaneSettings
from vq.dialects import dialect_for
from vq.domain.dependencies import Lookup, evaluate
from vq.domain.spec import JobSpec
from vq.errors import TransportError, VqError
from vq.packing.profiles import PackingProfile
from vq.protocol.answers import SchedulerResolveAnswer
from vq.transport.runner import Runner

from .control import Control, Reply, started
from .jobs import LaneJob
from .lane_jobs import LaneBasis, LaneJobs
from .loop_guard import LoopGuard
from .observe import Observation
from .outcome import TokenBucket
from .packed import PackedLane
from .ports import LaneContext, LaneLifecycle, PackRemoteFor
from .recovery import Recovery
from .remote import LaneRemote
from .submission import INTENT_NAME, Submission
from .worker import Worker

__all__ = ["INTENT_NAME", "SchedulerLane"]

log = logging.getLogger(__name__)


def lane_order(spec: JobSpec) -> tuple[int, datetime, int, str]:
    """A lane's dispatch order, the local dispatcher's
    (:func:`vq.domain.admission.order_key`): descending priority, then submission time,
    then array (or chain) index, then id."""
    sequence = spec.array_index if spec.array_index is not None else spec.chain_index or 0
    return (-spec.priority, spec.submitted_at, sequence, spec.id)


def _pack_key(spec: JobSpec) -> tuple[str, str]:
    """The packed array a pending element belongs to (its group and profile)."""
    return (spec.array_group_id or spec.id, spec.scheduler_pack or "")


class SchedulerLane:
    """One ``[hosts.NAME]`` scheduler lane driven by this daemon (see module docstring).

    ``pending(name)`` gives the PENDING specs placed on the lane of that name (the
    daemon's executor registry partitions the queue); ``call_soon`` queues a worker
    answer for the loop."""

    def __init__(
        self,
        settings: LaneSettings,
        ctx: LaneContext,
        lifecycle: LaneLifecycle,
        runner: Runner,
        *,
        pending: Callable[[str], list[JobSpec]],
        call_soon: Callable[[Callable[[], None]], None],
        dependency_state: Lookup = lambda job_id: None,
        hold: Callable[[], bool] = lambda: False,
        monotonic: Callable[[], float] = time.monotonic,
        packing: Callable[[], Mapping[str, PackingProfile]] | None = None,
        pack_remote: PackRemoteFor | None = None,
        guard: LoopGuard | None = None,
    ) -> None:
        self.basis = LaneBasis(settings.name, settings, ctx, lifecycle, monotonic)
        self.remote = LaneRemote(settings, runner, dialect_for(settings.dialect))
        self.guard = guard or LoopGuard()
        self.jobs = LaneJobs(self.basis, self.guard)
        self._pending = pending
        self._dependency_state = dependency_state
        self._hold = hold
        self._worker = Worker(f"vq-lane-{settings.name}", call_soon)
        self._bucket = TokenBucket(settings.rpc_per_minute, monotonic)
        self.control = Control(self.jobs, self.remote, self._worker)
        self.observation = Observation(self.jobs, self.remote, self._worker, self._bucket)
        self.submission = Submission(self.jobs, self.remote, self._worker, self.control)
        #: the packed arrays of this lane (``vq submit LANE --array … --pack P``)
        self.packed = PackedLane(
            self, packing or dict, pack_remote(runner) if pack_remote is not None else None
        )
        self.recovery = Recovery(self.jobs, self.remote, self._worker, self.submission, self.packed)
        self._adopted = False

    # --- what the packed arrays use of the lane (:class:`~.packed_ports.PackHost`) ----------------
    @property
    def name(self) -> str:
        return self.basis.name

    @property
    def settings(self) -> LaneSettings:
        return self.basis.settings

    @property
    def ctx(self) -> LaneContext:
        return self.basis.ctx

    @property
    def lifecycle(self) -> LaneLifecycle:
        return self.basis.lifecycle

    @property
    def dependency_state(self) -> Lookup:
        return self._dependency_state

    def monotonic(self) -> float:
        return self.basis.monotonic()

    def take_token(self) -> bool:
        """One scheduler round within the host's token bucket."""
        return self._bucket.take()

    def run_on_worker(self, work: Callable[[], Any], done: Callable[[object], None]) -> None:
        self._worker.submit(work, done)

    def host_failed(self, exc: TransportError) -> None:
        self.jobs.host_failed(exc)

    # --- the loop's entry points ---------------------------------------------------------
    def adopt(self) -> None:
        """Track every job of this lane found on disk, once: asked by the daemon's
        recovery pass, or by the lane set for a lane a reload builds (its jobs are
        adopted like a restart's). A second call changes nothing."""
        self.guard.assert_on_loop()
        if not self._adopted:
            self._adopted = True
            self.recovery.adopt_all()

    def tick(self) -> None:
        """One pass on the loop: dispatch, advance due steps, poll."""
        self.guard.assert_on_loop()
        now = self.monotonic()
        if now < self.jobs.backoff_until:
            return
        self._dispatch()
        for job in self.jobs.all():
            if not job.busy and job.due <= now:
                self._advance(job)
        self.jobs.run_later(now)
        self.packed.advance(now)
        self.observation.maybe_poll(now)

    def next_deadline(self) -> float | None:
        """Seconds until this lane has work again (for the loop's wait); None when only
        a worker answer can give it work (the answer wakes the loop itself)."""
        now = self.monotonic()
        if now < self.jobs.backoff_until:
            return self.jobs.backoff_until - now
        tracked = self.jobs.all()
        wanted = [j.due for j in tracked if not j.busy and j.due > now]
        wanted += self.jobs.later_due()
        wanted += [due if due > now else now for due in self.packed.next_due()]
        if self.jobs.pollable() and not self.jobs.polling:
            wanted.append(self.jobs.next_poll)
        return max(0.05, min(wanted) - now) if wanted else None

    def close(self) -> None:
        self._worker.close()

    @property
    def idle(self) -> bool:
        """Nothing of this lane in flight on its worker (it can be closed and rebuilt;
        a delayed accounting-sample retry is dropped then: telemetry is best-effort)."""
        return self._worker.in_flight == 0

    @property
    def held(self) -> int:
        """Jobs (and packed elements) holding lane capacity."""
        return len(self.jobs) + self.packed.held

    # --- dispatch ------------------------------------------------------------------------
    def _dispatch(self) -> None:
        """Claim the lane's due PENDING jobs within ``max_scheduler_jobs``, in one order
        for plain jobs and packed elements alike (:func:`lane_order`: priority, then
        submission, then array index). A packed array is met at its first pending element
        and takes the next allocation of its elements there (at most the free slots);
        so it never passes a plain job ahead of it, and a job or array that cannot start
        now (a dependency, ``not_before``, ``--max-parallel``) holds nothing up behind it."""
        free = self.settings.max_jobs - self.held
        if free <= 0 or self._hold():
            return
        ordered = sorted(self._pending(self.name), key=lane_order)  # this lane's own
        arrays: dict[tuple[str, str], list[JobSpec]] = {}
        for spec in ordered:
            if spec.scheduler_pack is not None:
                arrays.setdefault(_pack_key(spec), []).append(spec)
        now = self.ctx.now()
        for spec in ordered:
            if free <= 0:
                break
            if spec.scheduler_pack is not None:
                members = arrays.pop(_pack_key(spec), None)
                if members is not None:  # the array's first pending element: its turn
                    free -= self.packed.dispatch(members, free)
                continue
            if self._claim_single(spec, now):
                free -= 1

    def _claim_single(self, spec: JobSpec, now: datetime) -> bool:
        """Claim one plain job and start its submission; whether it took a slot."""
        if spec.depends_on or spec.depends_on_any:
            gate = evaluate(spec.depends_on, spec.depends_on_any, self._dependency_state)
            if gate.cascade:
                self.lifecycle.fail_pending(spec.id, gate.reason or "a dependency failed")
            if not gate.ready:
                return False
        if spec.not_before is not None and spec.not_before > now:
            return False
        if spec.scheduler_job_id is not None or self.submission.intent_path(spec.id).exists():
            self.submission.forget_attempt(spec.id)  # a retry: the last attempt's id is not ours
        try:
            moved = self.lifecycle.claim(spec.id, workdir=self.settings.remote_workspace(spec.id))
        except VqError as exc:
            log.warning("lane %s: cannot claim %s: %s", self.name, spec.id, exc.message)
            return False
        if not moved.changed:
            return False
        job = LaneJob(spec.id, "staging")
        self.jobs.track(job)
        self.submission.stage(job, moved.spec)
        return True

    def _advance(self, job: LaneJob) -> None:
        """Run the step a job waits for (a retry after its delay)."""
        if job.phase in ("staging", "stage_retry"):
            self.submission.stage(job, self.ctx.store.read(job.job_id))
        elif job.phase == "submit_retry" and job.scheduler_job_id is None:
            self.submission.submit(job, supersede=job.supersede)
        elif job.phase == "submitting" and job.scheduler_job_id is None:
            self.recovery.look_up(job)
        elif job.phase == "copying":
            self.observation.complete(job)
        elif job.cancel_wanted and job.scheduler_job_id is not None:
            self.control.send_cancel(job)

    def resolve(self, job_id: str, scheduler_job_id: str | None) -> SchedulerResolveAnswer:
        """An operator's decision for a job whose submission is in doubt: adopt
        ``scheduler_job_id``, or (None) it was never submitted. A packed element's
        decision settles its whole allocation (:meth:`.packed.PackedLane.resolve`)."""
        self.guard.assert_on_loop()
        if self.packed.holds(job_id):
            return self.packed.resolve(job_id, scheduler_job_id)
        return self.submission.resolve_single(job_id, scheduler_job_id)

    # --- control (on the loop; the daemon queues a caller's request here) -----------------
    def tracks(self, job_id: str) -> bool:
        """Whether the job holds this lane's capacity (submitted, polled, copying back)."""
        return job_id in self.jobs or self.packed.holds(job_id)

    def cancel(self, job_id: str) -> None:
        """A packed element's slot (``scancel JOBID.STEP``), else the job's scheduler job
        (KILLED is already written)."""
        self.guard.assert_on_loop()
        if self.packed.holds(job_id):
            self.packed.request_kill(job_id)
            return
        self.control.request_cancel(job_id)

    @staticmethod
    def started(spec: JobSpec) -> bool:
        """Whether the claimed job has a scheduler job to hold."""
        return started(spec)

    def check_pausable(self, spec: JobSpec, reply: Reply) -> None:
        """One read-only status query (§7.3): only a job still waiting can be held."""
        self.control.check_pausable(spec, reply)

    def suspend(self, job_id: str, reply: Reply) -> None:
        """``scontrol hold`` / ``qhold`` (SUSPENDED is already written; undone on a
        refusal, ``hold_outcome_unknown`` when the answer is lost)."""
        self.control.hold_or_release(job_id, "hold", reply)

    def resume(self, job_id: str, reply: Reply) -> None:
        """``scontrol release`` / ``qrls`` (RUNNING is already written; undone on a
        refusal, ``release_outcome_unknown`` when the answer is lost)."""
        self.control.hold_or_release(job_id, "release", reply)
