"""Killing a job (§4.4): PENDING → KILLED at once; RUNNING/SUSPENDED → KILLED, then
SIGTERM to the process group, a grace period, then SIGCONT + SIGKILL.

The KILLED state is written under the spec lock *before* any signal, so a concurrent
completion write by the daemon can never replace it (terminal states are sticky): either
the kill wins and the job is KILLED, or the completion won first and the kill is refused
with a Conflict naming the state the job reached.

Escalation after the grace is the caller's: the daemon's supervisor holds the job's
budget until the group is gone or SIGKILL is sent; without a daemon the CLI waits the
grace itself (:func:`escalate_after_grace`).
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass
from typing import Any

from vq.domain.events import make_event, transition_event
from vq.domain.lifecycle import apply_transition
from vq.domain.spec import JobSpec
from vq.domain.states import ACTIVE, JobState
from vq.errors import Conflict
from vq.executors import procs
from vq.executors.identity import group_is_job
from vq.services.context import ServiceContext
from vq.store.events import append_event

__all__ = [
    "KILL_GRACE_SECONDS",
    "KillOutcome",
    "escalate_after_grace",
    "kill_job",
    "terminate_group",
]

#: The grace owed to a SIGTERM'd group before SIGKILL (§4.4, an internal default).
KILL_GRACE_SECONDS = 10.0


@dataclass(frozen=True)
class KillOutcome:
    spec: JobSpec
    previous: JobState
    already_killed: bool
    signaled: bool

    def as_dict(self) -> dict[str, Any]:
        """The ``vq kill --json`` item (a stable schema, see docs/json.md)."""
        return {
            "id": self.spec.id,
            "previous_state": self.previous.value,
            "state": self.spec.state.value,
            "already_killed": self.already_killed,
            "signaled": self.signaled,
        }


def terminate_group(job_id: str, pgid: int | None, start_ticks: int | None) -> bool:
    """SIGTERM (and SIGCONT, so a stopped group can act on it) to the job's group.

    Returns whether a live group that is provably the job's was signalled.
    """
    if pgid is None or not group_is_job(job_id, pgid, start_ticks):
        return False
    sent = procs.signal_group(pgid, signal.SIGTERM)
    procs.signal_group(pgid, signal.SIGCONT)
    return sent


def kill_job(
    ctx: ServiceContext, job_id: str, *, reason: str = "killed by operator"
) -> KillOutcome:
    """Write KILLED (sticky), record the events, then SIGTERM the group if it runs."""
    now = ctx.now()
    seen: dict[str, object] = {}

    def mutate(spec: JobSpec) -> JobSpec | None:
        seen["previous"] = spec.state
        if spec.state is JobState.KILLED:
            return None
        if spec.is_terminal:
            raise Conflict(
                f"job {job_id} already ended as {spec.state.value}",
                hint="there is nothing to kill; `vq status` shows how it ended",
            )
        if spec.state is JobState.SUSPENDED:
            spec.paused_at = spec.paused_monotonic_at = spec.paused_by = None
        return apply_transition(spec, JobState.KILLED, now, reason=reason)

    spec = ctx.store.update(job_id, mutate)
    previous = JobState(str(seen["previous"]))
    if previous is JobState.KILLED:
        return KillOutcome(spec, previous, already_killed=True, signaled=False)
    append_event(ctx.paths, make_event("kill_requested", job_id, now, state=previous.value))
    append_event(
        ctx.paths,
        transition_event(job_id, now, previous.value, JobState.KILLED.value, reason=reason),
    )
    signaled = previous in ACTIVE and terminate_group(job_id, spec.pgid, spec.pid_start_time)
    return KillOutcome(spec, previous, already_killed=False, signaled=signaled)


def escalate_after_grace(
    job_id: str, pgid: int, start_ticks: int | None, grace: float = KILL_GRACE_SECONDS
) -> bool:
    """Wait up to ``grace`` for the group to exit; then SIGCONT + SIGKILL what remains.

    Returns True when SIGKILL had to be sent. Zombie members count as gone.
    """
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not procs.live_group_members(pgid):
            return False
        time.sleep(0.1)
    if not group_is_job(job_id, pgid, start_ticks):
        return False
    procs.signal_group(pgid, signal.SIGCONT)
    procs.signal_group(pgid, signal.SIGKILL)
    return True
