"""Pure lifecycle rules: applying a transition to a spec, and classifying an exit.

:func:`apply_transition` is the only way a spec's ``state`` changes. It enforces the
§3.3 table (terminal states are sticky) and stamps the timestamps that go with a state.
:func:`classify_exit` turns a command's exit code into the next state, consuming retry
budget for a plain nonzero exit (§3.3: a retry returns the *same* spec to PENDING).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from vq.domain.spec import JobSpec
from vq.domain.states import JobState, check_transition

__all__ = [
    "RETRY_BACKOFF_CAP_SECONDS",
    "Outcome",
    "apply_transition",
    "classify_exit",
    "describe_exit",
    "retry_backoff_seconds",
    "signal_name",
]

RETRY_BACKOFF_BASE_SECONDS = 30
RETRY_BACKOFF_CAP_SECONDS = 3600

# A portable subset (§4.6): numbers that mean the same signal on Linux and macOS.
_SIGNALS = {
    1: "SIGHUP",
    2: "SIGINT",
    3: "SIGQUIT",
    4: "SIGILL",
    6: "SIGABRT",
    8: "SIGFPE",
    9: "SIGKILL",
    11: "SIGSEGV",
    13: "SIGPIPE",
    14: "SIGALRM",
    15: "SIGTERM",
}


def signal_name(number: int) -> str:
    """``9`` → ``SIGKILL``; unknown numbers stay generic (``signal 42``)."""
    return _SIGNALS.get(number, f"signal {number}")


def describe_exit(exit_code: int) -> str:
    """Human words for a wrapper exit code (128+N means killed by signal N)."""
    if 128 < exit_code < 160:
        number = exit_code - 128
        return f"killed by {signal_name(number)} (exit code {exit_code})"
    return f"exited with code {exit_code}"


def retry_backoff_seconds(retry_count: int, base: int = RETRY_BACKOFF_BASE_SECONDS) -> int:
    """Exponential backoff before retry number ``retry_count + 1``, capped at an hour."""
    return int(min(RETRY_BACKOFF_CAP_SECONDS, base * (2 ** max(0, retry_count))))


def apply_transition(
    spec: JobSpec,
    target: JobState,
    now: datetime,
    *,
    reason: str | None = None,
) -> JobSpec:
    """``spec`` moved to ``target`` (in place, also returned). Raises InvalidTransition.

    Entering RUNNING from PENDING stamps ``started_at`` and clears the previous
    attempt's process identity; entering a terminal state stamps ``finished_at``;
    ``reason`` becomes ``failure_reason`` for any state other than COMPLETED.
    """
    check_transition(spec.state, target)
    if target is JobState.RUNNING and spec.state is JobState.PENDING:
        spec.started_at = now
        spec.finished_at = None
        spec.pid = spec.pgid = spec.pid_start_time = None
        spec.launch_attempt = None
        spec.exit_code = None
        spec.failure_reason = None
        spec.failure_tail = None
    if target.is_terminal:
        spec.finished_at = now
    if reason is not None and target is not JobState.COMPLETED:
        spec.failure_reason = reason
    spec.state = target
    return spec


@dataclass(frozen=True)
class Outcome:
    """What a finished attempt means for its spec."""

    state: JobState
    reason: str | None
    retry_not_before: datetime | None = None


def classify_exit(spec: JobSpec, exit_code: int, now: datetime) -> Outcome:
    """Zero → COMPLETED; nonzero → PENDING retry while budget remains, else FAILED."""
    if exit_code == 0:
        return Outcome(JobState.COMPLETED, None)
    words = describe_exit(exit_code)
    if spec.retry_count < spec.retry_max:
        delay = retry_backoff_seconds(
            spec.retry_count, spec.retry_backoff_seconds or RETRY_BACKOFF_BASE_SECONDS
        )
        return Outcome(
            JobState.PENDING,
            f"{words}; retry {spec.retry_count + 1} of {spec.retry_max} in {delay}s",
            now + timedelta(seconds=delay),
        )
    return Outcome(JobState.FAILED, words)
