"""A scheduler lane: the second executor behind the seam (Slurm or Torque over SSH).

The daemon loop calls :meth:`SchedulerLane.tick`; everything that talks to the cluster
runs on the lane's :class:`~.worker.Worker` and its result is applied back on the loop.
The lane's own bookkeeping (``_jobs``) belongs to the loop.

One job's path (§2.2, §4.3):

1. **claim** PENDING → RUNNING under the lock (lifecycle writer); the job holds one of
   ``max_scheduler_jobs`` from here until the scheduler job is gone (this module);
2. **intent**, then **stage and submit** in one SSH call (:mod:`.submission`); an
   ambiguous answer is looked up by the job's tag (:mod:`.recovery`);
3. **observe** and **complete** (:mod:`.observe`): one status round per
   ``poll_interval`` within the host's token bucket, then the exit marker and the
   workspace copied back (:func:`.outcome.ending`).

Packed array elements (``vq submit LANE --array … --pack P``) share allocations instead
(:mod:`.packed`); this module routes dispatch, kills and operator decisions to them.

Kill writes KILLED first (the kill service), then :meth:`cancel` queues ``scancel`` /
``qdel``, retried as ``cancel_pending``; the job keeps its capacity until it is gone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from vq._safe_open import read_regular_beneath
from vq.config.hosts import LaneSettings
from vq.dialects import dialect_for
from vq.domain.dependencies import Lookup, evaluate
from vq.domain.spec import JobSpec
from vq.errors import Conflict, TransportError, VqError
from vq.packing.profiles import PackingProfile
from vq.transport.runner import Runner

from ..base import JobHandle, LaunchResult, Recovered, RecoveryKind
from ..launch import Launched, LaunchError
from ..sampling import GroupUsage
from .jobs import LaneJob
from .outcome import TokenBucket
from .packed import PackedLane
from .ports import LaneContext, LaneLifecycle, PackRemoteFor
from .remote import LaneRemote
from .submission import INTENT_NAME, SubmittingLane
from .worker import Worker

__all__ = ["INTENT_NAME", "SchedulerLane"]

log = logging.getLogger(__name__)


class SchedulerLane(SubmittingLane):
    """One ``[hosts.NAME]`` scheduler lane driven by this daemon (see module docstring)."""

    def __init__(
        self,
        settings: LaneSettings,
        ctx: LaneContext,
        lifecycle: LaneLifecycle,
        runner: Runner,
        *,
        pending: Callable[[], list[JobSpec]],
        call_soon: Callable[[Callable[[], None]], None],
        dependency_state: Lookup = lambda job_id: None,
        hold: Callable[[], bool] = lambda: False,
        monotonic: Callable[[], float] = time.monotonic,
        packing: Callable[[], Mapping[str, PackingProfile]] | None = None,
        pack_remote: PackRemoteFor | None = None,
    ) -> None:
        self.name = settings.name
        self.settings = settings
        self.ctx = ctx
        self.lifecycle = lifecycle
        self.remote = LaneRemote(settings, runner, dialect_for(settings.dialect))
        self._pending = pending
        self._dependency_state = dependency_state
        self._hold = hold
        self._monotonic = monotonic
        self._worker = Worker(f"vq-lane-{self.name}", call_soon)
        self._call_soon = call_soon
        self._bucket = TokenBucket(settings.rpc_per_minute, monotonic)
        self._jobs: dict[str, LaneJob] = {}
        self._polling = False
        self._next_poll = 0.0
        self._backoff_until = 0.0
        self._recovered = False
        self._later = []
        #: the packed arrays of this lane (``vq submit LANE --array … --pack P``)
        self.packed = PackedLane(
            self, packing or dict, pack_remote(runner) if pack_remote is not None else None
        )

    # --- the loop's entry points ---------------------------------------------------------
    def tick(self) -> None:
        """One pass on the loop: recover once, dispatch, advance due steps, poll."""
        now = self._monotonic()
        if not self._recovered:
            self._recovered = True
            from .recovery import adopt_all

            adopt_all(self)
        if now < self._backoff_until:
            return
        self._dispatch()
        for job in list(self._jobs.values()):
            if not job.busy and job.due <= now:
                self._advance(job)
        self._run_later(now)
        self.packed.advance(now)
        self._maybe_poll(now)

    def next_deadline(self) -> float | None:
        """Seconds until this lane has work again (for the loop's wait); None when only
        a worker answer can give it work (the answer wakes the loop itself)."""
        now = self._monotonic()
        if now < self._backoff_until:
            return self._backoff_until - now
        wanted = [j.due for j in self._jobs.values() if not j.busy and j.due > now]
        wanted += [at for at, _ in self._later]
        wanted += [due if due > now else now for due in self.packed.next_due()]
        pollable = any(
            j.scheduler_job_id is not None and not j.busy and j.phase != "copying"
            for j in self._jobs.values()
        )
        if pollable and not self._polling:
            wanted.append(self._next_poll)
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
        return len(self._jobs) + self.packed.held

    # --- what the packed arrays use of the lane ----------------------------------------------
    @property
    def dependency_state(self) -> Lookup:
        return self._dependency_state

    def monotonic(self) -> float:
        return self._monotonic()

    def take_token(self) -> bool:
        """One scheduler round within the host's token bucket."""
        return self._bucket.take()

    def run_on_worker(self, work: Callable[[], Any], done: Callable[[object], None]) -> None:
        self._worker.submit(work, done)

    def host_failed(self, exc: TransportError) -> None:
        self._host_failed(exc)

    # --- dispatch ------------------------------------------------------------------------
    def _dispatch(self) -> None:
        free = self.settings.max_jobs - self.held
        if free <= 0 or self._hold():
            return
        pending = [s for s in self._pending() if s.scheduler_target == self.name]
        packed = [s for s in pending if s.scheduler_pack is not None]
        mine = [s for s in pending if s.scheduler_pack is None]
        if packed:
            ordered = sorted(packed, key=lambda s: (-s.priority, s.submitted_at, s.id))
            free -= self.packed.dispatch(ordered, free)
        now = self.ctx.now()
        for spec in sorted(mine, key=lambda s: (-s.priority, s.submitted_at, s.id)):
            if free <= 0:
                break
            if spec.depends_on or spec.depends_on_any:
                gate = evaluate(spec.depends_on, spec.depends_on_any, self._dependency_state)
                if gate.cascade:
                    self.lifecycle.fail_pending(spec.id, gate.reason or "a dependency failed")
                if not gate.ready:
                    continue
            if spec.not_before is not None and spec.not_before > now:
                continue
            if spec.scheduler_job_id is not None or self.intent_path(spec.id).exists():
                self._forget_attempt(spec.id)  # a retry: the last attempt's id is not ours
            try:
                moved = self.lifecycle.claim(
                    spec.id, workdir=self.settings.remote_workspace(spec.id)
                )
            except VqError as exc:
                log.warning("lane %s: cannot claim %s: %s", self.name, spec.id, exc.message)
                continue
            if not moved.changed:
                continue
            free -= 1
            job = LaneJob(spec.id, "staging")
            self._jobs[spec.id] = job
            self._stage(job, moved.spec)

    def _advance(self, job: LaneJob) -> None:
        """Run the step a job waits for (a retry after its delay)."""
        if job.phase in ("staging", "stage_retry"):
            self._stage(job, self.ctx.store.read(job.job_id))
        elif job.phase == "submit_retry" and job.scheduler_job_id is None:
            self._submit(job, supersede=job.supersede)
        elif job.phase == "submitting" and job.scheduler_job_id is None:
            from .recovery import look_up

            look_up(self, job)
        elif job.phase == "copying":
            self._complete(job)
        elif job.cancel_wanted and job.scheduler_job_id is not None:
            self._send_cancel(job)

    def resolve(self, job_id: str, scheduler_job_id: str | None) -> dict[str, Any]:
        """An operator's decision for a job whose submission is in doubt (on the loop):
        adopt ``scheduler_job_id``, or (None) it was never submitted. A packed element's
        decision settles its whole allocation (:meth:`.packed.PackedLane.resolve`)."""
        if self.packed.holds(job_id):
            return self.packed.resolve(job_id, scheduler_job_id)
        return self.resolve_single(job_id, scheduler_job_id)

    # --- the executor seam ---------------------------------------------------------------------
    def launch(
        self,
        spec: JobSpec,
        env: Mapping[str, str],
        mem_mb: int | None,
        reply: Callable[[LaunchResult], None],
    ) -> None:
        raise LaunchError(f"scheduler lane {self.name} dispatches its own jobs")

    def exit_code(self, job_id: str) -> int | None:
        """The copied-back exit marker (after completion)."""
        try:
            paths = self.ctx.paths
            raw = read_regular_beneath(paths.tree_of(job_id), paths.exit_code(job_id), 64)
            text = raw.decode().strip()
        except (OSError, UnicodeDecodeError):
            return None
        return int(text) if text.isdigit() else None

    def spawn_failure(self, job_id: str) -> str | None:
        return None

    def oom_killed(self, job_id: str) -> bool:
        return False  # the scheduler reports its own OOM verdicts (OUT_OF_MEMORY)

    def running(self, handle: JobHandle) -> bool:
        return handle.job_id in self._jobs or self.packed.holds(handle.job_id)

    def still_running(self, handles: Iterable[JobHandle]) -> set[str]:
        """The jobs this lane still tracks (submitted, polled, or copying back)."""
        return {handle.job_id for handle in handles if self.running(handle)}

    def watcher_alive(self, handle: JobHandle) -> bool:
        return self.running(handle)  # the lane's own bookkeeping watches the job

    def find_lost_launch(self, job_id: str) -> Launched | None:
        return None  # a lost submission is found by its tag (scheduler/recovery.py)

    def fence_unstarted(self, spec: JobSpec) -> bool:
        return False  # no proof: the scheduler may hold the job

    def sample(self, handles: Iterable[JobHandle]) -> dict[str, GroupUsage]:
        return {}

    def cancel(self, handle: JobHandle) -> bool:
        """Queue the scheduler cancel on the loop (any thread)."""
        self._call_soon(lambda: self.request_cancel(handle.job_id))
        return True

    def request_cancel(self, job_id: str) -> None:
        """On the loop: a packed element's slot (``scancel JOBID.STEP``), else the job's
        scheduler job (KILLED is already written)."""
        if self.packed.holds(job_id):
            self.packed.request_kill(job_id)
            return
        super().request_cancel(job_id)

    def force_stop(self, handle: JobHandle) -> bool:
        return False

    def started(self, spec: JobSpec) -> bool:
        return spec.scheduler_job_id is not None

    def check_pausable(self, spec: JobSpec) -> None:
        """One read-only status query (§7.3): only a job still waiting can be held."""
        from .control import check_pausable

        if spec.scheduler_pack is not None:
            raise Conflict(
                f"job {spec.id} is a packed array element: its slot cannot be held alone",
                hint=f"`vq kill {spec.id}` stops it",
            )

        check_pausable(self, spec)

    def suspend(self, handle: JobHandle) -> bool:
        """``scontrol hold`` / ``qhold`` (SUSPENDED is already written; undone on a
        refusal, ``hold_outcome_unknown`` when the answer is lost)."""
        from .control import hold_or_release

        return hold_or_release(self, handle.job_id, "hold")

    def resume(self, handle: JobHandle) -> bool:
        """``scontrol release`` / ``qrls`` (RUNNING is already written; undone on a
        refusal, ``release_outcome_unknown`` when the answer is lost)."""
        from .control import hold_or_release

        return hold_or_release(self, handle.job_id, "release")

    def begin_recovery(self) -> None:
        return None

    def end_recovery(self) -> None:
        return None

    def recover(self, spec: JobSpec) -> Recovered:
        return Recovered(RecoveryKind.REATTACHED, JobHandle.of(spec))

    def may_have_leaked(self, pgid: int | None) -> bool:
        return False  # a lane's jobs leave no local process group to reap

    def reap_leak(self, spec: JobSpec) -> bool:
        return False

    def released(self, job_id: str) -> None:
        return None
