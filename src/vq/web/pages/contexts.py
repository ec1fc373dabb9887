"""The template context of each console page (what its Jinja template reads).

One TypedDict per page or fragment; :func:`vq.web.pages.render.render` adds the common
values (request, principal, CSRF token) to any of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from vq.domain.events import Event
from vq.domain.receipt import Receipt
from vq.protocol.report_answers import OverviewAnswer, UsageAnswer
from vq.web.pages.jobview import ShownJob, SpecRow
from vq.web.pages.views import (
    CapacityBar,
    QueueChart,
    SampleSeries,
    TableEntry,
    TableQuery,
    UsageChart,
    WatchdogReading,
)

if TYPE_CHECKING:
    from vq.web.cockpit import QueueSummary

__all__ = [
    "AuditContext",
    "AuditRow",
    "DetailContext",
    "Flash",
    "LiveContext",
    "OverviewContext",
    "SummaryContext",
    "TableContext",
]


class Flash(TypedDict, total=False):
    """The one-shot outcome message a no-JS action left in a cookie."""

    flash: str
    flash_kind: str


class TableContext(TypedDict):
    """The queue table (``/`` and its fragment)."""

    q: TableQuery
    entries: list[TableEntry]
    total: int
    total_jobs: int
    first: int
    last: int
    pages: int
    quarantined: int
    states: tuple[str, ...]


class SummaryContext(TypedDict):
    """The cockpit summary above the table."""

    summary: QueueSummary
    bars: list[CapacityBar]
    states: tuple[str, ...]


class LiveContext(TypedDict):
    """The live part of a job's page: its view, specification rows and timeline (the
    timeline's event records as the file holds them)."""

    job: ShownJob
    spec_rows: list[SpecRow]
    events: list[Event]
    live: bool
    #: the watchdog's reading that ended the job (the chart marks it), else None
    kill: WatchdogReading | None


class DetailContext(LiveContext):
    """A job's whole page: the live part, log tails, receipt and samples chart."""

    nav: str
    logs: dict[str, str]
    receipt: Receipt | None
    series: SampleSeries
    sample_count: int
    tail_lines: int


class OverviewContext(TypedDict):
    """``/overview``."""

    nav: str
    overview: OverviewAnswer
    usage: UsageAnswer
    chart: UsageChart
    queue: QueueChart


class AuditRow(TypedDict):
    """One audit line as the audit page shows it (values as the log file holds them)."""

    source: str
    ts: object
    actor: object
    role: object
    action: object
    outcome: object
    detail: str


class AuditContext(TypedDict):
    """``/audit``."""

    nav: str
    rows: list[AuditRow]
    files: list[str]
