"""Slurm commands of packed allocations: argument vectors and bounded parsers (pure).

The Slurm dialect's half for packed allocations (the other half, :mod:`slurm_parse`,
reads plain lane jobs): these functions build the exact ``sbatch``, ``squeue`` and
``sacct`` argument vectors, for one allocation or for one observation round over several
(``*_round_*``), and parse their recorded output; running them (over SSH, with a 30 s
deadline and 1 MiB per stream) belongs to the caller. A state name is read through the
one Slurm state table (:data:`~vq.dialects.slurm_parse.PHASES`), and an ``sbatch
--parsable`` answer through the one receipt parser
(:func:`~vq.dialects.slurm_parse.parse_submit`), exactly as for a plain lane job.

Bounds (any breach raises :class:`ObservationError` and aborts the whole view): at most
16 arguments and 16 KiB of command text; at most 128 output lines and 4 KiB per field.
Every command runs under ``env LC_ALL=C TZ=UTC`` so dates and messages have one form.

Identity: an allocation ``<alloc>`` is job name ``vqp-<alloc>`` with comment
``vq-pack:<alloc>``. Queue rows must repeat that exact comment; accounting rows may repeat
it or leave it empty (sites that do not store comments); a different comment is another
job and is ignored.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from vq.dialects.model import CommandResult, ParseFailure, SchedulerPhase, SubmitAccepted
from vq.dialects.slurm_parse import PHASES, parse_submit

__all__ = [
    "COMMAND_DEADLINE_S",
    "MAX_COMMAND_TEXT",
    "MAX_FIELD_BYTES",
    "MAX_LINES",
    "MAX_STREAM_BYTES",
    "AccountingRecord",
    "ForeignJob",
    "ObservationError",
    "QueueRow",
    "SbatchRefused",
    "SbatchTestOnlyAnswer",
    "State",
    "bounded",
    "bounded_lines",
    "checked",
    "comment",
    "job_name",
    "normalize_state",
    "parse_receipt",
    "parse_sacct",
    "parse_sacct_round",
    "parse_sbatch_test_only",
    "parse_squeue",
    "parse_squeue_named",
    "parse_squeue_round",
    "sacct_argv",
    "sacct_round_argv",
    "sbatch_test_only_argv",
    "squeue_argv",
    "squeue_named_argv",
    "squeue_round_argv",
    "submit_argv",
]

COMMAND_DEADLINE_S = 30.0
MAX_ARGS = 16
MAX_COMMAND_TEXT = 16 * 1024
MAX_STREAM_BYTES = 1 << 20
MAX_LINES = 128
MAX_FIELD_BYTES = 4096
ENV = ("env", "LC_ALL=C", "TZ=UTC")

State = Literal["QUEUED", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED", "UNKNOWN"]


def job_name(allocation_id: str) -> str:
    """An allocation's Slurm job name: queue and accounting rows are found by it."""
    return f"vqp-{allocation_id}"


def comment(allocation_id: str) -> str:
    """An allocation's Slurm comment: a row must repeat it (or, in accounting, be empty)."""
    return f"vq-pack:{allocation_id}"


def _packing_state(name: str, phase: SchedulerPhase) -> State:
    """A packed allocation's view of one Slurm state, read from the one Slurm state table
    (:data:`vq.dialects.slurm_parse.PHASES`), so a packed and a plain lane job read every
    state alike: waiting or held is QUEUED, started or finishing is RUNNING, and an end
    is SUCCEEDED (COMPLETED), CANCELLED (CANCELLED, REVOKED) or FAILED."""
    if phase in (SchedulerPhase.QUEUED, SchedulerPhase.HELD):
        return "QUEUED"
    if phase in (SchedulerPhase.RUNNING, SchedulerPhase.FINISHING):
        return "RUNNING"
    if name == "COMPLETED":
        return "SUCCEEDED"
    return "CANCELLED" if name in ("CANCELLED", "REVOKED") else "FAILED"


_STATES: dict[str, State] = {name: _packing_state(name, phase) for name, phase in PHASES.items()}
_JOB_ID = re.compile(r"[0-9]{1,12}")
_CLUSTER = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}|Unknown|None")
_TEST_ONLY = re.compile(
    r"sbatch: Job (\d+) to start at (\S+) using (\d+) processors on nodes (\S+) "
    r"in partition (\S+)"
)
_SACCT_FIELDS = ("JobIDRaw", "JobName", "Comment", "State", "ExitCode", "Submit", "Start", "End")
_SQUEUE_FORMAT = "%i|%j|%k|%T"


class ObservationError(ValueError):
    """Output vq cannot trust: a failed command, an overflow, a malformed row."""


