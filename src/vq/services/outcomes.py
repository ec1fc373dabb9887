"""Recording how an attempt ended: shared by the daemon's supervisor and recovery.

Rules (§3.3, §4.4, §4.5, §4.7):

* A known exit code is classified: zero → COMPLETED; nonzero → the *same* spec back to
  PENDING with ``retry_count + 1`` and a backoff ``not_before`` while retry budget
  remains, else FAILED.
* An unknown exit code (collector killed, no marker) becomes ``unknown_state`` (FAILED
  when the daemon saw the collector die, ABORTED_BY_QUEUE in recovery) with a reason;
  FAILED still honours the retry budget.
* A spec that is already terminal keeps its state (sticky); a late exit code is only
  filled in as evidence.
* Non-COMPLETED endings get ``failure_tail`` from the stderr file, read before the
  spec lock is taken (never slow I/O under the lock).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta

from vq._fs import open_regular_path, read_regular
from vq.domain.events import transition_event
from vq.domain.failure_tail import TAIL_BYTES, failure_tail
from vq.domain.lifecycle import Outcome, apply_transition, classify_exit, retry_backoff_seconds
from vq.domain.spec import JobSpec
from vq.domain.states import JobState
from vq.services.context import ServiceContext
from vq.store.events import append_event

__all__ = ["AttemptEnd", "finish_attempt", "read_exit_marker", "read_stderr_tail"]


def read_exit_marker(ctx: ServiceContext, job_id: str) -> int | None:
    """The command's exit code from ``_vq/exit-code``, or None if absent or invalid."""
    try:
        text = read_regular(ctx.paths.exit_code(job_id), 64).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() and int(text) < 65536 else None


def read_stderr_tail(ctx: ServiceContext, spec: JobSpec) -> str | None:
    """``failure_tail`` of the job's stderr file; never raises."""
    path = ctx.paths.workspace(spec.id) / spec.stderr_path
    try:
        with os.fdopen(open_regular_path(path, follow=True), "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            handle.seek(max(0, size - TAIL_BYTES - 1))
            data = handle.read(TAIL_BYTES + 1)
    except OSError:
        return None
    return failure_tail(data)


@dataclass(frozen=True)
class AttemptEnd:
    spec: JobSpec
    previous: JobState
    changed: bool


def _decide(spec: JobSpec, exit_code: int | None, unknown: Outcome, ctx: ServiceContext) -> Outcome:
    now = ctx.now()
    if exit_code is not None:
        return classify_exit(spec, exit_code, now)
    if unknown.state is JobState.FAILED and spec.retry_count < spec.retry_max:
        delay = retry_backoff_seconds(spec.retry_count, spec.retry_backoff_seconds or 30)
        return Outcome(
            JobState.PENDING,
            f"{unknown.reason}; retry {spec.retry_count + 1} of {spec.retry_max} in {delay}s",
            now + timedelta(seconds=delay),
        )
    return unknown


def finish_attempt(
    ctx: ServiceContext,
    job_id: str,
    exit_code: int | None,
    *,
    unknown_state: JobState = JobState.FAILED,
    unknown_reason: str = "the job's exit code is unknown",
    marker_backed: bool = False,
) -> AttemptEnd:
    """Persist the end of the current attempt (see module rules).

    ``marker_backed``: the exit code came from the collector's durable ``_vq/exit-code``
    marker. The spec write is then atomic but not fsync'd: after a power loss the spec
    may still say RUNNING, and recovery re-derives the identical outcome from the marker.
    Without a marker the outcome exists nowhere else, so that write is fully durable.
    """
    # The stderr tail is read before the lock is taken, and only when it can be needed.
    tail = None if exit_code == 0 else read_stderr_tail(ctx, ctx.store.read(job_id))
    unknown = Outcome(unknown_state, unknown_reason)
    seen: dict[str, JobState] = {}

    def mutate(spec: JobSpec) -> JobSpec | None:
        seen["previous"] = spec.state
        if spec.is_terminal:
            if exit_code is not None and spec.exit_code is None:
                spec.exit_code = exit_code
                return spec
            return None
        if spec.state is JobState.PENDING:
            return None  # not running: nothing of this attempt to record
        if spec.state is JobState.SUSPENDED:
            spec.paused_at = spec.paused_monotonic_at = spec.paused_by = None
            spec.state = JobState.RUNNING
        outcome = _decide(spec, exit_code, unknown, ctx)
        spec.exit_code = exit_code
        if outcome.state is JobState.PENDING:
            spec.retry_count += 1
            spec.not_before = outcome.retry_not_before
        elif outcome.state is not JobState.COMPLETED:
            spec.failure_tail = tail
        return apply_transition(spec, outcome.state, ctx.now(), reason=outcome.reason)

    spec = ctx.store.update(job_id, mutate, durable=not (marker_backed and exit_code is not None))
    previous = seen.get("previous", spec.state)
    changed = spec.state is not previous
    if changed:
        append_event(
            ctx.paths,
            transition_event(
                job_id,
                ctx.now(),
                previous.value,
                spec.state.value,
                reason=spec.failure_reason if spec.state is not JobState.COMPLETED else None,
                exit_code=spec.exit_code,
            ),
        )
    return AttemptEnd(spec, previous, changed)
