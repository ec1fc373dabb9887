"""Handlers of the job methods: ``submit``, ``status``, ``kill``, ``pause``, ``resume``,
``resubmit``, ``scheduler_resolve``.

Each calls the service the no-daemon path calls too, then records the changed spec in
the index and wakes the loop when dispatch may have something new to do.
"""

from __future__ import annotations

from collections.abc import Callable

from vq.config.hosts import LaneSettings
from vq.domain.admission import Usage
from vq.domain.quotas import QuotaHold
from vq.domain.states import JobState
from vq.errors import Conflict
from vq.executors.registry import ExecutorRegistry
from vq.executors.scheduler import LaneSet
from vq.protocol.answers import SchedulerResolveAnswer
from vq.protocol.messages import SubmitParams
from vq.protocol.methods import (
    JobIdParams,
    JobOutcome,
    ResubmitParams,
    SchedulerResolveParams,
    SchedulerResolveResult,
    SpecResult,
    StatusParams,
    StatusResult,
    SubmitResult,
)
from vq.services.context import ServiceContext
from vq.services.kill import kill_job
from vq.services.lifecycle import Lifecycle
from vq.services.pause import pause_job, resume_job
from vq.services.resubmit import resubmit
from vq.services.status import apply_quota_hold, job_status
from vq.services.submit import result_payload, submit

from ..holds import LoopCalls
from ..inbox import LoopInbox
from ..index import JobIndex
from .views import IndexViews

__all__ = ["JobHandlers"]


class JobHandlers:
    """The job methods over one service context, index and loop.

    ``lifecycle`` writes the kill's transition; ``usage`` reads the supervisor's reserved
    resources (for a PENDING job's reason);
    ``start_grace`` is called on the loop after a kill signalled a running group;
    ``executors`` reach a job's processes or scheduler job (kill, pause, resume);
    ``lanes`` and ``loop_calls`` apply a ``scheduler_resolve`` on the loop.
    """

    def __init__(
        self,
        ctx: ServiceContext,
        index: JobIndex,
        views: IndexViews,
        inbox: LoopInbox,
        lifecycle: Lifecycle,
        usage: Callable[[], Usage],
        start_grace: Callable[[str], None],
        dispatch_hold: Callable[[], str | None],
        storage_hold: Callable[[], dict[str, str] | None] = lambda: None,
        executors: ExecutorRegistry | None = None,
        lanes: LaneSet | None = None,
        loop_calls: LoopCalls | None = None,
        quota_hold: Callable[[str, int], QuotaHold | None] | None = None,
    ) -> None:
        self._quota_hold = quota_hold
        self._executors = executors
        self._lanes = lanes
        self._loop_calls = loop_calls or LoopCalls()
        self._ctx = ctx
        self._index = index
        self._views = views
        self._inbox = inbox
        self._lifecycle = lifecycle
        self._usage = usage
        self._start_grace = start_grace
        self._dispatch_hold = dispatch_hold
        self._storage_hold = storage_hold

    def submit(self, params: SubmitParams) -> SubmitResult:
        result = submit(self._ctx, params)
        for spec in result.specs:
            self._index.upsert(spec)
        self._inbox.wake()
        return SubmitResult.model_validate(result_payload(result))

    def status(self, params: StatusParams) -> StatusResult:
        if params.uid is not None:  # one owner's copy (of a quarantined id): not indexed
            spec = self._ctx.store.read_copy(params.id, params.uid)
        else:
            spec = self._ctx.store.read(params.id)
            self._index.upsert(spec)
        view = job_status(
            self._ctx,
            spec,
            effective=self._ctx.caps,
            usage=self._usage(),
            dependency_state=self._index.dependency_state,
            basis=self._views.eta_basis,
            hold=self._dispatch_hold(),
            lane=self._lane_settings(ExecutorRegistry.lane_of(spec)),
        )
        hold = self._storage_hold()
        if hold is not None and spec.state is JobState.PENDING:
            view["pending_reason"] = f"dispatch is held: {hold['message']}"
        elif (
            spec.state is JobState.PENDING
            and ExecutorRegistry.lane_of(spec) is None  # quotas gate local dispatch only
            and self._quota_hold is not None
        ):
            quota = self._quota_hold(spec.id, spec.cpus)
            if quota is not None:
                apply_quota_hold(view, quota)
        return StatusResult.model_validate(view)

    def _lane_settings(self, target: str | None) -> LaneSettings | None:
        """The settings of the lane driving ``target`` now (the loop's published
        snapshot: this runs on an RPC thread)."""
        if target is None or self._lanes is None:
            return None
        return self._lanes.published.settings.get(target)

    def kill(self, params: JobIdParams) -> JobOutcome:
        job_id = params.id
        outcome = kill_job(self._ctx, job_id, lifecycle=self._lifecycle, executors=self._executors)
        self._index.upsert(outcome.spec)
        if outcome.signaled:
            self._inbox.call_soon(lambda: self._start_grace(job_id))
        self._inbox.wake()
        return JobOutcome.model_validate(outcome.as_dict())

    def pause(self, params: JobIdParams) -> JobOutcome:
        outcome = pause_job(self._ctx, params.id, executors=self._executors)
        self._index.upsert(outcome.spec)
        return JobOutcome.model_validate(outcome.as_dict())

    def resume(self, params: JobIdParams) -> JobOutcome:
        outcome = resume_job(self._ctx, params.id, executors=self._executors)
        self._index.upsert(outcome.spec)
        self._inbox.wake()
        return JobOutcome.model_validate(outcome.as_dict())

    def scheduler_resolve(self, params: SchedulerResolveParams) -> SchedulerResolveResult:
        """An operator's decision for a lane job whose submission is in doubt (applied
        on the loop, which owns the lane's bookkeeping)."""
        spec = self._ctx.store.read(params.id)
        target, lanes = ExecutorRegistry.lane_of(spec), self._lanes
        wanted = params.scheduler_job_id

        def on_loop() -> SchedulerResolveAnswer:
            lane = lanes.get(target) if lanes is not None and target is not None else None
            if lane is None:
                raise Conflict(
                    f"job {spec.id} is not a job of a scheduler lane this daemon drives",
                    hint="`vq status ID` shows its scheduler_target",
                )
            return lane.resolve(spec.id, wanted)

        answer = self._loop_calls.run(on_loop)
        return SchedulerResolveResult.model_validate(answer)

    def resubmit(self, params: ResubmitParams) -> SpecResult:
        clone = resubmit(self._ctx, params.id, params.overrides)
        self._index.upsert(clone)
        self._inbox.wake()
        return SpecResult.model_validate(clone.model_dump(mode="json"))