class ForeignJob(ObservationError):
    """A queue row of this job id under another name or comment: not this allocation."""


class SbatchRefused(ObservationError):
    """``sbatch --test-only`` answered that the controller would not run the script."""


def bounded(argv: Sequence[str]) -> list[str]:
    """``argv`` under ``env LC_ALL=C TZ=UTC``, refused beyond the argument bounds."""
    full = [*ENV, *argv]
    if len(full) > MAX_ARGS:
        raise ObservationError(f"{argv[0]}: more than {MAX_ARGS} arguments")
    if sum(len(arg.encode()) + 1 for arg in full) > MAX_COMMAND_TEXT:
        raise ObservationError(f"{argv[0]}: the command is over {MAX_COMMAND_TEXT} bytes")
    if any("\x00" in arg or "\n" in arg for arg in full):
        raise ObservationError(f"{argv[0]}: an argument holds a NUL or a newline")
    return full


def bounded_lines(text: str, what: str, max_lines: int = MAX_LINES) -> list[str]:
    """``text``'s non-empty lines, refused beyond the stream, line and field bounds."""
    if len(text.encode()) > MAX_STREAM_BYTES:
        raise ObservationError(f"{what}: output over {MAX_STREAM_BYTES} bytes")
    lines = [line for line in text.split("\n") if line]
    if len(lines) > max_lines:
        raise ObservationError(f"{what}: more than {max_lines} lines")
    for line in lines:
        if any(len(part.encode()) > MAX_FIELD_BYTES for part in line.split("|")):
            raise ObservationError(f"{what}: a field over {MAX_FIELD_BYTES} bytes")
    return lines


def normalize_state(raw: str) -> State:
    """Slurm's state (``CANCELLED by 0`` included) as one of the six vq pack states."""
    word = raw.split(" ", 1)[0].rstrip("+")
    return _STATES.get(word, "UNKNOWN")


# --- sbatch --------------------------------------------------------------------------
def sbatch_test_only_argv() -> list[str]:
    """``sbatch --test-only`` (the script goes on stdin): changes nothing."""
    return bounded(["sbatch", "--test-only"])


def submit_argv() -> list[str]:
    """``sbatch --parsable`` (the script goes on stdin)."""
    return bounded(["sbatch", "--parsable"])


@dataclass(frozen=True)
class SbatchTestOnlyAnswer:
    """The controller's time-specific answer to ``--test-only``."""

    job_id: str
    start: str
    processors: int
    nodes: str
    partition: str


def parse_sbatch_test_only(rc: int, stderr: str) -> SbatchTestOnlyAnswer:
    """Parse ``sbatch --test-only``'s answer (it is written to stderr)."""
    lines = bounded_lines(stderr, "sbatch --test-only")
    if rc == 0:
        for line in lines:
            match = _TEST_ONLY.fullmatch(line.strip())
            if match is not None:
                job, start, procs, nodes, part = match.groups()
                return SbatchTestOnlyAnswer(job, start, int(procs), nodes, part)
        raise ObservationError("sbatch --test-only: no answer line in its output")
    why = lines[-1].strip() if lines else f"exit status {rc}"
    raise SbatchRefused(f"sbatch --test-only refused the allocation: {why}")


def parse_receipt(stdout: str) -> SubmitAccepted:
    """``sbatch --parsable``'s receipt (``JOBID`` or ``JOBID;CLUSTER``), read by the one
    receipt parser of the Slurm dialect (:func:`~vq.dialects.slurm_parse.parse_submit`)
    under this module's bounds; no readable receipt raises :class:`ObservationError`."""
    bounded_lines(stdout, "sbatch --parsable")
    accepted = parse_submit(CommandResult(0, stdout, ""))
    if isinstance(accepted, ParseFailure):
        raise ObservationError(f"sbatch --parsable: {accepted.detail[:80]}")
    return accepted


# --- squeue --------------------------------------------------------------------------
def squeue_argv(job_id: str) -> list[str]:
    if not _JOB_ID.fullmatch(job_id):
        raise ObservationError(f"{job_id!r} is not a job id")
    return bounded(["squeue", "--noheader", f"--jobs={job_id}", f"--format={_SQUEUE_FORMAT}"])


@dataclass(frozen=True)
class QueueRow:
    job_id: str
    state: State
    raw_state: str


