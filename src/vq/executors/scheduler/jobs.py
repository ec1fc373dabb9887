"""A job holding a lane's capacity, as the lane's loop-side bookkeeping sees it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from vq.dialects import AccountingRecord, SchedulerPhase
from vq.domain.states import JobState
from vq.errors import (
    AuthFailed,
    CommandNotStarted,
    HostKeyChanged,
    HostKeyUnknown,
    SshUnreachable,
    TransportError,
)

__all__ = ["ACTIVE_PHASES", "LaneJob", "ambiguous", "not_started"]

#: scheduler_state for each phase in which the scheduler job is still alive.
ACTIVE_PHASES = {
    SchedulerPhase.QUEUED: "queued",
    SchedulerPhase.HELD: "held",
    SchedulerPhase.RUNNING: "running",
    SchedulerPhase.FINISHING: "running",
}


@dataclass
class LaneJob:
    """A job holding lane capacity (loop-owned)."""

    job_id: str
    phase: str  # the spec's scheduler_state as this lane drives it
    scheduler_job_id: str | None = None
    nonce: str | None = None
    submitted_at: datetime | None = None
    busy: bool = False  # a worker step for it is in flight
    due: float = 0.0  # monotonic: when its next step may run
    cancel_wanted: bool = False
    copy_tries: int = 0
    marker: int | None = None
    end: tuple[JobState | None, str] | None = None  # (abnormal state, raw state) once ended
    absent_checks: int = 0
    accounting: AccountingRecord | None = None  # the record the end was read with, if any
    #: The observation fields last written to the spec (None: the spec may differ from
    #: any observation, write the next one) and when (monotonic), so that a round writes
    #: nothing for a job whose observation did not change (see ``HEARTBEAT_REFRESH``).
    observed: tuple[object, ...] | None = None
    observed_at: float = 0.0
    #: When (monotonic) the spec's scheduler fields were last written outside an
    #: observation (a hold or release): a round asked before then is stale for this job.
    written_outside_at: float = float("-inf")


def ambiguous(detail: str) -> bool:
    """Scheduler words that mean "maybe": a timeout or a busy controller."""
    lowered = detail.lower()
    return any(
        word in lowered
        for word in ("timed out", "socket", "try again", "eagain", "rate limit", "too many")
    )


#: ssh's own words for a connection that was never established (no remote command ran).
_NOT_CONNECTED = re.compile(
    r"^ssh: (connect to host .*: |Could not resolve hostname)|Name or service not known"
    r"|Temporary failure in name resolution"
)


def not_started(exc: TransportError) -> bool:
    """True when ``exc`` proves no remote command ran: ssh could not start, refused
    the host key or the credentials, or never established the connection (its last
    words ``ssh: connect to host H port P: Connection refused``). Any other transport
    failure may have happened after the command started: ambiguous."""
    if isinstance(exc, (CommandNotStarted, HostKeyChanged, HostKeyUnknown, AuthFailed)):
        return True
    return isinstance(exc, SshUnreachable) and bool(_NOT_CONNECTED.search(exc.detail.strip()))
