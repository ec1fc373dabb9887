"""A job holding a lane's capacity, as the lane's loop-side bookkeeping sees it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from vq.dialects import AccountingRecord, ParseFailure, SchedulerPhase, SubmitAccepted
from vq.domain.states import JobState
from vq.errors import (
    AuthFailed,
    CommandNotStarted,
    HostKeyChanged,
    HostKeyUnknown,
    SshUnreachable,
    TransportError,
)

__all__ = [
    "ACTIVE_PHASES",
    "LaneJob",
    "SubmitVerdict",
    "ambiguous",
    "controller_unreached",
    "not_started",
    "submit_verdict",
]

#: scheduler_state for each phase in which the scheduler job is still alive.
ACTIVE_PHASES = {
    SchedulerPhase.QUEUED: "queued",
    SchedulerPhase.HELD: "held",
    SchedulerPhase.RUNNING: "running",
    SchedulerPhase.FINISHING: "finishing",
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
    #: The submit guard's records directory on the login host (from the intent; None:
    #: an intent written before the guard existed, looked up by tag alone).
    records: str | None = None
    #: The guard's token of a call proved never submitted: the next call supersedes it.
    supersede: str | None = None
    #: The guard's token of a call whose submission is in doubt (the scheduler decides).
    in_doubt: str | None = None
    #: Submissions that could not reach the controller so far (for the retry backoff).
    unreached: int = 0
    accounting: AccountingRecord | None = None  # the record the end was read with, if any
    #: The observation fields last written to the spec (None: the spec may differ from
    #: any observation, write the next one) and when (monotonic), so that a round writes
    #: nothing for a job whose observation did not change (see ``HEARTBEAT_REFRESH``).
    observed: tuple[object, ...] | None = None
    observed_at: float = 0.0
    #: When the cluster started the job, as first derived from its reported elapsed time
    #: (kept so that later rounds write the same moment); None while it waits.
    cluster_started_at: datetime | None = None
    #: When (monotonic) the spec's scheduler fields were last written outside an
    #: observation (a hold or release): a round asked before then is stale for this job.
    written_outside_at: float = float("-inf")


def ambiguous(detail: str) -> bool:
    """Scheduler words that mean "maybe": a timeout or a busy controller (sbatch's
    "temporarily unable to accept job")."""
    lowered = detail.lower()
    return any(
        word in lowered
        for word in (
            "timed out",
            "socket",
            "try again",
            "eagain",
            "rate limit",
            "too many",
            "temporarily",
        )
    )


#: The submit command's words for a controller it never reached (slurmctld or pbs_server
#: down or not listening): the job was not submitted, and the same call may succeed later.
_UNREACHED = (
    "unable to contact slurm controller",
    "connect failure",
    "communication connection failure",
    "cannot connect to server",
    "connection refused",
)


def controller_unreached(detail: str) -> bool:
    """Whether a submit command's failure says it never reached the controller: a
    transient refusal (nothing was submitted), retried with backoff, never a job failure.
    A timeout after the request was sent is :func:`ambiguous` instead."""
    lowered = detail.lower()
    return any(words in lowered for words in _UNREACHED) and not any(
        word in lowered for word in ("timed out", "timeout")
    )


SubmitVerdict = Literal["accepted", "unreached", "ambiguous", "refused"]


def submit_verdict(answer: SubmitAccepted | ParseFailure) -> SubmitVerdict:
    """What a submit command's own answer means: ``accepted`` (a job id), ``unreached``
    (the controller was never reached: nothing submitted, try again later),
    ``ambiguous`` (it may have landed: only the scheduler can tell; an exit status of 0
    without a readable id is one) or ``refused`` (the scheduler's own refusal)."""
    if isinstance(answer, SubmitAccepted):
        return "accepted"
    if answer.kind != "command_failed" or ambiguous(answer.detail):
        return "ambiguous" if not controller_unreached(answer.detail) else "unreached"
    return "unreached" if controller_unreached(answer.detail) else "refused"


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