def parse_squeue(rc: int, stdout: str, stderr: str, allocation_id: str) -> QueueRow | None:
    """The job's active row, or None when Slurm has none (an ended or purged job).

    A row with another name or comment is not this allocation: the view is aborted.
    """
    if rc != 0:
        if "Invalid job id specified" in stderr:
            return None  # the single-job form's "no such active job"
        raise ObservationError(f"squeue failed (exit status {rc})")
    lines = bounded_lines(stdout, "squeue")
    if not lines:
        return None
    if len(lines) != 1:
        raise ObservationError("squeue: more than one row for one job id")
    parts = lines[0].split("|")
    if len(parts) != 4 or not _JOB_ID.fullmatch(parts[0]):
        raise ObservationError("squeue: a malformed row")
    job, name, found_comment, raw = parts
    if name != job_name(allocation_id) or found_comment != comment(allocation_id):
        raise ForeignJob(f"squeue: job {job} is not allocation {allocation_id}")
    return QueueRow(job, normalize_state(raw), raw)


def squeue_named_argv(allocation_id: str) -> list[str]:
    """Every job slurmctld still holds named ``vqp-<alloc>`` (``squeue --name``), ended
    ones too (``--states=all``): an allocation that finished before a restarted daemon
    looks it up is still proven by its name and comment, whether or not accounting has
    recorded it yet."""
    return bounded(
        [
            "squeue",
            "--noheader",
            "--states=all",
            f"--name={job_name(allocation_id)}",
            f"--format={_SQUEUE_FORMAT}",
        ]
    )


def parse_squeue_named(rc: int, stdout: str, allocation_id: str) -> list[str]:
    """The active jobs that are this allocation: its exact name *and* comment (a
    same-name job under another comment is someone else's and is left out)."""
    if rc != 0:
        raise ObservationError(f"squeue failed (exit status {rc})")
    jobs = []
    for line in bounded_lines(stdout, "squeue"):
        parts = line.split("|")
        if len(parts) != 4 or not _JOB_ID.fullmatch(parts[0]):
            raise ObservationError("squeue: a malformed row")
        job, name, found_comment, _ = parts
        if name == job_name(allocation_id) and found_comment == comment(allocation_id):
            jobs.append(job)
    return sorted(set(jobs))


# --- sacct ---------------------------------------------------------------------------
def sacct_argv(allocation_id: str, since: str) -> list[str]:
    """Every accounting record (requeues too) named ``vqp-<alloc>`` since ``since``."""
    if not _TIME.fullmatch(since) or since in ("Unknown", "None"):
        raise ObservationError(f"{since!r} is not a YYYY-MM-DDTHH:MM:SS time")
    return bounded(
        [
            "sacct",
            "--duplicates",
            "--noheader",
            "--parsable2",
            f"--name={job_name(allocation_id)}",
            f"--starttime={since}",
            f"--format={','.join(_SACCT_FIELDS)}",
        ]
    )


@dataclass(frozen=True)
class AccountingRecord:
    """One job record with its step rows (``steps``: step id → (state, exit code))."""

    job_id: str
    state: State
    raw_state: str
    exit_code: str
    submit: str
    start: str
    end: str
    steps: dict[str, tuple[State, str]] = field(default_factory=dict)
    #: the exact ``vq-pack:<alloc>`` comment, or "" where accounting stores none
    comment: str = ""
    #: step id → the step's name (``vqp-<alloc>-<slot>`` for a slot's step)
    step_names: dict[str, str] = field(default_factory=dict)
    #: step id → the step's (Start, End) as accounting prints them (UTC, or Unknown)
    step_times: dict[str, tuple[str, str]] = field(default_factory=dict)


def parse_sacct(
    stdout: str, allocation_id: str, *, max_lines: int = MAX_LINES
) -> list[AccountingRecord]:
    """The records of this allocation in submission order; other jobs are ignored
    (``max_lines``: the bound of an answer that covers several allocations).

    With ``--duplicates`` a requeued job appears once per incarnation (same id, later
    submit time); step rows belong to the job row printed before them. Choosing the
    anchor and the latest incarnation is the inspection's business.
    """
    records: list[AccountingRecord] = []
    current: dict[str, AccountingRecord] = {}
    foreign: set[str] = set()
    for line in bounded_lines(stdout, "sacct", max_lines):
        parts = line.split("|")
        if len(parts) != len(_SACCT_FIELDS):
            raise ObservationError("sacct: a malformed row")
        raw_id, name, found_comment, raw_state, exit_code, submit, start, end = parts
        job, _, step = raw_id.partition(".")
        if not _JOB_ID.fullmatch(job) or not all(
            _TIME.fullmatch(value) for value in (submit, start, end)
        ):
            raise ObservationError("sacct: a malformed row")
        if step:
            if job in foreign:
                continue
            if job not in current:
                raise ObservationError(f"sacct: step {raw_id} before its job row")
            current[job].steps[step] = (normalize_state(raw_state), exit_code)
            current[job].step_names[step] = name
            current[job].step_times[step] = (start, end)
            continue
        if name != job_name(allocation_id) or found_comment not in ("", comment(allocation_id)):
            foreign.add(job)  # the same name under another comment: someone else's job
            current.pop(job, None)
            continue
        foreign.discard(job)
        record = AccountingRecord(
            job,
            normalize_state(raw_state),
            raw_state,
            exit_code,
            submit,
            start,
            end,
            comment=found_comment,
        )
        current[job] = record
        records.append(record)
    return sorted(records, key=lambda record: record.submit)


