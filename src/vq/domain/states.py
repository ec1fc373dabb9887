"""Job states (§3.3) and the transition table.

Three writable nonterminal states, seven writable terminal states, and INTERRUPTED, a
legacy terminal value accepted on read and never written. Terminal states are sticky:
no transition leaves them; late evidence may fill fields such as ``exit_code`` but never
replaces the state (§4.5).
"""

from __future__ import annotations

import enum

from vq.errors import Conflict

__all__ = [
    "ACTIVE",
    "ALLOWED",
    "NONTERMINAL",
    "TERMINAL",
    "TERMINAL_NAMES",
    "WRITABLE_TERMINAL",
    "InvalidTransition",
    "JobState",
    "can_transition",
    "check_transition",
]


class JobState(enum.StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUSPENDED = "SUSPENDED"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    KILLED = "KILLED"
    OOM_KILLED = "OOM_KILLED"
    STARVED = "STARVED"
    TIME_EXCEEDED = "TIME_EXCEEDED"
    ABORTED_BY_QUEUE = "ABORTED_BY_QUEUE"
    INTERRUPTED = "INTERRUPTED"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL


NONTERMINAL: frozenset[JobState] = frozenset(
    {JobState.PENDING, JobState.RUNNING, JobState.SUSPENDED}
)
#: States that hold a process (and so a reservation) on the local path.
ACTIVE: frozenset[JobState] = frozenset({JobState.RUNNING, JobState.SUSPENDED})
TERMINAL: frozenset[JobState] = frozenset(set(JobState) - NONTERMINAL)
WRITABLE_TERMINAL: frozenset[JobState] = TERMINAL - {JobState.INTERRUPTED}
#: The terminal states by name, for code that reads JSON (clients, tests, benchmarks).
TERMINAL_NAMES: frozenset[str] = frozenset(state.value for state in TERMINAL)

_RUN_ENDINGS = WRITABLE_TERMINAL

#: The legal moves. Anything absent is refused; terminal states map to nothing.
ALLOWED: dict[JobState, frozenset[JobState]] = {
    # A pending job starts, is killed, or is failed by a gate (dependency cascade,
    # dispatch-time check). It cannot complete or be watchdog-killed without running.
    JobState.PENDING: frozenset({JobState.RUNNING, JobState.KILLED, JobState.FAILED}),
    # A running job may pause, return to PENDING for a retry, or end in any way.
    JobState.RUNNING: frozenset({JobState.SUSPENDED, JobState.PENDING} | _RUN_ENDINGS),
    # A suspended job resumes or ends (kill, recovery abort, an external signal...).
    JobState.SUSPENDED: frozenset({JobState.RUNNING} | _RUN_ENDINGS),
    **{state: frozenset() for state in TERMINAL},
}


class InvalidTransition(Conflict):
    """A state change the table refuses (for example leaving a terminal state)."""

    default_reference = "invalid-transition"


def can_transition(current: JobState, target: JobState) -> bool:
    """Whether ``current -> target`` is a legal move."""
    return target in ALLOWED[current]


def check_transition(current: JobState, target: JobState) -> None:
    """Raise :class:`InvalidTransition` unless ``current -> target`` is legal."""
    if not can_transition(current, target):
        if current.is_terminal:
            raise InvalidTransition(
                f"job is already {current.value}; terminal states are final",
                hint="use `vq resubmit ID` to run it again",
            )
        raise InvalidTransition(f"a {current.value} job cannot become {target.value}")
