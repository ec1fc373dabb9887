"""What each lifecycle request decides, as pure functions of the spec on disk.

Each ``decide_*`` function receives the current spec (read under the spec lock by
:class:`vq.services.lifecycle.Lifecycle`) and the request's arguments, and returns the
spec to write — with :func:`vq.domain.lifecycle.apply_transition` applied — or None to
leave it as it is. A refusal that the caller must hear about is raised
(:class:`~vq.errors.Conflict`). Nothing here reads or writes the state root: the writer
owns the lock, the events and the end-of-job bookkeeping; these functions own the rules.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from vq.domain.lifecycle import Outcome, apply_transition
from vq.domain.programs import ProgramStatus, resolved_pin
from vq.domain.spec import JobSpec, WatchdogEvidence
from vq.domain.states import JobState
from vq.domain.watchdog import Evidence
from vq.errors import Conflict
from vq.services.outcomes import decide_outcome

__all__ = [
    "decide_claim",
    "decide_fail_dispatch",
    "decide_fail_pending",
    "decide_finish_attempt",
    "decide_kill",
    "decide_pause",
    "decide_pause_undelivered",
    "decide_requeue_never_started",
    "decide_requeue_unlaunched",
    "decide_resume",
    "decide_scheduler_verdict",
    "decide_watchdog_verdict",
    "paused_seconds",
]


def _clear_pause(spec: JobSpec) -> None:
    spec.paused_at = spec.paused_monotonic_at = spec.paused_by = None


def decide_claim(
    spec: JobSpec,
    *,
    now: datetime,
    workdir: str,
    program: ProgramStatus | None,
    cores: list[int] | None,
    attempt: str,
) -> JobSpec | None:
    """PENDING and due → RUNNING, recording the workdir, the program SHA that will
    actually run (not the submit one), the pinned cores and the attempt's name."""
    if spec.state is not JobState.PENDING:
        return None
    if spec.not_before is not None and spec.not_before > now:
        return None
    spec.workdir = workdir
    spec.cpu_affinity = cores
    if program is not None:
        spec.program_runtime_pin = resolved_pin(program, spec.program_runtime_pin)
    moved = apply_transition(spec, JobState.RUNNING, now)
    moved.launch_attempt = attempt  # names this attempt's start record
    return moved


def decide_requeue_unlaunched(spec: JobSpec, *, now: datetime, reason: str) -> JobSpec | None:
    """RUNNING → PENDING for a claim with no launched process recorded."""
    if spec.state is not JobState.RUNNING or spec.pid is not None:
        return None
    spec.started_at = None
    return apply_transition(spec, JobState.PENDING, now, reason=reason)


def decide_requeue_never_started(
    spec: JobSpec,
    *,
    now: datetime,
    attempt: str | None,
    reason: str,
    delay_seconds: float,
) -> JobSpec | None:
    """RUNNING → PENDING for the attempt ``attempt`` (any other state or attempt stays),
    its launch identity cleared, due after ``delay_seconds``; no retry budget used."""
    if spec.state is not JobState.RUNNING or spec.launch_attempt != attempt:
        return None
    spec.started_at = None
    spec.pid = spec.pgid = spec.pid_start_time = None
    spec.launch_attempt = None
    if delay_seconds > 0:
        spec.not_before = now + timedelta(seconds=delay_seconds)
    return apply_transition(spec, JobState.PENDING, now, reason=reason)


def decide_fail_pending(spec: JobSpec, *, now: datetime, reason: str) -> JobSpec | None:
    """PENDING → FAILED; any other state stays."""
    if spec.state is not JobState.PENDING:
        return None
    return apply_transition(spec, JobState.FAILED, now, reason=reason)


def decide_fail_dispatch(spec: JobSpec, *, now: datetime, reason: str) -> JobSpec | None:
    """A claimed (RUNNING/SUSPENDED) job → FAILED, its pause cleared; a terminal or
    PENDING spec stays."""
    if spec.is_terminal or spec.state is JobState.PENDING:
        return None
    _clear_pause(spec)
    return apply_transition(spec, JobState.FAILED, now, reason=reason)


def decide_watchdog_verdict(
    spec: JobSpec, *, now: datetime, state: JobState, reason: str, evidence: Evidence
) -> JobSpec | None:
    """RUNNING → the watchdog's ``state``, its ``evidence`` kept on the spec
    (``watchdog_evidence``: the reading that fired, taken at ``finished_at``); a paused
    or ended job stays."""
    if spec.state is not JobState.RUNNING:
        return None
    moved = apply_transition(spec, state, now, reason=reason)
    moved.watchdog_evidence = WatchdogEvidence.model_validate(evidence)
    return moved


