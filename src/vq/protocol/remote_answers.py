"""What another vq may answer over SSH: one model per remote ``--json`` verb (§2.2).

The remote side of ``vq VERB HOST`` is another installation's CLI; its answer is input
from outside, never trusted. :func:`read_answer` is the one way an answer is read:

- the text is the answer only when it is a single JSON value (text the remote
  ``vq_command`` printed before vq started is dropped earlier, by the answer mark of
  :mod:`vq.protocol.answer_mark`); malformed JSON, a value nested deeper than
  :data:`MAX_DEPTH` or larger than the caller's cap is a :class:`BadAnswer`;
- the value is validated against the verb's model (strict types: a number is not a
  string, a list is not an object). Job ids must be well formed (12 lowercase hex
  characters), so an id can never carry a path or an option into this side; states and
  the fields the local side reads have their types; fields nobody reads here are kept
  as the remote sent them (schemas only grow);
- the validated answer is returned as the plain JSON value it was (never re-encoded), so
  ``--json`` output passes through unchanged.

Text answers (``vq --version``, ``vq logs --tell``) have their own readers. A
:class:`BadAnswer` names what is wrong in a few words; the caller names the host.
Pure: pydantic and the standard library only.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
    StringConstraints,
    ValidationError,
    model_validator,
)

from vq.domain.validation_words import Vocabulary, first_problem

__all__ = [
    "MAX_DEPTH",
    "ActionAnswer",
    "BadAnswer",
    "EventsAnswer",
    "FetchAckAnswer",
    "FleetJobAnswer",
    "FleetListAnswer",
    "FleetSnapshotAnswer",
    "GroupStatusAnswer",
    "JobRow",
    "ListAnswer",
    "OverviewAnswer",
    "StatusAnswer",
    "SubmitAnswer",
    "TopAnswer",
    "UsageAnswer",
    "WaitAnswer",
    "read_answer",
    "read_offset",
    "read_version",
]

#: The deepest nesting an answer may have (vq's own answers stay under 10 levels).
MAX_DEPTH = 64

JobId = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{12}$")]
State = Annotated[str, StringConstraints(pattern=r"^[A-Z][A-Z_]{0,31}$")]
Count = Annotated[int, Field(ge=0)]
Hours = Annotated[float, Field(ge=0)]


class BadAnswer(ValueError):
    """An answer that is not what the verb's model allows (the message says why)."""


class _Open(BaseModel):
    """An answer object: the declared fields typed, further fields kept as sent."""

    model_config = ConfigDict(extra="allow", strict=True)


class JobRow(_Open):
    """A job as ``vq list --json`` rows, ``vq status --json`` and specs carry it."""

    id: JobId
    state: State
    job_name: str | None = None
    command: list[str] | None = None
    tags: list[str] | None = None
    submitted_at: str | None = None
    scheduler_target: str | None = None
    spec_version: int | None = None


class ListAnswer(_Open):
    """``vq list --json``."""

    jobs: list[JobRow]
    quarantined: list[dict[str, Any]] = Field(default_factory=list)
    counts: dict[str, Count] = Field(default_factory=dict)


class StatusAnswer(JobRow):
    """``vq status ID --json``."""


class GroupStatusAnswer(_Open):
    """``vq status --group G --json``: the group's summary and its rows."""

    jobs: list[JobRow]


class EventsAnswer(RootModel[list[dict[str, Any]]]):
    """``vq events ID --json``: the timeline, one object per event."""

    model_config = ConfigDict(strict=True)


class SubmitAnswer(_Open):
    """``vq submit --json``: one job's spec, or an array's or chain's group and specs."""

    id: JobId | None = None
    state: State | None = None
    jobs: list[JobRow] | None = None
    array_group_id: JobId | None = None
    chain_group_id: JobId | None = None
    capacity_warnings: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_shape(self) -> SubmitAnswer:
        groups = [g for g in (self.array_group_id, self.chain_group_id) if g is not None]
        if self.jobs is None:
            if self.id is None or self.state is None:
                raise ValueError("neither a job (id, state) nor a group (jobs)")
        elif self.id is not None or len(groups) != 1 or not self.jobs:
            raise ValueError("a group needs its jobs and exactly one group id, and no id")
        return self


