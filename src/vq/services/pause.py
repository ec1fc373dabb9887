"""Pause and resume a running job: the lifecycle writer records the intent, then the
job's executor suspends or resumes it (SIGSTOP / SIGCONT to the local process group).

Order of effects: the SUSPENDED intent (``paused_at``, ``paused_monotonic_at``,
``paused_by``) is durable *before* the suspend; on resume, RUNNING (with the pause added
to ``paused_seconds_total``) is durable before the resume. A crash between the two
leaves a spec whose state says what was meant; recovery re-sends the matching signal.

A suspended job keeps its reservation, is not sampled, and is not judged by the watchdog.
``paused_by`` is "operator" for ``vq pause`` and "memory-pressure" for the host-pressure
pass; a resume can be limited to one ``paused_by`` so the pressure pass never resumes
what an operator paused.
"""

from __future__ import annotations

from dataclasses import dataclass

from vq.domain.spec import JobSpec
from vq.domain.states import JobState
from vq.executors.base import JobControl, JobHandle, NoExecutor
from vq.executors.registry import ExecutorRegistry, local_only
from vq.protocol.answers import PauseAnswer
from vq.services.context import ServiceContext
from vq.services.lifecycle import Lifecycle
from vq.services.lifecycle_decisions import paused_seconds

__all__ = [
    "PAUSED_BY_OPERATOR",
    "PAUSED_BY_PRESSURE",
    "PauseOutcome",
    "pause_job",
    "paused_seconds",
    "resume_job",
]

PAUSED_BY_OPERATOR = "operator"
PAUSED_BY_PRESSURE = "memory-pressure"


@dataclass(frozen=True)
class PauseOutcome:
    spec: JobSpec
    changed: bool
    signaled: bool

    def as_dict(self) -> PauseAnswer:
        """The ``vq pause|resume --json`` item (a stable schema, see docs/json.md)."""
        return {
            "id": self.spec.id,
            "state": self.spec.state.value,
            "changed": self.changed,
            "signaled": self.signaled,
        }


def _executor(
    ctx: ServiceContext, spec: JobSpec, executors: ExecutorRegistry | None
) -> JobControl | None:
    try:
        return (executors or local_only(ctx.paths)).select(spec)
    except NoExecutor:
        return None


def _executor_acts(
    ctx: ServiceContext, spec: JobSpec, executors: ExecutorRegistry | None, resume: bool
) -> bool:
    executor = _executor(ctx, spec, executors)
    if executor is None:
        return False
    handle = JobHandle.of(spec)
    return executor.resume(handle) if resume else executor.suspend(handle)


def pause_job(
    ctx: ServiceContext,
    job_id: str,
    *,
    by: str = PAUSED_BY_OPERATOR,
    lifecycle: Lifecycle | None = None,
    executors: ExecutorRegistry | None = None,
) -> PauseOutcome:
    """RUNNING → SUSPENDED, then suspend. Pausing a SUSPENDED job changes nothing.

    The job's executor may refuse first (a scheduler job that already runs cannot be
    held: :meth:`~vq.executors.base.JobControl.check_pausable`). In multi-user mode (a CLI
    with the ownership helper) a suspend that cannot reach a job whose group still runs
    (the group briefly holds only root's processes, which the owner may not signal) is
    undone: the job is RUNNING again, ``changed`` and ``signaled`` false, and nothing
    says it paused."""
    current = ctx.read_owned(job_id)
    executor = _executor(ctx, current, executors)
    if executor is not None and current.state is JobState.RUNNING:
        executor.check_pausable(current)
    started = executor.started if executor is not None else (lambda s: s.pgid is not None)
    writer = lifecycle or Lifecycle(ctx)
    moved = writer.pause(job_id, by, started=started)
    if not moved.changed:
        return PauseOutcome(moved.spec, changed=False, signaled=False)
    signaled = _executor_acts(ctx, moved.spec, executors, resume=False)
    refused = not signaled and ctx.owner_check is not None  # multi-user: another uid's group
    if refused and executor is not None and executor.running(JobHandle.of(moved.spec)):
        undone = writer.pause_undelivered(moved.spec)
        return PauseOutcome(undone.spec, changed=False, signaled=False)
    return PauseOutcome(moved.spec, changed=True, signaled=signaled)


def resume_job(
    ctx: ServiceContext,
    job_id: str,
    *,
    only_paused_by: str | None = None,
    lifecycle: Lifecycle | None = None,
    executors: ExecutorRegistry | None = None,
) -> PauseOutcome:
    """SUSPENDED → RUNNING (pause time accounted), then resume.

    With ``only_paused_by``, a job paused by someone else is left alone (changed=False).
    """
    ctx.check_job(job_id)
    moved = (lifecycle or Lifecycle(ctx)).resume(job_id, only_paused_by=only_paused_by)
    if not moved.changed:
        return PauseOutcome(moved.spec, changed=False, signaled=False)
    signaled = _executor_acts(ctx, moved.spec, executors, resume=True)
    return PauseOutcome(moved.spec, changed=True, signaled=signaled)