def decide_finish_attempt(
    spec: JobSpec,
    *,
    now: datetime,
    exit_code: int | None,
    unknown: Outcome,
    tail: str | None,
) -> JobSpec | None:
    """The end of the current attempt (rules in :mod:`vq.services.outcomes`): a terminal
    spec keeps its state and only gets a missing exit code; a PENDING one stays; a
    SUSPENDED one is resumed first. A retry counts against the budget; a non-COMPLETED
    ending records ``tail`` as its ``failure_tail``."""
    if spec.is_terminal:
        if exit_code is not None and spec.exit_code is None:
            spec.exit_code = exit_code
            return spec
        return None
    if spec.state is JobState.PENDING:
        return None  # not running: nothing of this attempt to record
    if spec.state is JobState.SUSPENDED:
        _clear_pause(spec)
        spec = apply_transition(spec, JobState.RUNNING, now)
    outcome = decide_outcome(spec, exit_code, unknown, now)
    spec.exit_code = exit_code
    if outcome.state is JobState.PENDING:
        spec.retry_count += 1
        spec.not_before = outcome.retry_not_before
    elif outcome.state is not JobState.COMPLETED:
        spec.failure_tail = tail
    return apply_transition(spec, outcome.state, now, reason=outcome.reason)


def decide_scheduler_verdict(
    spec: JobSpec, *, now: datetime, state: JobState, reason: str, exit_code: int | None
) -> JobSpec | None:
    """The scheduler's own ending, whatever the exit marker says: a terminal spec keeps
    its state and only gets a missing exit code; a PENDING one stays."""
    if spec.is_terminal:
        if exit_code is not None and spec.exit_code is None:
            spec.exit_code = exit_code
            return spec
        return None
    if spec.state is JobState.PENDING:
        return None
    _clear_pause(spec)
    if spec.state is JobState.SUSPENDED:
        spec = apply_transition(spec, JobState.RUNNING, now)
    spec.exit_code = exit_code
    return apply_transition(spec, state, now, reason=reason)


def decide_kill(spec: JobSpec, *, now: datetime, reason: str) -> JobSpec | None:
    """→ KILLED (sticky). A KILLED job stays; another terminal state is a Conflict."""
    if spec.state is JobState.KILLED:
        return None
    if spec.is_terminal:
        raise Conflict(
            f"job {spec.id} already ended as {spec.state.value}",
            hint="there is nothing to kill; `vq status` shows how it ended",
        )
    if spec.state is JobState.SUSPENDED:
        _clear_pause(spec)
    return apply_transition(spec, JobState.KILLED, now, reason=reason)


def decide_pause(
    spec: JobSpec,
    *,
    now: datetime,
    now_monotonic: float,
    by: str,
    started: Callable[[JobSpec], bool],
) -> JobSpec | None:
    """RUNNING → SUSPENDED with who paused it and when. A SUSPENDED job stays; any other
    state, or a job still starting (``started`` says no), is a Conflict."""
    if spec.state is JobState.SUSPENDED:
        return None
    if spec.state is not JobState.RUNNING:
        raise Conflict(
            f"job {spec.id} is {spec.state.value}; only a RUNNING job can be paused",
            hint="`vq status` shows its state",
        )
    if not started(spec):
        raise Conflict(f"job {spec.id} is still starting", hint="try again in a moment")
    spec.paused_at = now
    spec.paused_monotonic_at = now_monotonic
    spec.paused_by = by
    return apply_transition(spec, JobState.SUSPENDED, now)


def decide_resume(
    spec: JobSpec, *, now: datetime, now_monotonic: float, only_paused_by: str | None
) -> JobSpec | None:
    """SUSPENDED → RUNNING with the pause added to ``paused_seconds_total``. A RUNNING
    job, or one paused by someone other than ``only_paused_by``, stays; any other state
    is a Conflict."""
    if spec.state is JobState.RUNNING:
        return None
    if spec.state is not JobState.SUSPENDED:
        raise Conflict(
            f"job {spec.id} is {spec.state.value}; only a SUSPENDED job can be resumed",
            hint="`vq status` shows its state",
        )
    if only_paused_by is not None and spec.paused_by != only_paused_by:
        return None
    spec.paused_seconds_total += paused_seconds(spec, now_monotonic)
    _clear_pause(spec)
    return apply_transition(spec, JobState.RUNNING, now)


def decide_pause_undelivered(
    spec: JobSpec, *, now: datetime, paused_at: datetime | None
) -> JobSpec | None:
    """SUSPENDED → RUNNING again when the pause written at ``paused_at`` never reached
    the job (its group is alive, but this process may not signal it): the spec says
    what is true. No pause time is counted. A later pause, or any other state, stays."""
    if spec.state is not JobState.SUSPENDED or spec.paused_at != paused_at:
        return None
    _clear_pause(spec)
    return apply_transition(spec, JobState.RUNNING, now)


def paused_seconds(spec: JobSpec, now_monotonic: float) -> float:
    """How long the current pause has lasted (wall clock if the machine rebooted)."""
    if spec.paused_monotonic_at is not None and spec.paused_monotonic_at <= now_monotonic:
        return now_monotonic - spec.paused_monotonic_at
    return 0.0
