"""The values the scheduler dialects take and return (pure, immutable).

A dialect turns a :class:`ScriptRequest` into a batch script and builds argv lists for
the scheduler's commands; the caller runs them (over SSH or locally) and hands each
answer back as a :class:`CommandResult` to the matching parser. Parsers never raise on
scheduler output: every answer becomes a typed value, and anything vq cannot read
becomes a :class:`ParseFailure`, which callers treat as "unknown" (the job keeps its
prior nonterminal reservation, §8.2).

Only *our own* inputs can raise: a directive value, path or job id outside the safe
character set is refused with :class:`UnsafeSchedulerValue`, which names the field.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Generic, Literal, TypeVar

from vq.domain.states import JobState
from vq.errors import InvalidInput

__all__ = [
    "AccountingRecord",
    "AccountingReport",
    "AccountingStep",
    "CommandResult",
    "ControlOutcome",
    "JobObservation",
    "ParseFailure",
    "ParseFailureKind",
    "ProgramHooks",
    "Query",
    "RecheckRequired",
    "SchedulerPhase",
    "ScriptRequest",
    "SplitRequired",
    "StatusReport",
    "SubmitAccepted",
    "TagMatch",
    "UnsafeSchedulerValue",
]

T = TypeVar("T")


class UnsafeSchedulerValue(InvalidInput):
    """A value vq would put into a batch script or a scheduler argv is outside the safe
    character set (or otherwise malformed). ``field`` names the offending field."""

    default_reference = "unsafe-scheduler-value"

    def __init__(self, field_name: str, message: str, *, hint: str | None = None):
        super().__init__(
            f"scheduler value {field_name}: {message}",
            hint=hint or "use letters, digits and . _ - + / = , @ : only (no spaces or quotes)",
        )
        self.field = field_name


# --------------------------------------------------------------------------------------
# requests
# --------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ProgramHooks:
    """``[hosts.HOST.scheduler_program_hooks.NAME]`` for the job's program (trusted site
    configuration): shell lines before and after the command, and an argv the command
    is appended to."""

    prologue: tuple[str, ...] = ()
    epilogue: tuple[str, ...] = ()
    command_wrapper: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ScriptRequest:
    """Everything one batch script needs; built by the scheduler executor from the
    JobSpec and the scheduler host's configuration.

    Paths are on the cluster. ``workspace`` is the absolute staged workspace;
    ``stdout_path``/``stderr_path`` are relative to it. ``prologue``/``epilogue`` and
    ``hooks`` are trusted shell lines from the host configuration, inserted verbatim.
    ``environment`` adds further ``VQ_*`` variables (never driver-local paths).
    ``user_environment`` holds the variables the submit named (``--export NAME``,
    ``--env``): shell identifiers, neither ``VQ_*`` nor the script's own ``vq_*``, exported
    after vq's tools are checked and before the prologues.
    """

    job_id: str
    nonce: str
    command: tuple[str, ...]
    workspace: str
    cpus: int
    stdout_path: str = "stdout.log"
    stderr_path: str = "stderr.log"
    scheduler_tasks: int | None = None
    mem_mb: int | None = None
    wall_time_seconds: int | None = None
    program: str | None = None
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    mem_directive: Literal["request", "omit"] = "request"
    gnu_time_command: str = "/usr/bin/time"
    node_scratch_dir: str | None = None
    prologue: tuple[str, ...] = ()
    epilogue: tuple[str, ...] = ()
    hooks: ProgramHooks | None = None
    environment: Mapping[str, str] = field(default_factory=dict)
    user_environment: Mapping[str, str] = field(default_factory=dict)
    #: (root, digest) of the runtime generation the job is bound to: verified on the node
    #: before the command (exit 126 with a reason), its payload as VQ_RUNTIME_PAYLOAD
    runtime_generation: tuple[str, str] | None = None
    #: (git_dir, commit) of an enforced runtime pin resolved from the lane's registry:
    #: the checkout must still be at that commit on the node, else exit 126, the command
    #: not started
    runtime_commit: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class CommandResult:
    """What running one argv produced (the caller's runner fills it in)."""

    returncode: int
    stdout: str
    stderr: str = ""


@dataclass(frozen=True, slots=True)
class Query(Generic[T]):
    """An argv and the one parser for its answer: run ``argv``, then ``parse(result)``."""

    argv: tuple[str, ...]
    parser: Callable[[CommandResult], T | ParseFailure]
    #: Asked instead when ``argv``'s answer is larger than the runner accepts (a query
    #: by owner whose owner has far more jobs than vq tracks); None: no alternative.
    fallback: Query[T] | None = None

    def parse(self, result: CommandResult) -> T | ParseFailure:
        return self.parser(result)


# --------------------------------------------------------------------------------------
# answers
# --------------------------------------------------------------------------------------
#: ``timed_out``: the command was stopped on the scheduler host after its time limit (a
#: slow or hung scheduler command: the host itself answered).
ParseFailureKind = Literal["empty", "garbage", "partial", "command_failed", "timed_out"]


@dataclass(frozen=True, slots=True)
class ParseFailure:
    """The scheduler's answer could not be read. Never evidence about a job: callers
    keep the job's prior nonterminal state. ``detail`` is short and bounded."""

    command: str
    kind: ParseFailureKind
    detail: str


class SchedulerPhase(StrEnum):
    """The cluster phase of a job, the same vocabulary for every dialect.

    ``unknown`` is a state code this dialect does not know: never terminal."""

    QUEUED = "queued"
    HELD = "held"
    RUNNING = "running"
    FINISHING = "finishing"
    ENDED = "ended"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class SubmitAccepted:
    """``sbatch --parsable`` / ``qsub`` accepted the script as ``scheduler_job_id``."""

    scheduler_job_id: str
    cluster: str | None = None


@dataclass(frozen=True, slots=True)
class JobObservation:
    """One job as a status query saw it.

    ``queued_reason`` is the scheduler's own words for why a job that has not started
    is waiting (Slurm's Reason, Torque's comment); None when it gave none or the job is
    not waiting. Walltimes keep the scheduler's text and add seconds when readable.
    ``exit_code``/``exit_signal`` are what the scheduler reported, if anything (the
    exit marker stays the authority for the return code)."""

    scheduler_job_id: str
    phase: SchedulerPhase
    raw_state: str
    queued_reason: str | None = None
    exec_host: str | None = None
    walltime_used: str | None = None
    walltime_used_seconds: int | None = None
    walltime_limit: str | None = None
    walltime_limit_seconds: int | None = None
    job_name: str | None = None
    exit_code: int | None = None
    exit_signal: int | None = None
    abnormal_end_state: JobState | None = None


@dataclass(frozen=True, slots=True)
class StatusReport:
    """The answer of one status query for the requested ids.

    ``observed`` maps an id to what the scheduler said about it. ``unlisted`` ids were
    simply not in the answer: that is never evidence that a job is gone. ``absent`` ids
    were each rejected by the scheduler by name (an exact unknown-job diagnostic for
    that one id), the only evidence of absence. ``unanswered`` ids are those whose own
    query of a split failed: unknown, like a failed query. ``warnings`` name unknown
    state codes and lines for ids nobody asked about."""

    observed: Mapping[str, JobObservation]
    unlisted: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    unanswered: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SplitRequired:
    """A query of several ids failed with the scheduler's exact invalid-job-id
    diagnostic: query each of ``ids`` alone to learn which one is gone (§8.2), then
    combine the answers with :meth:`resolve`."""

    ids: tuple[str, ...]

    def resolve(
        self,
        answers: Mapping[str, StatusReport | SplitRequired | RecheckRequired | ParseFailure],
    ) -> StatusReport:
        """One report from the single-id answers (``answers[id]`` is the parsed answer
        of ``status([id])``). An id whose answer is missing or failed is ``unanswered``:
        it keeps its prior state, and its siblings keep what they showed."""
        observed: dict[str, JobObservation] = {}
        unlisted: list[str] = []
        absent: list[str] = []
        unanswered: list[str] = []
        warnings: list[str] = []
        for job_id in self.ids:
            answer = answers.get(job_id)
            if not isinstance(answer, StatusReport):
                unanswered.append(job_id)
                continue
            warnings += answer.warnings
            if job_id in answer.observed:
                observed[job_id] = answer.observed[job_id]
            elif job_id in answer.absent:
                absent.append(job_id)
            elif job_id in answer.unanswered:
                unanswered.append(job_id)
            else:
                unlisted.append(job_id)
        return StatusReport(
            observed=observed,
            unlisted=tuple(unlisted),
            absent=tuple(absent),
            warnings=tuple(warnings),
            unanswered=tuple(unanswered),
        )


@dataclass(frozen=True, slots=True)
class RecheckRequired:
    """A status query by owner (every job of the SSH login) did not list ``query``'s
    ids: ask for them by id with ``query`` (an id list, so a job owned by someone else,
    or one only an id query can call absent, is judged as before), then
    :meth:`merge` that answer into ``report``, which holds every id the owner query
    did list."""

    report: StatusReport
    query: Query[StatusReport | SplitRequired | RecheckRequired]

    def merge(self, answer: StatusReport | ParseFailure) -> StatusReport:
        """One report for every id; when ``answer`` failed its ids are ``unanswered``
        (unknown: they keep their prior state) and the listed ids keep what they showed."""
        mine = self.report
        if isinstance(answer, ParseFailure):
            return StatusReport(
                observed=mine.observed,
                warnings=mine.warnings,
                unanswered=(*mine.unanswered, *mine.unlisted),
            )
        return StatusReport(
            observed={**answer.observed, **mine.observed},
            unlisted=answer.unlisted,
            absent=answer.absent,
            warnings=(*mine.warnings, *answer.warnings),
            unanswered=(*mine.unanswered, *answer.unanswered),
        )


@dataclass(frozen=True, slots=True)
class AccountingStep:
    """One step line (``12.batch``, ``12.extern``, ``12.0``) folded into its job."""

    step: str
    raw_state: str
    exit_code: int | None
    exit_signal: int | None
    max_rss_kb: int | None


@dataclass(frozen=True, slots=True)
class AccountingRecord:
    """One job from scheduler accounting, its step lines folded in.

    ``state_code`` is the bare state (``CANCELLED`` of ``CANCELLED by 1001``).
    ``abnormal_end_state`` is the vq terminal state the scheduler's own verdict implies
    (§4.1 item 5): OOM_KILLED for OUT_OF_MEMORY, TIME_EXCEEDED for TIMEOUT and
    DEADLINE, ABORTED_BY_QUEUE for other scheduler-ended states; None when the job ran
    to an ordinary end (its return code decides) or has not ended."""

    scheduler_job_id: str
    job_name: str | None
    raw_state: str
    state_code: str
    phase: SchedulerPhase
    cancelled_by_uid: int | None
    exit_code: int | None
    exit_signal: int | None
    elapsed: str | None
    elapsed_seconds: int | None
    walltime_limit: str | None
    walltime_limit_seconds: int | None
    exec_host: str | None
    max_rss_kb: int | None
    total_cpu_seconds: float | None
    comment: str | None
    abnormal_end_state: JobState | None
    steps: tuple[AccountingStep, ...] = ()


@dataclass(frozen=True, slots=True)
class AccountingReport:
    """Accounting records for the requested ids. ``unlisted`` ids have no record yet:
    accounting lags, so that is "not final", never "gone"."""

    records: Mapping[str, AccountingRecord]
    unlisted: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TagMatch:
    """A scheduler job that carries the vq job's tag (found when vq lost the id)."""

    scheduler_job_id: str
    raw_state: str
    phase: SchedulerPhase
    nonce: str | None = None


ControlKind = Literal["done", "already_ended", "not_pending", "unknown_job", "failed"]


@dataclass(frozen=True, slots=True)
class ControlOutcome:
    """What a cancel, hold or release did. ``done``: the scheduler accepted it;
    ``already_ended``: the job had finished; ``not_pending``: a hold or release of a job
    that is no longer waiting; ``unknown_job``: the scheduler does not know the id;
    ``failed``: anything else (``detail`` says what)."""

    kind: ControlKind
    detail: str = ""
