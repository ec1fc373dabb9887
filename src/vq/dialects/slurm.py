"""The Slurm dialect: ``#SBATCH`` directives, sbatch/squeue/sacct/scancel/scontrol argv.

Parsers live in :mod:`vq.dialects.slurm_parse`; the script body in
:mod:`vq.dialects.script`. Read-only queries run under ``env LC_ALL=C TZ=UTC`` so that
times (``--starttime``) and messages have one meaning whatever the login shell sets.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from functools import partial

from vq.dialects import _values as values
from vq.dialects import slurm_parse as parse
from vq.dialects.model import (
    AccountingReport,
    ControlOutcome,
    Query,
    RecheckRequired,
    ScriptRequest,
    SplitRequired,
    StatusReport,
    SubmitAccepted,
    TagMatch,
    UnsafeSchedulerValue,
)
from vq.dialects.protocol import ControlAction
from vq.dialects.script import check_request, render_body

__all__ = ["ACCOUNTING_MARGIN", "SLURM", "SlurmDialect", "directives", "format_time_limit"]

#: ``--starttime`` is this much before the oldest submission (clock skew between the
#: driver and the cluster; sacct only uses it to bound its database query).
ACCOUNTING_MARGIN = timedelta(hours=1)

_QUERY_ENV = ("env", "LC_ALL=C", "TZ=UTC")
_SLURM_ID = re.compile(r"[0-9]+(?:_[0-9]+)?")


def format_time_limit(seconds: int) -> str:
    """``--time`` value: whole minutes rounded up, as ``D-HH:MM:SS``."""
    minutes = values.ceil_minutes(seconds)
    days, rest = divmod(minutes, 1440)
    hours, mins = divmod(rest, 60)
    return f"{days}-{hours:02d}:{mins:02d}:00"


def directives(request: ScriptRequest) -> list[str]:
    """The ``#SBATCH`` lines for a checked request."""
    workspace = request.workspace.rstrip("/")
    lines = [
        f"--job-name=vq-{request.job_id}",
        f"--comment=vq:{request.job_id}:{request.nonce}",
        f"--cpus-per-task={request.cpus}",
    ]
    if request.scheduler_tasks is not None:
        lines.append(f"--ntasks={request.scheduler_tasks}")
    if request.mem_mb is not None and request.mem_directive == "request":
        lines.append(f"--mem={request.mem_mb}M")
    if request.wall_time_seconds is not None:
        lines.append(f"--time={format_time_limit(request.wall_time_seconds)}")
    lines += [
        f"--output={workspace}/{request.stdout_path}",
        f"--error={workspace}/{request.stderr_path}",
        "--open-mode=append",
        f"--chdir={workspace}",
        "--no-requeue",
    ]
    for option, value in (
        ("partition", request.partition),
        ("account", request.account),
        ("qos", request.qos),
    ):
        if value is not None:
            lines.append(f"--{option}={value}")
    return [f"#SBATCH {line}" for line in lines]


def _check_ids(ids: Sequence[str]) -> tuple[str, ...]:
    if isinstance(ids, str) or not ids:
        raise UnsafeSchedulerValue("scheduler_job_id", "give at least one Slurm job id")
    for job_id in ids:
        _check_id(job_id)
    return tuple(dict.fromkeys(ids))


def _check_id(job_id: str) -> str:
    if not isinstance(job_id, str) or not _SLURM_ID.fullmatch(job_id):
        raise UnsafeSchedulerValue("scheduler_job_id", f"{job_id!r} is not a Slurm job id")
    return job_id


def _since(moment: datetime) -> str:
    if moment.tzinfo is None:
        raise UnsafeSchedulerValue("since", "needs a timezone-aware time")
    start = (moment - ACCOUNTING_MARGIN).astimezone(UTC)
    return start.strftime("%Y-%m-%dT%H:%M:%S")