# --- one observation round over several allocations ------------------------------------
# The rules above, per allocation: a queue row must repeat its allocation's exact name and
# comment (otherwise that allocation's observation fails, not its neighbours'), and
# accounting is parsed per allocation by :func:`parse_sacct`. The line bound grows with
# the allocations observed (:data:`MAX_LINES` each); the command text bound and the
# 1 MiB per stream stay.
def checked(argv: list[str], what: str) -> list[str]:
    """``argv`` under ``env LC_ALL=C TZ=UTC``, refused beyond the command text bound (a
    round's argument count grows with its allocations, so only the text is bounded)."""
    full = [*ENV, *argv]
    if sum(len(arg.encode()) + 1 for arg in full) > MAX_COMMAND_TEXT:
        raise ObservationError(f"{what}: the command is over {MAX_COMMAND_TEXT} bytes")
    if any("\x00" in arg or "\n" in arg for arg in full):
        raise ObservationError(f"{what}: an argument holds a NUL or a newline")
    return full


def squeue_round_argv(job_ids: Sequence[str]) -> list[str]:
    if not job_ids or not all(_JOB_ID.fullmatch(job) for job in job_ids):
        raise ObservationError("squeue: a round needs job ids")
    jobs = ",".join(job_ids)
    argv = ["squeue", "--noheader", f"--jobs={jobs}", f"--format={_SQUEUE_FORMAT}"]
    return checked(argv, "squeue")


def parse_squeue_round(
    rc: int, stdout: str, stderr: str, allocations: Mapping[str, str]
) -> dict[str, QueueRow | ObservationError]:
    """Each asked job's active row (job id → row); a job without one is absent (ended or
    purged). ``allocations``: job id → its allocation id. A row under another name or
    comment is that job's :class:`ForeignJob`; a failed command or a malformed row
    raises for the whole round."""
    if rc != 0:
        if len(allocations) == 1 and "Invalid job id specified" in stderr:
            return {}  # the single-job form's "no such active job"
        raise ObservationError(f"squeue failed (exit status {rc})")
    rows: dict[str, QueueRow | ObservationError] = {}
    for line in bounded_lines(stdout, "squeue", MAX_LINES * len(allocations)):
        parts = line.split("|")
        if len(parts) != 4 or not _JOB_ID.fullmatch(parts[0]):
            raise ObservationError("squeue: a malformed row")
        job, name, found_comment, raw = parts
        allocation_id = allocations.get(job)
        if allocation_id is None:
            raise ObservationError(f"squeue answered job {job}, which was not asked")
        if job in rows:
            raise ObservationError(f"squeue: more than one row for job {job}")
        if name != job_name(allocation_id) or found_comment != comment(allocation_id):
            rows[job] = ForeignJob(f"squeue: job {job} is not allocation {allocation_id}")
            continue
        rows[job] = QueueRow(job, normalize_state(raw), raw)
    return rows


def sacct_round_argv(allocation_ids: Sequence[str], since: str) -> list[str]:
    """Every accounting record (requeues too) named after one of ``allocation_ids``."""
    if not allocation_ids:
        raise ObservationError("sacct: a round needs allocations")
    if not _TIME.fullmatch(since) or since in ("Unknown", "None"):
        raise ObservationError(f"{since!r} is not a YYYY-MM-DDTHH:MM:SS time")
    names = ",".join(job_name(allocation) for allocation in allocation_ids)
    argv = [
        "sacct",
        "--duplicates",
        "--noheader",
        "--parsable2",
        f"--name={names}",
        f"--starttime={since}",
        f"--format={','.join(_SACCT_FIELDS)}",
    ]
    return checked(argv, "sacct")


def parse_sacct_round(
    stdout: str, allocation_ids: Sequence[str]
) -> dict[str, list[AccountingRecord] | ObservationError]:
    """Each allocation's records (:func:`parse_sacct`), or the error that makes its
    accounting untrustworthy."""
    bound = MAX_LINES * len(allocation_ids)
    found: dict[str, list[AccountingRecord] | ObservationError] = {}
    for allocation in allocation_ids:
        try:
            found[allocation] = parse_sacct(stdout, allocation, max_lines=bound)
        except ObservationError as exc:
            found[allocation] = exc
    return found
