"""Pause and resume a running local job: SIGSTOP / SIGCONT to its process group.

Order of effects: the SUSPENDED intent (``paused_at``, ``paused_monotonic_at``,
``paused_by``) is durable *before* SIGSTOP; on resume, RUNNING (with the pause added to
``paused_seconds_total``) is durable before SIGCONT. A crash between the two leaves a
spec whose state says what was meant; recovery re-sends the matching signal.

A suspended job keeps its reservation, is not sampled, and is not judged by the watchdog.
``paused_by`` is "operator" for ``vq pause`` and "memory-pressure" for the host-pressure
pass; a resume can be limited to one ``paused_by`` so the pressure pass never resumes
what an operator paused.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass
from typing import Any

from vq.domain.events import transition_event
from vq.domain.spec import JobSpec
from vq.domain.states import JobState
from vq.errors import Conflict
from vq.executors import procs
from vq.executors.identity import group_is_job
from vq.services.context import ServiceContext
from vq.store.events import append_event

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

    def as_dict(self) -> dict[str, Any]:
        """The ``vq pause|resume --json`` item (a stable schema, see docs/json.md)."""
        return {"id": self.spec.id, "state": self.spec.state.value, "changed": self.changed}


def _signal(spec: JobSpec, sig: int) -> bool:
    if spec.pgid is None or not group_is_job(spec.id, spec.pgid, spec.pid_start_time):
        return False
    return procs.signal_group(spec.pgid, sig)


def _event(ctx: ServiceContext, spec: JobSpec, before: JobState, reason: str) -> None:
    append_event(
        ctx.paths,
        transition_event(spec.id, ctx.now(), before.value, spec.state.value, reason=reason),
    )


def pause_job(ctx: ServiceContext, job_id: str, *, by: str = PAUSED_BY_OPERATOR) -> PauseOutcome:
    """RUNNING → SUSPENDED, then SIGSTOP. Pausing a SUSPENDED job changes nothing."""
    now = ctx.now()
    changed: list[bool] = []

    def mutate(spec: JobSpec) -> JobSpec | None:
        if spec.state is JobState.SUSPENDED:
            return None
        if spec.state is not JobState.RUNNING:
            raise Conflict(
                f"job {job_id} is {spec.state.value}; only a RUNNING job can be paused",
                hint="`vq status` shows its state",
            )
        if spec.pgid is None:
            raise Conflict(f"job {job_id} is still starting", hint="try again in a moment")
        changed.append(True)
        spec.state = JobState.SUSPENDED
        spec.paused_at = now
        spec.paused_monotonic_at = time.monotonic()
        spec.paused_by = by
        return spec

    spec = ctx.store.update(job_id, mutate)
    if not changed:
        return PauseOutcome(spec, changed=False, signaled=False)
    signaled = _signal(spec, signal.SIGSTOP)
    _event(ctx, spec, JobState.RUNNING, f"paused by {by}")
    return PauseOutcome(spec, changed=True, signaled=signaled)


def paused_seconds(spec: JobSpec, now_monotonic: float) -> float:
    """How long the current pause has lasted (wall clock if the machine rebooted)."""
    if spec.paused_monotonic_at is not None and spec.paused_monotonic_at <= now_monotonic:
        return now_monotonic - spec.paused_monotonic_at
    return 0.0


def resume_job(
    ctx: ServiceContext, job_id: str, *, only_paused_by: str | None = None
) -> PauseOutcome:
    """SUSPENDED → RUNNING (pause time accounted), then SIGCONT.

    With ``only_paused_by``, a job paused by someone else is left alone (changed=False).
    """
    now_mono = time.monotonic()
    changed: list[bool] = []

    def mutate(spec: JobSpec) -> JobSpec | None:
        if spec.state is JobState.RUNNING:
            return None
        if spec.state is not JobState.SUSPENDED:
            raise Conflict(
                f"job {job_id} is {spec.state.value}; only a SUSPENDED job can be resumed",
                hint="`vq status` shows its state",
            )
        if only_paused_by is not None and spec.paused_by != only_paused_by:
            return None
        changed.append(True)
        spec.paused_seconds_total += paused_seconds(spec, now_mono)
        spec.paused_at = spec.paused_monotonic_at = spec.paused_by = None
        spec.state = JobState.RUNNING
        return spec

    spec = ctx.store.update(job_id, mutate)
    if not changed:
        return PauseOutcome(spec, changed=False, signaled=False)
    signaled = _signal(spec, signal.SIGCONT)
    _event(ctx, spec, JobState.SUSPENDED, "resumed")
    return PauseOutcome(spec, changed=True, signaled=signaled)
