"""Pure shaping of fleet data for pages and the API (no I/O).

The fleet table is every host's jobs merged into one order, newest submitted first
(ties: host, then id, both descending), filtered like ``GET /api/v1/jobs``
(:class:`QueueFilter`: states, tags, name contains, submitted since, array/chain group)
plus ``host``, one page at a time.

A page at ``offset``/``limit`` needs, from each host, only that host's first
``offset + limit`` matching rows in that order (the *wanted* rows) and its number of
matches. :func:`from_snapshot` takes both from a host's snapshot when the snapshot can
answer exactly — it lists every job of the host, or the page wants only unfiltered rows
the snapshot holds — and answers None otherwise (the caller then asks the host:
:mod:`vq.web.fleet.listing`). :func:`merge_page` merges the hosts' parts into the page.
:func:`host_rows` is the per-host status table.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from vq.web.fleet.shapes import FleetPage, FleetRow, HostRow
from vq.web.fleet.source import HostView
from vq.web.pages.views import capacity_bars

__all__ = [
    "HostPart",
    "QueueFilter",
    "from_snapshot",
    "host_rows",
    "merge_page",
    "newest_first",
]


@dataclass(frozen=True)
class QueueFilter:
    """The filters of ``GET /api/v1/jobs``, already validated (every given one must match).

    ``states`` are upper-case state names; ``name`` matches a part of the job name (case
    sensitive, as ``vq list --name``); ``since`` is an aware time (submitted at or after
    it); ``group`` an array or chain group id.
    """

    states: frozenset[str] = frozenset()
    tags: tuple[str, ...] = ()
    name: str | None = None
    since: datetime | None = None
    group: str | None = None

    @property
    def empty(self) -> bool:
        return not (self.states or self.tags or self.name or self.since or self.group)

    def matches(self, row: FleetRow) -> bool:
        if self.states and str(row.get("state", "")) not in self.states:
            return False
        if self.tags and not set(self.tags) <= set(row.get("tags") or []):
            return False
        if self.name and self.name not in str(row.get("job_name") or ""):
            return False
        if self.group and self.group not in (row.get("array_group_id"), row.get("chain_group_id")):
            return False
        return self.since is None or _submitted(row) >= self.since

    def words(self) -> list[str]:
        """The options of ``vq web fleet-list`` that ask a host for the same selection."""
        out: list[str] = []
        for state in sorted(self.states):
            out += ["--state", state]
        for tag in self.tags:
            out += ["--tag", tag]
        if self.name:
            out += ["--name", self.name]
        if self.since is not None:
            out += ["--since", self.since.isoformat()]
        if self.group:
            out += ["--group", self.group]
        return out


def _submitted(row: FleetRow) -> datetime:
    try:
        moment = datetime.fromisoformat(str(row.get("submitted_at") or ""))
    except ValueError:
        return datetime.min.replace(tzinfo=datetime.now().astimezone().tzinfo)
    return moment if moment.tzinfo is not None else moment.astimezone()


def _order(row: FleetRow) -> tuple[str, str, str]:
    return (str(row.get("submitted_at") or ""), str(row.get("host") or ""), str(row.get("id")))


def newest_first(rows: Iterable[FleetRow]) -> list[FleetRow]:
    """``rows`` in the fleet table's order (the snapshot and fleet-list use it per host)."""
    return sorted(rows, key=_order, reverse=True)


@dataclass
class HostPart:
    """One host's share of a page: its wanted rows (in order) and its number of matches."""

    rows: list[FleetRow] = field(default_factory=list)
    total: int = 0


def from_snapshot(view: HostView, flt: QueueFilter, want: int) -> HostPart | None:
    """The host's part from its snapshot (``view.jobs``, newest first), or None when the
    snapshot cannot answer exactly (it lacks jobs the selection may need)."""
    complete = view.total_jobs <= len(view.jobs)
    if complete:
        matching = [row for row in view.jobs if flt.matches(row)]
        return HostPart(matching[:want], len(matching))
    if flt.empty and want <= len(view.jobs):
        return HostPart(view.jobs[:want], view.total_jobs)
    return None


def merge_page(parts: Sequence[HostPart], offset: int, limit: int) -> FleetPage:
    """``{"jobs": [ROW + host], "total", "offset", "limit"}``: rows ``offset`` to
    ``offset + limit`` of the merged order. Exact when each part holds its host's first
    ``offset + limit`` matches."""
    rows = newest_first(row for part in parts for row in part.rows)
    return {
        "jobs": rows[offset : offset + limit],
        "total": sum(part.total for part in parts),
        "offset": offset,
        "limit": limit,
    }


def host_rows(hosts: Sequence[HostView]) -> list[HostRow]:
    """One row per host for the fleet page: status, counts, capacity bars, running jobs."""
    out: list[HostRow] = []
    for view in hosts:
        summary = view.summary
        out.append(
            {
                **view.as_dict(),
                "counts": (summary.get("counts") if summary else None) or {},
                "bars": capacity_bars(summary or {}) if view.status == "ok" else [],
                "running": view.running[:20],
            }
        )
    return out
