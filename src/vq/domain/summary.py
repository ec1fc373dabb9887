"""The light entry of a finished job: what listings, filters and counts read of it.

A terminal spec never changes again except through an explicit rewrite (an archive, a
cleanup), so the daemon's index keeps for it only a :class:`JobSummary` — the fields of a
listing row, the filters and the queue ETA, plus the recorded process group (the
start-up leak check) and the archive time (the unfinished-archive check) — and parses
the full spec from its file when a caller needs the rest (``vq status``, a long-poll).
A summary is a cache of the spec file, never a second truth: it is rebuilt from the spec
whenever the file changed.

:class:`Listed` is the read-only shape listings take; both :class:`~vq.domain.spec.JobSpec`
and :class:`JobSummary` have it. :func:`summary_record` / :func:`summary_from_record`
turn a summary into a compact JSON array and back (pure; the file that holds them is
:mod:`vq.store.summaries`).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from vq.domain.spec import JobSpec
from vq.domain.states import JobState

__all__ = ["RECORD_FIELDS", "JobSummary", "Listed", "summary_from_record", "summary_record"]


class Listed(Protocol):
    """What a listing, a filter, an ordering or the ETA reads of a job."""

    @property
    def id(self) -> str: ...
    @property
    def job_name(self) -> str | None: ...
    @property
    def state(self) -> JobState: ...
    @property
    def command(self) -> list[str]: ...
    @property
    def tags(self) -> list[str]: ...
    @property
    def cpus(self) -> int: ...
    @property
    def cpu_affinity(self) -> list[int] | None: ...
    @property
    def mem_mb(self) -> int | None: ...
    @property
    def wall_time_seconds(self) -> int | None: ...
    @property
    def priority(self) -> int: ...
    @property
    def submitted_at(self) -> datetime: ...
    @property
    def started_at(self) -> datetime | None: ...
    @property
    def finished_at(self) -> datetime | None: ...
    @property
    def exit_code(self) -> int | None: ...
    @property
    def failure_reason(self) -> str | None: ...
    @property
    def retry_count(self) -> int: ...
    @property
    def array_group_id(self) -> str | None: ...
    @property
    def array_index(self) -> int | None: ...
    @property
    def array_value(self) -> str | None: ...
    @property
    def chain_group_id(self) -> str | None: ...
    @property
    def chain_index(self) -> int | None: ...
    @property
    def parent_jobid(self) -> str | None: ...
    @property
    def paused_seconds_total(self) -> float: ...
    @property
    def paused_at(self) -> datetime | None: ...
    @property
    def not_before(self) -> datetime | None: ...
    @property
    def scheduler_target(self) -> str | None: ...
    @property
    def scheduler_state(self) -> str | None: ...
    @property
    def scheduler_queued_reason(self) -> str | None: ...
    @property
    def scheduler_started_at(self) -> datetime | None: ...
    @property
    def pgid(self) -> int | None: ...
    @property
    def submitter(self) -> str | None: ...
    @property
    def is_terminal(self) -> bool: ...


@dataclass(slots=True)
class JobSummary:
    """The :class:`Listed` fields of one job, copied from its spec (see module doc).

    Treated as immutable: nothing assigns to a summary once made (a changed spec gets a
    new one). Not ``frozen`` only because a frozen dataclass takes four times as long
    to build, and a start builds one per finished job.
    """

    id: str
    job_name: str | None
    state: JobState
    command: list[str]
    tags: list[str]
    cpus: int
    cpu_affinity: list[int] | None
    mem_mb: int | None
    wall_time_seconds: int | None
    priority: int
    submitted_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    exit_code: int | None
    failure_reason: str | None
    retry_count: int
    array_group_id: str | None
    array_index: int | None
    array_value: str | None
    chain_group_id: str | None
    chain_index: int | None
    parent_jobid: str | None
    paused_seconds_total: float
    paused_at: datetime | None
    not_before: datetime | None
    scheduler_target: str | None
    scheduler_state: str | None
    scheduler_queued_reason: str | None
    scheduler_started_at: datetime | None
    pgid: int | None
    #: Who submitted it (multi-user mode: its owner's uid, checked against the owner's
    #: tree before a cached summary is taken, see ``SpecStore.admits_summary``).
    submitter: str | None
    #: The jobs it waited for (multi-user mode checks them against the owners' trees too).
    depends_on: list[str] | None
    #: When the job's workspace was archived (``vq cleanup``), if it was.
    archived_at: datetime | None

    @property
    def is_terminal(self) -> bool:
        return self.state.is_terminal

    @classmethod
    def of(cls, spec: JobSpec) -> JobSummary:
        # One C-level getter for every field, passed in field order (twice as fast as
        # keywords; a first start builds one per finished job).
        return cls(*_RECORD_OF(spec))


#: The summary's fields in record order (a record is ``[value of each, ...]``).
RECORD_FIELDS: tuple[str, ...] = tuple(JobSummary.__dataclass_fields__)
_RECORD_OF = operator.attrgetter(*RECORD_FIELDS)
_TIMES = frozenset(
    {
        "submitted_at",
        "started_at",
        "finished_at",
        "paused_at",
        "not_before",
        "archived_at",
        "scheduler_started_at",
    }
)
_TIME_AT = tuple(i for i, name in enumerate(RECORD_FIELDS) if name in _TIMES)
_STATE_AT = RECORD_FIELDS.index("state")
_STATES = {state.value: state for state in JobState}  # a dict look-up, not Enum.__call__


def summary_record(summary: JobSummary) -> list[Any]:
    """``summary`` as a JSON-ready array (times as ISO strings, the state by name)."""
    values: list[Any] = [getattr(summary, name) for name in RECORD_FIELDS]
    values[_STATE_AT] = summary.state.value
    for i in _TIME_AT:
        if values[i] is not None:
            values[i] = values[i].isoformat()
    return values


def summary_from_record(record: Sequence[Any]) -> JobSummary:
    """The summary of :func:`summary_record`'s array; ValueError/TypeError/KeyError when
    it is not one (a caller then reads the spec instead)."""
    if len(record) != len(RECORD_FIELDS):
        raise ValueError("a summary record of another length")
    values = list(record)
    values[_STATE_AT] = _STATES[values[_STATE_AT]]
    for i in _TIME_AT:
        if values[i] is not None:
            values[i] = datetime.fromisoformat(values[i])
    if not isinstance(values[0], str) or not isinstance(values[3], list):
        raise TypeError("a summary record with a malformed id or command")
    return JobSummary(*values)
