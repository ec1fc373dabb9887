"""The SchedulerDialect protocol (§8.3): what the scheduler executor needs from a dialect.

A dialect is pure. It renders scripts and builds :class:`~vq.dialects.model.Query`
values (an argv plus the one parser of its answer); the executor runs the argv through
its runner and hands the result to ``query.parse``. Nothing here runs a command, opens
a file or reads the environment.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal, Protocol

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
)

__all__ = ["INVERSE", "ControlAction", "SchedulerDialect"]

ControlAction = Literal["cancel", "hold", "release"]

#: The exact inverse a failed pause or resume attempts after its hold or release
#: reached the scheduler (§7.3). A cancel has none.
INVERSE: dict[ControlAction, ControlAction] = {"hold": "release", "release": "hold"}


class SchedulerDialect(Protocol):
    """One batch scheduler's vocabulary. Implementations: ``slurm``, ``torque``."""

    #: ``"slurm"`` or ``"torque"`` (the ``scheduler_dialect`` configuration value).
    name: str
    #: The environment variables that may hold the scheduler's job id inside the job;
    #: the first one set wins.
    job_id_variables: tuple[str, ...]

    def render_script(self, request: ScriptRequest) -> str:
        """The whole batch script: directives, then the shared body. Raises
        :class:`~vq.dialects.model.UnsafeSchedulerValue` naming a refused field."""
        ...

    def submit(self, script_path: str) -> Query[SubmitAccepted]:
        """Submit the staged script at ``script_path`` (absolute, on the cluster)."""
        ...

    def status(self, ids: Sequence[str]) -> Query[StatusReport | SplitRequired | RecheckRequired]:
        """ONE query for the state of all ``ids`` on this scheduler host (a
        :class:`RecheckRequired` answer names a second, by-id query for the ids it
        did not list)."""
        ...

    def accounting(self, ids: Sequence[str], since: datetime) -> Query[AccountingReport] | None:
        """Accounting detail for ended jobs submitted at or after ``since`` (None when
        the scheduler has no accounting command: Torque's detail is in ``status``)."""
        ...

    def control(self, action: ControlAction, scheduler_job_id: str) -> Query[ControlOutcome]:
        """Cancel, hold or release one job."""
        ...

    def find_by_tag(
        self, vq_job_id: str, since: datetime
    ) -> tuple[Query[tuple[TagMatch, ...]], ...]:
        """Queries that find scheduler jobs named ``vq-<vq_job_id>`` (live first, then
        accounting), for recovering an id that was never recorded (§4.7)."""
        ...