class TopAnswer(_Open):
    """``vq top --json`` (the fields a one-host view relies on)."""

    daemon: dict[str, Any]
    counts: dict[str, Count]


class OverviewDaemon(_Open):
    running: bool


class OverviewAnswer(_Open):
    """``vq overview --json`` (the fields the fleet view reads)."""

    daemon: OverviewDaemon
    counts: dict[str, Count]
    total_jobs: Count


class UsageTotal(_Open):
    jobs: Count
    wall_hours: Hours
    cpu_hours: Hours


class UsageAnswer(_Open):
    """``vq usage --json`` (the total the fleet's ``--by host`` reads)."""

    total: UsageTotal


class ActionRow(_Open):
    """One job's row in ``vq kill|pause|resume --json``."""

    id: JobId
    state: State | None = None


class ActionAnswer(RootModel[list[ActionRow]]):
    """``vq kill|pause|resume ID --json``: one row per job."""

    model_config = ConfigDict(strict=True)


class WaitAnswer(RootModel[list[ActionRow]]):
    """``vq wait ID... --json``."""

    model_config = ConfigDict(strict=True)


class FetchAckAnswer(_Open):
    """``vq fetch ID --ack-fetched …``."""

    last_fetched_at: str | None = None


class FleetSnapshotAnswer(_Open):
    """``vq web fleet-snapshot --json``."""

    summary: dict[str, Any] = Field(default_factory=dict)
    jobs: list[JobRow] = Field(default_factory=list)
    total_jobs: Count | None = None
    running: list[JobRow] | None = None
    lanes: list[dict[str, Any]] = Field(default_factory=list)


class FleetJobAnswer(_Open):
    """``vq web fleet-job ID --json``."""

    job: JobRow
    events: list[dict[str, Any]] = Field(default_factory=list)
    logs: dict[str, Any] = Field(default_factory=dict)
    samples: list[Any] = Field(default_factory=list)


class FleetListAnswer(_Open):
    """``vq web fleet-list --json``."""

    jobs: list[JobRow]
    total: Count


Model = TypeVar("Model", bound=BaseModel)

_WORDS = Vocabulary(unknown="unexpected field", mapping="an object", sequence="a list")


def _depth_within(value: Any, limit: int) -> bool:
    """Whether ``value`` nests at most ``limit`` containers deep (iteratively)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > limit:
                return False
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return True


def read_answer(data: bytes, model: type[Model]) -> Any:
    """The JSON value in ``data`` once ``model`` accepts it (see the module docstring)."""
    try:
        value = json.loads(data)
    except RecursionError:
        raise BadAnswer(f"it is nested deeper than {MAX_DEPTH} levels") from None
    except (ValueError, UnicodeDecodeError):
        shown = "nothing" if not data.strip() else "text that is not JSON"
        raise BadAnswer(f"it printed {shown}") from None
    if not _depth_within(value, MAX_DEPTH):
        raise BadAnswer(f"it is nested deeper than {MAX_DEPTH} levels")
    try:
        model.model_validate(value)
    except ValidationError as exc:
        where, message = first_problem(exc, "answer", _WORDS)
        raise BadAnswer(f"{where}: {message}") from None
    return value


_VERSION = re.compile(r"^vq, version ([0-9A-Za-z][0-9A-Za-z.+_-]{0,63})$")


def read_version(data: bytes) -> str:
    """The version in ``vq --version``'s one line (``vq, version 1.2.3``)."""
    lines = data.decode("utf-8", errors="replace").strip().splitlines()
    match = _VERSION.match(lines[-1].strip()) if len(lines) == 1 else None
    if match is None:
        raise BadAnswer("`vq --version` did not print `vq, version X`")
    return match.group(1)


def read_offset(data: bytes) -> int:
    """The byte offset ``vq logs ID --tell`` prints (one non-negative number)."""
    text = data.decode("ascii", errors="replace").strip()
    if not text.isdigit() or len(text) > 18:
        raise BadAnswer("`vq logs --tell` did not print a byte offset")
    return int(text)
