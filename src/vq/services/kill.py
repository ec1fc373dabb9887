"""Killing a job (§4.4): PENDING → KILLED at once; RUNNING/SUSPENDED → KILLED, then the
job's executor cancels it (SIGTERM to the process group), a grace period, then a forced
stop (SIGCONT + SIGKILL).

The KILLED state is written under the spec lock *before* any signal (by the lifecycle
writer), so a concurrent completion write by the daemon can never replace it (terminal
states are sticky): either the kill wins and the job is KILLED, or the completion won
first and the kill is refused with a Conflict naming the state the job reached.

Escalation after the grace is the caller's: the daemon's supervisor holds the job's
budget until the group is gone or the forced stop is sent; without a daemon the CLI
waits the grace itself (:func:`kill_and_wait`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from vq.domain.spec import JobSpec
from vq.domain.states import ACTIVE, JobState
from vq.executors.base import Executor, JobHandle, NoExecutor
from vq.executors.registry import ExecutorRegistry, local_only
from vq.protocol.answers import KillAnswer
from vq.services.context import ServiceContext
from vq.services.lifecycle import Lifecycle

__all__ = [
    "KILL_GRACE_SECONDS",
    "KillOutcome",
    "kill_and_wait",
    "kill_job",
    "stop_after_grace",
]

#: The grace owed to a SIGTERM'd group before SIGKILL (§4.4, an internal default).
KILL_GRACE_SECONDS = 10.0


@dataclass(frozen=True)
class KillOutcome:
    spec: JobSpec
    previous: JobState
    already_killed: bool
    signaled: bool

    def as_dict(self) -> KillAnswer:
        """The ``vq kill --json`` item (a stable schema, see docs/json.md)."""
        return {
            "id": self.spec.id,
            "previous_state": self.previous.value,
            "state": self.spec.state.value,
            "already_killed": self.already_killed,
            "signaled": self.signaled,
        }


def kill_job(
    ctx: ServiceContext,
    job_id: str,
    *,
    reason: str = "killed by operator",
    lifecycle: Lifecycle | None = None,
    executors: ExecutorRegistry | None = None,
) -> KillOutcome:
    """Write KILLED (sticky), record the events, then cancel the attempt if it runs.
    The ownership helper, if any, refuses another owner's job under the spec's lock."""
    ctx.check_job(job_id)
    moved = (lifecycle or Lifecycle(ctx)).kill(job_id, reason)
    if not moved.changed:
        return KillOutcome(moved.spec, moved.previous, already_killed=True, signaled=False)
    signaled = False
    if moved.previous in ACTIVE:
        try:
            executor = (executors or local_only(ctx.paths)).select(moved.spec)
        except NoExecutor:
            executor = None
        signaled = executor is not None and executor.cancel(JobHandle.of(moved.spec))
    return KillOutcome(moved.spec, moved.previous, already_killed=False, signaled=signaled)


def stop_after_grace(
    executor: Executor,
    handle: JobHandle,
    grace: float,
    *,
    monotonic: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    poll: float = 0.1,
) -> bool:
    """Wait up to ``grace`` seconds for the cancelled attempt to end; then force-stop
    what remains (through the executor's protocol: ``running``, ``force_stop``).

    For callers without a supervising loop (the CLI with no daemon). Returns True when
    the forced stop had to be sent and reached the job.
    """
    deadline = monotonic() + grace
    while monotonic() < deadline:
        if not executor.running(handle):
            return False
        sleep(poll)
    return executor.force_stop(handle)


def kill_and_wait(
    ctx: ServiceContext, job_id: str, grace: float = KILL_GRACE_SECONDS
) -> KillOutcome:
    """Without a daemon: kill, wait out the grace, force-stop what remains, and run the
    end-of-job bookkeeping once nothing of the job runs."""
    lifecycle = Lifecycle(ctx)
    executors = local_only(ctx.paths)
    outcome = kill_job(ctx, job_id, lifecycle=lifecycle, executors=executors)
    if outcome.signaled:
        # Signalled: a process without a daemon signals only its local executor's jobs.
        stop_after_grace(executors.local, JobHandle.of(outcome.spec), grace)
        lifecycle.ended(outcome.spec)
    return outcome
