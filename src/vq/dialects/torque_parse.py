"""Parsers of Torque's answers, each total: output in, typed value out.

* :func:`parse_submit` — ``qsub``: ``11.server`` (real Torque) or ``11`` (Slurm's
  ``slurm-wlm-torque`` wrappers).
* :func:`parse_status` — ``qstat -f <ids>``: one ``Job Id:`` block per job, attributes
  as indented ``name = value`` lines; a long value continues on lines that start with a
  tab and carry no ``name = `` of their own. Real Torque indents attributes with four
  spaces, the wrappers with a tab; both are read.
* :func:`parse_tag` — ``qstat -f`` of every visible job, filtered by ``Job_Name``.
* :func:`parse_control` — ``qdel``, ``qhold``, ``qrls``.

``qstat`` names each id it does not know on stderr (``qstat: Unknown Job Id [Error]
<id>``) and still prints the others: those ids are ``absent``, the rest observed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from vq.dialects._common import bounded, command_failed, failure, lines_of, ordered_unique
from vq.dialects._values import slurm_duration_seconds
from vq.dialects.model import (
    CommandResult,
    ControlOutcome,
    JobObservation,
    ParseFailure,
    SchedulerPhase,
    StatusReport,
    SubmitAccepted,
    TagMatch,
)
from vq.domain.states import JobState

__all__ = [
    "PHASES",
    "exit_evidence",
    "parse_control",
    "parse_status",
    "parse_submit",
    "parse_tag",
    "sequence_number",
]

P = SchedulerPhase

#: ``job_state`` letters → vq's phase.
PHASES: dict[str, SchedulerPhase] = {
    "Q": P.QUEUED,
    "W": P.QUEUED,
    "T": P.QUEUED,
    "H": P.HELD,
    "S": P.HELD,
    "R": P.RUNNING,
    "E": P.FINISHING,
    "C": P.ENDED,
}

#: pbs_mom's negative exit_status codes that name a limit (Torque admin guide, "Job
#: exit status"); every other negative code is a start failure → ABORTED_BY_QUEUE.
_MOM_CODES = {-10: JobState.OOM_KILLED, -11: JobState.TIME_EXCEEDED}

_TORQUE_ID = re.compile(r"[0-9]+(?:\[[0-9]*\])?(?:\.[A-Za-z0-9][A-Za-z0-9.-]*)?")
_ATTRIBUTE = re.compile(r"[ \t]+(?P<name>[A-Za-z_][A-Za-z0-9_.]*) = ?(?P<value>.*)")
_UNKNOWN = re.compile(r"qstat: Unknown Job Id(?: Error)? (?P<id>\S+)")


def sequence_number(job_id: str) -> str:
    """``11.server.example`` → ``11``: how ids are matched (a server may answer with a
    longer name than qsub printed)."""
    return job_id.split(".", 1)[0]


# --------------------------------------------------------------------------------------
# qsub
# --------------------------------------------------------------------------------------
def parse_submit(result: CommandResult) -> SubmitAccepted | ParseFailure:
    """``qsub script``: the last stdout line is the job id."""
    if result.returncode != 0:
        return command_failed("qsub", result)
    lines = lines_of(result.stdout)
    if not lines:
        return failure("qsub", "empty", "qsub printed no job id")
    candidate = lines[-1].strip()
    if not _TORQUE_ID.fullmatch(candidate):
        return failure("qsub", "garbage", f"not a job id: {candidate}")
    return SubmitAccepted(scheduler_job_id=candidate)


# --------------------------------------------------------------------------------------
# qstat -f
# --------------------------------------------------------------------------------------
def _blocks(text: str) -> list[tuple[str, dict[str, str]]] | ParseFailure:
    blocks: list[tuple[str, dict[str, str]]] = []
    current: dict[str, str] | None = None
    last: str | None = None
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("Job Id:"):
            job_id = line[len("Job Id:") :].strip()
            if not _TORQUE_ID.fullmatch(job_id):
                return failure("qstat", "garbage", f"unreadable job id: {line}")
            current, last = {}, None
            blocks.append((job_id, current))
            continue
        attribute = _ATTRIBUTE.fullmatch(line)
        if current is not None and attribute:
            last = attribute["name"]
            current[last] = attribute["value"].strip()
        elif current is not None and last is not None and line.startswith("\t"):
            current[last] += line.strip()
        else:
            return failure("qstat", "garbage", f"unreadable line: {line}")
    return blocks


def _exec_hosts(value: str | None) -> str | None:
    """``n1/0+n1/1+n2/0`` or ``node07/0-3`` → ``n1,n2`` / ``node07``."""
    if not value:
        return None
    hosts = [part.split("/", 1)[0] for part in value.split("+") if part.strip()]
    return ",".join(dict.fromkeys(hosts)) or None


def exit_evidence(
    exit_status: int | None, used: int | None, limit: int | None
) -> tuple[int | None, int | None, JobState | None]:
    """``(exit_code, exit_signal, abnormal_end_state)`` of an ended job's exit_status.

    0-255: the script's own exit code. Above 256: killed by signal ``status - 256``;
    when the job also used its whole walltime, that is the scheduler's walltime kill
    (TIME_EXCEEDED). Negative: pbs_mom's code (-10 memory, -11 walltime, the rest start
    failures, ABORTED_BY_QUEUE)."""
    if exit_status is None:
        return None, None, None
    if exit_status < 0:
        return None, None, _MOM_CODES.get(exit_status, JobState.ABORTED_BY_QUEUE)
    if exit_status <= 255:
        return exit_status, None, None
    if exit_status == 256:  # no signal 0: nothing can be read from it
        return None, None, None
    signal = exit_status - 256
    overran = used is not None and limit is not None and used >= limit
    return None, signal, JobState.TIME_EXCEEDED if overran else None


def _seconds(text: str | None) -> int | None:
    if not text:
        return None
    seconds = slurm_duration_seconds(text)
    return None if seconds is None else int(seconds)


def _observe(job_id: str, attrs: dict[str, str], warnings: list[str]) -> JobObservation:
    raw_state = attrs["job_state"]
    phase = PHASES.get(raw_state)
    if phase is None:
        warnings.append(
            f"job {job_id}: unknown Torque job_state {raw_state!r}; treated as not ended"
        )
        phase = P.UNKNOWN
    used_text = attrs.get("resources_used.walltime") or None
    limit_text = attrs.get("Resource_List.walltime") or None
    used, limit = _seconds(used_text), _seconds(limit_text)
    status_text = attrs.get("exit_status", attrs.get("Exit_status"))
    exit_status = (
        int(status_text) if status_text and re.fullmatch(r"-?[0-9]+", status_text) else None
    )
    code, signal, abnormal = exit_evidence(exit_status if phase is P.ENDED else None, used, limit)
    waiting = phase in (P.QUEUED, P.HELD)
    return JobObservation(
        scheduler_job_id=job_id,
        phase=phase,
        raw_state=raw_state,
        queued_reason=(attrs.get("comment") or None) if waiting else None,
        exec_host=_exec_hosts(attrs.get("exec_host")),
        walltime_used=used_text,
        walltime_used_seconds=used,
        walltime_limit=limit_text,
        walltime_limit_seconds=limit,
        job_name=attrs.get("Job_Name") or None,
        exit_code=code,
        exit_signal=signal,
        abnormal_end_state=abnormal,
    )


def parse_status(ids: Sequence[str], result: CommandResult) -> StatusReport | ParseFailure:
    """One ``qstat -f`` answer for ``ids``. Ids qstat names as unknown are ``absent``;
    other ids not printed are ``unlisted`` (keep_completed may have expired: never
    evidence). Any other error, or a block without ``job_state``, is a failure."""
    wanted = ordered_unique(ids)
    by_number = {sequence_number(job_id): job_id for job_id in wanted}
    absent: list[str] = []
    if result.returncode != 0:
        for line in lines_of(result.stderr):
            unknown = _UNKNOWN.fullmatch(line.strip())
            asked = by_number.get(sequence_number(unknown["id"])) if unknown else None
            if asked is None:
                return command_failed("qstat", result)
            absent.append(asked)
        if not absent:
            return command_failed("qstat", result)
    blocks = _blocks(result.stdout)
    if isinstance(blocks, ParseFailure):
        return blocks
    observed: dict[str, JobObservation] = {}
    warnings: list[str] = []
    for job_id, attrs in blocks:
        asked = by_number.get(sequence_number(job_id))
        if asked is None:
            warnings.append(f"qstat listed job {job_id}, which was not asked for")
            continue
        if "job_state" not in attrs:
            return failure("qstat", "partial", f"job {job_id} has no job_state")
        observed[asked] = _observe(asked, attrs, warnings)
    unlisted = tuple(j for j in wanted if j not in observed and j not in absent)
    return StatusReport(
        observed=observed,
        unlisted=unlisted,
        absent=tuple(dict.fromkeys(absent)),
        warnings=tuple(warnings),
    )


def parse_tag(vq_job_id: str, result: CommandResult) -> tuple[TagMatch, ...] | ParseFailure:
    """``qstat -f`` of all visible jobs: those named ``vq-<vq_job_id>``."""
    if result.returncode != 0:
        return command_failed("qstat", result)
    blocks = _blocks(result.stdout)
    if isinstance(blocks, ParseFailure):
        return blocks
    name = f"vq-{vq_job_id}"
    found: list[TagMatch] = []
    for job_id, attrs in blocks:
        if attrs.get("Job_Name") != name:
            continue
        if "job_state" not in attrs:
            return failure("qstat", "partial", f"job {job_id} has no job_state")
        state = attrs["job_state"]
        found.append(TagMatch(job_id, state, PHASES.get(state, P.UNKNOWN)))
    return tuple(found)


# --------------------------------------------------------------------------------------
# qdel, qhold, qrls
# --------------------------------------------------------------------------------------
def parse_control(result: CommandResult) -> ControlOutcome:
    """The outcome of ``qdel``/``qhold``/``qrls``."""
    said = " ".join(lines_of(result.stderr) + lines_of(result.stdout))
    if result.returncode == 0:
        return ControlOutcome("done")
    if "Unknown Job Id" in said or "Invalid job id specified" in said:
        return ControlOutcome("unknown_job", bounded(said))
    if "invalid state for job - COMPLETE" in said or "Job has finished" in said:
        return ControlOutcome("already_ended", bounded(said))
    if "Request invalid for state of job" in said:
        return ControlOutcome("not_pending", bounded(said))
    return ControlOutcome("failed", bounded(said) or f"exit {result.returncode}")
