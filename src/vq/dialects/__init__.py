"""Scheduler dialects (pure): render batch scripts, build argv, parse scheduler output.

``dialect_for(name)`` returns the implementation for a ``scheduler_dialect`` value.
``pbspro`` and ``sge`` are accepted vocabulary without an implementation and fail
closed, as does any other name (§8.2, §8.3). See docs/dialects.md.
"""

from __future__ import annotations

from vq.dialects.model import (
    AccountingRecord,
    AccountingReport,
    AccountingStep,
    CommandResult,
    ControlOutcome,
    JobObservation,
    ParseFailure,
    ProgramHooks,
    Query,
    RecheckRequired,
    SchedulerPhase,
    ScriptRequest,
    SplitRequired,
    StatusReport,
    SubmitAccepted,
    TagMatch,
    UnsafeSchedulerValue,
)
from vq.dialects.protocol import INVERSE, ControlAction, SchedulerDialect
from vq.dialects.slurm import SLURM, SlurmDialect
from vq.dialects.torque import TORQUE, TorqueDialect
from vq.errors import ConfigError

__all__ = [
    "DIALECTS",
    "INVERSE",
    "UNIMPLEMENTED",
    "AccountingRecord",
    "AccountingReport",
    "AccountingStep",
    "CommandResult",
    "ControlAction",
    "ControlOutcome",
    "JobObservation",
    "ParseFailure",
    "ProgramHooks",
    "Query",
    "RecheckRequired",
    "SchedulerDialect",
    "SchedulerPhase",
    "ScriptRequest",
    "SlurmDialect",
    "SplitRequired",
    "StatusReport",
    "SubmitAccepted",
    "TagMatch",
    "TorqueDialect",
    "UnsafeSchedulerValue",
    "dialect_for",
]

DIALECTS: dict[str, SchedulerDialect] = {"slurm": SLURM, "torque": TORQUE}
#: Accepted ``scheduler_dialect`` values with no implementation: they fail closed.
UNIMPLEMENTED = frozenset({"pbspro", "sge"})


def dialect_for(name: str) -> SchedulerDialect:
    """The dialect called ``name``; :class:`~vq.errors.ConfigError` for ``pbspro``,
    ``sge`` (not implemented) and anything unknown, instead of guessing flags."""
    dialect = DIALECTS.get(name)
    if dialect is not None:
        return dialect
    if name in UNIMPLEMENTED:
        raise ConfigError(
            f"scheduler_dialect {name!r} is not implemented",
            hint='use scheduler_dialect = "slurm" or "torque"',
            reference="scheduler-dialect-unimplemented",
        )
    raise ConfigError(
        f"unknown scheduler_dialect {name!r}",
        hint='use scheduler_dialect = "slurm" or "torque"',
        reference="scheduler-dialect-unknown",
    )
