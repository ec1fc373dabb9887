"""The Torque dialect: ``#PBS`` directives, qsub/qstat/qdel/qhold/qrls argv.

Parsers live in :mod:`vq.dialects.torque_parse`; the script body in
:mod:`vq.dialects.script`. Torque has no accounting command vq can rely on:
``qstat -f`` (while the server keeps completed jobs) carries ``exit_status`` and the
walltime detail, so :meth:`TorqueDialect.accounting` is None.

Directive choices, each for a Torque behaviour:

* ``-S /bin/sh``: pbs_mom starts the user's login shell otherwise, ignoring ``#!``.
* ``-r n``: a job vq submitted must never be rerun behind its back.
* ``-o``/``-e`` go to ``_vq/scheduler.out``/``.err``, not the job's logs: pbs_mom copies
  its spool files to those paths when the job ends, which would replace the logs the
  script appends to while the job runs.
* ``scheduler_tasks`` and ``qos`` have no Torque directive and are not rendered.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from functools import partial

from vq.dialects import _values as values
from vq.dialects import torque_parse as parse
from vq.dialects.model import (
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

__all__ = ["TORQUE", "TorqueDialect", "directives", "format_walltime"]

_QUERY_ENV = ("env", "LC_ALL=C", "TZ=UTC")
_TORQUE_ID = re.compile(r"[0-9]+(?:\[[0-9]*\])?(?:\.[A-Za-z0-9][A-Za-z0-9.-]*)?")
_COMMANDS: dict[str, str] = {"cancel": "qdel", "hold": "qhold", "release": "qrls"}


def format_walltime(seconds: int) -> str:
    """``-l walltime=`` value: ``HH:MM:SS`` (hours may exceed 24), exact seconds."""
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}"


def directives(request: ScriptRequest) -> list[str]:
    """The ``#PBS`` lines for a checked request."""
    workspace = request.workspace.rstrip("/")
    lines = [
        f"-N vq-{request.job_id}",
        "-S /bin/sh",
        "-r n",
        f"-l nodes=1:ppn={request.cpus}",
    ]
    if request.wall_time_seconds is not None:
        lines.append(f"-l walltime={format_walltime(request.wall_time_seconds)}")
    if request.mem_mb is not None and request.mem_directive == "request":
        lines.append(f"-l mem={request.mem_mb}mb")
    lines += [f"-o {workspace}/_vq/scheduler.out", f"-e {workspace}/_vq/scheduler.err"]
    if request.partition is not None:
        lines.append(f"-q {request.partition}")
    if request.account is not None:
        lines.append(f"-A {request.account}")
    return [f"#PBS {line}" for line in lines]


def _check_id(job_id: str) -> str:
    if not isinstance(job_id, str) or not _TORQUE_ID.fullmatch(job_id):
        raise UnsafeSchedulerValue("scheduler_job_id", f"{job_id!r} is not a Torque job id")
    return job_id


class TorqueDialect:
    """Torque (PBS) as real servers and Slurm's ``slurm-wlm-torque`` wrappers speak it."""

    name = "torque"
    #: Slurm's Torque wrappers set no PBS_JOBID, only Slurm's own variable.
    job_id_variables: tuple[str, ...] = ("PBS_JOBID", "SLURM_JOB_ID")

    def render_script(self, request: ScriptRequest) -> str:
        check_request(request)
        if request.partition is not None and "," in request.partition:
            raise UnsafeSchedulerValue("partition", "a Torque queue is a single name")
        head = ["#!/bin/sh", *directives(request)]
        return (
            "\n".join(head)
            + "\n"
            + render_body(request, scheduler_id_variables=self.job_id_variables)
        )

    def submit(self, script_path: str) -> Query[SubmitAccepted]:
        path = values.check_abs_path("script_path", script_path)
        return Query(("qsub", path), parse.parse_submit)

    def status(self, ids: Sequence[str]) -> Query[StatusReport | SplitRequired | RecheckRequired]:
        if isinstance(ids, str) or not ids:
            raise UnsafeSchedulerValue("scheduler_job_id", "give at least one Torque job id")
        wanted = tuple(dict.fromkeys(_check_id(job_id) for job_id in ids))
        return Query((*_QUERY_ENV, "qstat", "-f", *wanted), partial(parse.parse_status, wanted))

    def accounting(self, ids: Sequence[str], since: datetime) -> None:
        return None

    def control(self, action: ControlAction, scheduler_job_id: str) -> Query[ControlOutcome]:
        command = _COMMANDS.get(action)
        if command is None:
            raise UnsafeSchedulerValue("action", f"{action!r} is not cancel, hold or release")
        return Query((command, _check_id(scheduler_job_id)), parse.parse_control)

    def find_by_tag(
        self, vq_job_id: str, since: datetime
    ) -> tuple[Query[tuple[TagMatch, ...]], ...]:
        job_id = values.check_job_id("job_id", vq_job_id)
        return (Query((*_QUERY_ENV, "qstat", "-f"), partial(parse.parse_tag, job_id)),)


TORQUE = TorqueDialect()