class SlurmDialect:
    """Slurm 22.05 and later (see the module docstring for the command shapes)."""

    name = "slurm"
    job_id_variables: tuple[str, ...] = ("SLURM_JOB_ID",)

    def render_script(self, request: ScriptRequest) -> str:
        check_request(request)
        head = ["#!/bin/sh", *directives(request)]
        return (
            "\n".join(head)
            + "\n"
            + render_body(request, scheduler_id_variables=self.job_id_variables)
        )

    def submit(self, script_path: str) -> Query[SubmitAccepted]:
        path = values.check_abs_path("script_path", script_path)
        return Query(("sbatch", "--parsable", path), parse.parse_submit)

    def status(self, ids: Sequence[str]) -> Query[StatusReport | SplitRequired | RecheckRequired]:
        """One id: ``squeue --jobs=ID`` (slurmctld's single-job RPC, and the only shape
        whose invalid-id diagnostic proves a job absent). Several: every job of the SSH
        login (``--me``: slurmctld packs only that user's jobs, and squeue does not
        match each row against an id list), keeping the asked ids; asked ids it did not
        list are asked by id in a second query (:class:`RecheckRequired`). When the
        login owns too many jobs for the output cap, the id list is asked instead."""
        wanted = _check_ids(ids)
        by_ids = self._status_by_ids(wanted)
        if len(wanted) == 1:
            return by_ids
        argv = (
            *_QUERY_ENV,
            "squeue",
            "--noheader",
            "--me",
            "--states=all",
            "-o",
            parse.SQUEUE_FORMAT,
        )
        recheck = partial(parse.parse_login_status, wanted, self._status_by_ids)
        return Query(argv, recheck, fallback=by_ids)

    def _status_by_ids(
        self, wanted: Sequence[str]
    ) -> Query[StatusReport | SplitRequired | RecheckRequired]:
        argv = (
            *_QUERY_ENV,
            "squeue",
            "--noheader",
            "--states=all",
            f"--jobs={','.join(wanted)}",
            "-o",
            parse.SQUEUE_FORMAT,
        )
        return Query(argv, partial(parse.parse_status, wanted))

    def accounting(self, ids: Sequence[str], since: datetime) -> Query[AccountingReport]:
        wanted = _check_ids(ids)
        argv = (
            *_QUERY_ENV,
            "sacct",
            "--parsable2",
            "--noheader",
            "-j",
            ",".join(wanted),
            f"--starttime={_since(since)}",
            "-o",
            ",".join(parse.SACCT_FIELDS),
        )
        return Query(argv, partial(parse.parse_accounting, wanted))

    def control(self, action: ControlAction, scheduler_job_id: str) -> Query[ControlOutcome]:
        job_id = _check_id(scheduler_job_id)
        argv: tuple[str, ...]
        if action == "cancel":
            argv = ("scancel", job_id)
        elif action in ("hold", "release"):
            argv = ("scontrol", action, job_id)
        else:
            raise UnsafeSchedulerValue("action", f"{action!r} is not cancel, hold or release")
        return Query(argv, parse.parse_control)

    def find_by_tag(
        self, vq_job_id: str, since: datetime
    ) -> tuple[Query[tuple[TagMatch, ...]], ...]:
        job_id = values.check_job_id("job_id", vq_job_id)
        live = (
            *_QUERY_ENV,
            "squeue",
            "--noheader",
            "--states=all",
            f"--name=vq-{job_id}",
            "-o",
            "%i|%T|%k",
        )
        history = (
            *_QUERY_ENV,
            "sacct",
            "--parsable2",
            "--noheader",
            "-X",
            f"--name=vq-{job_id}",
            f"--starttime={_since(since)}",
            "-o",
            "JobID,State,Comment",
        )
        return (
            Query(live, partial(parse.parse_tag_squeue, job_id)),
            Query(history, partial(parse.parse_tag_sacct, job_id)),
        )


SLURM = SlurmDialect()
