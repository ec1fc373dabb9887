"""Parsers of Slurm's answers (22.05 formats), each total: output in, typed value out.

* :func:`parse_submit` — ``sbatch --parsable``: ``12`` or ``12;cluster``.
* :func:`parse_status` — ``squeue --noheader --states=all --jobs=… -o %i|%T|%r|%N|%M|%l``;
  :func:`parse_login_status` — the same format for ``--me`` (every job of the login).
* :func:`parse_accounting` — ``sacct --parsable2 --noheader`` with :data:`SACCT_FIELDS`;
  step lines (``12.batch``, ``12.extern``, ``12.0``) are folded into their job.
* :func:`parse_tag_squeue` / :func:`parse_tag_sacct` — jobs found by name.
* :func:`parse_control` — ``scancel`` and ``scontrol hold|release``.

State codes map to :class:`SchedulerPhase` through :data:`PHASES`; a code not in the
table becomes ``unknown`` with a warning and is never terminal.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache

from vq.dialects._common import bounded, command_failed, failure, lines_of, ordered_unique
from vq.dialects._values import kib_from_slurm_size, slurm_duration_seconds
from vq.dialects.model import (
    AccountingRecord,
    AccountingReport,
    AccountingStep,
    CommandResult,
    ControlOutcome,
    JobObservation,
    ParseFailure,
    ParseFailureKind,
    Query,
    RecheckRequired,
    SchedulerPhase,
    SplitRequired,
    StatusReport,
    SubmitAccepted,
    TagMatch,
)
from vq.domain.states import JobState

__all__ = [
    "ABNORMAL_END",
    "INVALID_JOB_ID_DIAGNOSTIC",
    "PHASES",
    "SACCT_FIELDS",
    "SQUEUE_FORMAT",
    "parse_accounting",
    "parse_control",
    "parse_login_status",
    "parse_status",
    "parse_submit",
    "parse_tag_sacct",
    "parse_tag_squeue",
]

P = SchedulerPhase

#: Slurm state names (``%T`` of squeue, ``State`` of sacct) → vq's phase.
PHASES: dict[str, SchedulerPhase] = {
    "PENDING": P.QUEUED,
    "CONFIGURING": P.QUEUED,
    "REQUEUED": P.QUEUED,
    "REQUEUE_FED": P.QUEUED,
    "POWER_UP_NODE": P.QUEUED,
    "REQUEUE_HOLD": P.HELD,
    "SPECIAL_EXIT": P.HELD,
    "RESV_DEL_HOLD": P.HELD,
    "SUSPENDED": P.HELD,
    "STOPPED": P.HELD,
    "RUNNING": P.RUNNING,
    "RESIZING": P.RUNNING,
    "SIGNALING": P.RUNNING,
    "COMPLETING": P.FINISHING,
    "STAGE_OUT": P.FINISHING,
    "COMPLETED": P.ENDED,
    "FAILED": P.ENDED,
    "CANCELLED": P.ENDED,
    "TIMEOUT": P.ENDED,
    "DEADLINE": P.ENDED,
    "OUT_OF_MEMORY": P.ENDED,
    "NODE_FAIL": P.ENDED,
    "PREEMPTED": P.ENDED,
    "BOOT_FAIL": P.ENDED,
    "REVOKED": P.ENDED,
}

#: Ended states whose verdict is the scheduler's, not the command's (§4.1 item 5).
#: COMPLETED and FAILED are absent: the exit code decides those.
ABNORMAL_END: dict[str, JobState] = {
    "OUT_OF_MEMORY": JobState.OOM_KILLED,
    "TIMEOUT": JobState.TIME_EXCEEDED,
    "DEADLINE": JobState.TIME_EXCEEDED,
    "CANCELLED": JobState.ABORTED_BY_QUEUE,
    "NODE_FAIL": JobState.ABORTED_BY_QUEUE,
    "PREEMPTED": JobState.ABORTED_BY_QUEUE,
    "BOOT_FAIL": JobState.ABORTED_BY_QUEUE,
    "REVOKED": JobState.ABORTED_BY_QUEUE,
}

#: Pending reasons that mean "held" rather than "waiting".
_HOLD_REASONS = frozenset({"JobHeldUser", "JobHeldAdmin"})

#: What squeue 22.05 prints (``slurm_perror``) when a single-id query names a job
#: slurmctld does not know.
INVALID_JOB_ID_DIAGNOSTIC = "slurm_load_jobs error: Invalid job id specified"

SQUEUE_FORMAT = "%i|%T|%r|%N|%M|%l"
SACCT_FIELDS = (
    "JobID",
    "JobName",
    "State",
    "ExitCode",
    "Elapsed",
    "Timelimit",
    "NodeList",
    "MaxRSS",
    "TotalCPU",
    "Comment",
)
_JOB_ID = re.compile(r"[0-9]+(?:_[0-9]+|_\[[0-9,\-%]+\])?(?:\+[0-9]+)?")
_STATE_CODE = re.compile(r"[A-Z_]+")
_STEP_ID = re.compile(rf"(?P<job>{_JOB_ID.pattern})\.(?P<step>[A-Za-z0-9_+]+)")
_STATE = re.compile(r"(?P<code>[A-Z_]+)(?: by (?P<uid>[0-9]+))?\+?")
_EXIT = re.compile(r"([0-9]+):([0-9]+)")
_NOT_REPORTED = frozenset({"", "None", "(null)", "n/a"})


def _optional(text: str) -> str | None:
    value = text.strip()
    return None if value in _NOT_REPORTED else value


@lru_cache(maxsize=4096)  # a round's 1,000 rows repeat few limits and elapsed times
def _seconds(text: str | None) -> int | None:
    if text is None:
        return None
    seconds = slurm_duration_seconds(text)
    return None if seconds is None else int(seconds)


def _phase(code: str, warnings: list[str], job_id: str) -> SchedulerPhase:
    phase = PHASES.get(code)
    if phase is None:
        warnings.append(f"job {job_id}: unknown Slurm state {code!r}; treated as not ended")
        return P.UNKNOWN
    return phase


# --------------------------------------------------------------------------------------
# sbatch
# --------------------------------------------------------------------------------------
_PARSABLE = re.compile(r"(?P<id>[0-9]+)(?:;(?P<cluster>[A-Za-z0-9_.-]+))?")


def parse_submit(result: CommandResult) -> SubmitAccepted | ParseFailure:
    """``sbatch --parsable``: the last stdout line is ``<id>`` or ``<id>;<cluster>``."""
    if result.returncode != 0:
        return command_failed("sbatch", result)
    lines = lines_of(result.stdout)
    if not lines:
        return failure("sbatch", "empty", "sbatch printed no job id")
    match = _PARSABLE.fullmatch(lines[-1].strip())
    if not match:
        return failure("sbatch", "garbage", f"not a job id: {lines[-1]}")
    return SubmitAccepted(scheduler_job_id=match["id"], cluster=match["cluster"])


# --------------------------------------------------------------------------------------
# squeue
# --------------------------------------------------------------------------------------
def _is_invalid_job_id(result: CommandResult) -> bool:
    said = lines_of(result.stderr)
    return (
        result.returncode != 0
        and not result.stdout.strip()
        and bool(said)
        and all(line.strip() == INVALID_JOB_ID_DIAGNOSTIC for line in said)
    )


def parse_status(
    ids: Sequence[str], result: CommandResult
) -> StatusReport | SplitRequired | ParseFailure:
    """One ``squeue`` answer for ``ids`` (format :data:`SQUEUE_FORMAT`).

    squeue 22.05 asks slurmctld for a single id directly and fails with
    :data:`INVALID_JOB_ID_DIAGNOSTIC` when that job is unknown: then the id is
    ``absent``. For several ids the same diagnostic yields :class:`SplitRequired` (ask
    each id alone, §8.2). Any other non-zero exit, a short line or an unreadable id is a
    :class:`ParseFailure`: unknown, never evidence. An empty answer lists nobody.
    """
    wanted = ordered_unique(ids)
    if _is_invalid_job_id(result):
        if len(wanted) == 1:
            return StatusReport(observed={}, absent=wanted)
        return SplitRequired(ids=wanted)
    if result.returncode != 0:
        return command_failed("squeue", result)
    return _status_rows(wanted, result.stdout, others_expected=False)


def parse_login_status(
    ids: Sequence[str],
    by_ids: Callable[[Sequence[str]], Query[StatusReport | SplitRequired | RecheckRequired]],
    result: CommandResult,
) -> StatusReport | RecheckRequired | ParseFailure:
    """``squeue --me --states=all`` (same format): every job of the SSH login. Rows of
    jobs nobody asked about are the login's other jobs and are skipped unread (an array
    row such as ``7_[1-9]`` included). Asked ids it did not list yield
    :class:`RecheckRequired` with ``by_ids(those ids)``: only an id query may call a
    job absent, or see a job the login does not own."""
    if result.returncode != 0:
        return command_failed("squeue", result)
    report = _status_rows(ordered_unique(ids), result.stdout, others_expected=True)
    if isinstance(report, StatusReport) and report.unlisted:
        return RecheckRequired(report, by_ids(report.unlisted))
    return report


def _status_rows(
    wanted: tuple[str, ...], stdout: str, *, others_expected: bool
) -> StatusReport | ParseFailure:
    asked = frozenset(wanted)
    observed: dict[str, JobObservation] = {}
    warnings: list[str] = []
    for line in lines_of(stdout):
        if others_expected and line.split("|", 1)[0].strip() not in asked:
            if line.count("|") == 5:
                continue  # the login's own job, not vq's
            row = _row(line)  # a short or long row fails the whole answer
            return row if isinstance(row, ParseFailure) else failure("squeue", "garbage", line)
        row = _row(line)
        if isinstance(row, ParseFailure):
            return row
        seen, warning = row
        if seen.scheduler_job_id not in asked:
            warnings.append(f"squeue listed job {seen.scheduler_job_id}, which was not asked for")
            continue
        if warning:
            warnings.append(warning)
        observed[seen.scheduler_job_id] = seen
    unlisted = tuple(job_id for job_id in wanted if job_id not in observed)
    return StatusReport(observed=observed, unlisted=unlisted, warnings=tuple(warnings))


@lru_cache(maxsize=8192)  # a waiting job's row repeats round after round
def _row(line: str) -> tuple[JobObservation, str | None] | ParseFailure:
    """One squeue row: the observation and the warning it carries (an unknown state)."""
    fields = [field.strip() for field in line.split("|")]
    if len(fields) != 6:
        kind: ParseFailureKind = "partial" if 1 < len(fields) < 6 else "garbage"
        return failure("squeue", kind, f"expected 6 fields: {line}")
    job_id, state, reason, nodes, used, limit = fields
    if not _JOB_ID.fullmatch(job_id) or not _STATE_CODE.fullmatch(state):
        return failure("squeue", "garbage", f"unreadable line: {line}")
    said: list[str] = []
    phase = _phase(state, said, job_id)
    if phase is P.QUEUED and reason in _HOLD_REASONS:
        phase = P.HELD
    waiting = phase in (P.QUEUED, P.HELD)
    used_text, limit_text = _optional(used), _optional(limit)
    seen = JobObservation(
        scheduler_job_id=job_id,
        phase=phase,
        raw_state=state,
        queued_reason=_optional(reason) if waiting else None,
        exec_host=_optional(nodes),
        walltime_used=used_text,
        walltime_used_seconds=_seconds(used_text),
        walltime_limit=limit_text,
        walltime_limit_seconds=_seconds(limit_text),
        abnormal_end_state=ABNORMAL_END.get(state),
    )
    return seen, (said[0] if said else None)


# --------------------------------------------------------------------------------------
# sacct
# --------------------------------------------------------------------------------------
def _exit_pair(text: str) -> tuple[int | None, int | None]:
    match = _EXIT.fullmatch(text.strip())
    if not match:
        return None, None
    return int(match[1]), int(match[2])


def _state(text: str) -> tuple[str, int | None] | None:
    match = _STATE.fullmatch(text.strip())
    if not match:
        return None
    return match["code"], int(match["uid"]) if match["uid"] else None


def parse_accounting(ids: Sequence[str], result: CommandResult) -> AccountingReport | ParseFailure:
    """One ``sacct`` answer (fields :data:`SACCT_FIELDS`, Comment last so a ``|`` in
    it stays in it). Ids with no line are ``unlisted``: accounting lags the job."""
    wanted = ordered_unique(ids)
    asked = frozenset(wanted)
    if result.returncode != 0:
        return command_failed("sacct", result)
    width = len(SACCT_FIELDS)
    jobs: dict[str, tuple[list[str], tuple[str, int | None]]] = {}
    steps: dict[str, list[AccountingStep]] = {}
    warnings: list[str] = []
    for line in lines_of(result.stdout):
        fields = line.split("|", width - 1)
        if len(fields) != width:
            kind: ParseFailureKind = "partial" if len(fields) > 1 else "garbage"
            return failure("sacct", kind, f"expected {width} fields: {line}")
        raw_id, raw_state = fields[0].strip(), fields[2]
        state = _state(raw_state)
        if state is None:
            return failure("sacct", "garbage", f"unreadable state: {line}")
        step = _STEP_ID.fullmatch(raw_id)
        if step:
            code, signal = _exit_pair(fields[3])
            steps.setdefault(step["job"], []).append(
                AccountingStep(
                    step=step["step"],
                    raw_state=raw_state.strip(),
                    exit_code=code,
                    exit_signal=signal,
                    max_rss_kb=kib_from_slurm_size(fields[7]),
                )
            )
        elif _JOB_ID.fullmatch(raw_id):
            jobs[raw_id] = (fields, state)
        else:
            return failure("sacct", "garbage", f"unreadable job id: {line}")
    records: dict[str, AccountingRecord] = {}
    for job_id, (fields, state) in jobs.items():
        if job_id not in asked:
            warnings.append(f"sacct listed job {job_id}, which was not asked for")
            continue
        records[job_id] = _record(job_id, fields, state, tuple(steps.get(job_id, ())), warnings)
    for job_id in steps:
        if job_id not in jobs:
            warnings.append(f"sacct listed steps of job {job_id} without the job itself")
    unlisted = tuple(job_id for job_id in wanted if job_id not in records)
    return AccountingReport(records=records, unlisted=unlisted, warnings=tuple(warnings))


def _record(
    job_id: str,
    fields: list[str],
    state: tuple[str, int | None],
    steps: tuple[AccountingStep, ...],
    warnings: list[str],
) -> AccountingRecord:
    _, name, raw_state, exit_text, elapsed, limit, nodes, rss, cpu, comment = fields
    code, uid = state
    exit_code, exit_signal = _exit_pair(exit_text)
    rss_values = [value for value in (kib_from_slurm_size(rss),) if value is not None]
    rss_values += [step.max_rss_kb for step in steps if step.max_rss_kb is not None]
    elapsed_text, limit_text = _optional(elapsed), _optional(limit)
    total_cpu = slurm_duration_seconds(cpu) if cpu.strip() else None
    return AccountingRecord(
        scheduler_job_id=job_id,
        job_name=_optional(name),
        raw_state=raw_state.strip(),
        state_code=code,
        phase=_phase(code, warnings, job_id),
        cancelled_by_uid=uid,
        exit_code=exit_code,
        exit_signal=exit_signal,
        elapsed=elapsed_text,
        elapsed_seconds=_seconds(elapsed_text),
        walltime_limit=limit_text,
        walltime_limit_seconds=_seconds(limit_text),
        exec_host=_optional(nodes) if nodes.strip() != "None assigned" else None,
        max_rss_kb=max(rss_values) if rss_values else None,
        total_cpu_seconds=total_cpu,
        comment=_optional(comment),
        abnormal_end_state=ABNORMAL_END.get(code),
        steps=steps,
    )


# --------------------------------------------------------------------------------------
# find by tag
# --------------------------------------------------------------------------------------
def _nonce(vq_job_id: str, comment: str) -> str | None:
    prefix = f"vq:{vq_job_id}:"
    value = comment.strip()
    return value[len(prefix) :] if value.startswith(prefix) and len(value) > len(prefix) else None


def _tag_lines(
    command: str, vq_job_id: str, result: CommandResult
) -> tuple[TagMatch, ...] | ParseFailure:
    if result.returncode != 0:
        return command_failed(command, result)
    found: list[TagMatch] = []
    for line in lines_of(result.stdout):
        fields = line.split("|", 2)
        if len(fields) != 3:
            return failure(command, "partial", f"expected 3 fields: {line}")
        job_id, raw_state, comment = fields[0].strip(), fields[1].strip(), fields[2]
        state = _state(raw_state)
        if not _JOB_ID.fullmatch(job_id) or state is None:
            return failure(command, "garbage", f"unreadable line: {line}")
        found.append(
            TagMatch(
                scheduler_job_id=job_id,
                raw_state=raw_state,
                phase=PHASES.get(state[0], P.UNKNOWN),
                nonce=_nonce(vq_job_id, comment),
            )
        )
    return tuple(found)


def parse_tag_squeue(vq_job_id: str, result: CommandResult) -> tuple[TagMatch, ...] | ParseFailure:
    """``squeue --name=vq-<id> -o %i|%T|%k``: live jobs carrying the tag."""
    return _tag_lines("squeue", vq_job_id, result)


def parse_tag_sacct(vq_job_id: str, result: CommandResult) -> tuple[TagMatch, ...] | ParseFailure:
    """``sacct --name=vq-<id> -X -o JobID,State,Comment``: jobs in accounting."""
    return _tag_lines("sacct", vq_job_id, result)


# --------------------------------------------------------------------------------------
# scancel, scontrol hold/release
# --------------------------------------------------------------------------------------
def parse_control(result: CommandResult) -> ControlOutcome:
    """The outcome of ``scancel`` or ``scontrol hold|release`` (never a failure value:
    an unrecognised error is ``failed`` with the scheduler's words)."""
    said = " ".join(lines_of(result.stderr) + lines_of(result.stdout))
    if result.returncode == 0:
        return ControlOutcome("done")
    if "Invalid job id specified" in said:
        return ControlOutcome("unknown_job", bounded(said))
    if "already completing or completed" in said or "Job has already finished" in said:
        return ControlOutcome("already_ended", bounded(said))
    if "Job is no longer pending execution" in said:
        return ControlOutcome("not_pending", bounded(said))
    return ControlOutcome("failed", bounded(said) or f"exit {result.returncode}")
