"""The fleet table: one page of every host's jobs, complete however many jobs a host has.

Contract of :func:`fleet_table`:

* Rows are merged newest submitted first across hosts (:mod:`vq.web.fleet.views`);
  ``total`` counts every match of every answering host, not only the ones a snapshot
  lists.
* A host's part comes from its cached snapshot when that is exact (the common case: the
  first, unfiltered pages); otherwise the host is asked for its first ``offset + limit``
  matches (``vq web fleet-list``, rounded up to :data:`LISTING_STEP` rows so paging on
  reuses one cached answer), all such hosts in parallel, each bounded by its
  ``ssh_timeout`` and cached like every fleet read.
* A host that does not answer that listing is left out of the page and named in
  ``incomplete`` (``[{"host", "error"}]``), never an error; hosts that are not ``ok``
  are left out too (their rows say why).

:func:`queue_filter` validates the filters as ``GET /api/v1/jobs`` does (an unknown
state or a ``since`` that is neither an ISO time nor a duration: InvalidInput, 422).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from vq.domain.states import JobState
from vq.errors import InvalidInput, VqError
from vq.gateway import since_moment
from vq.web.fleet.shapes import FleetTable, Incomplete
from vq.web.fleet.source import FleetSource, HostView
from vq.web.fleet.views import HostPart, QueueFilter, from_snapshot, merge_page

__all__ = ["LISTING_STEP", "fleet_table", "queue_filter"]

#: A host listing asks for a multiple of this many rows.
LISTING_STEP = 500
_MAX_PARALLEL = 8


def queue_filter(
    states: Sequence[str] = (),
    tags: Sequence[str] = (),
    name: str | None = None,
    since: str | None = None,
    group: str | None = None,
) -> QueueFilter:
    """The validated filters (see the module docstring)."""
    known = {state.value for state in JobState}
    wanted = frozenset(state.upper() for state in states)
    if not wanted <= known:
        raise InvalidInput(
            f"unknown state in {sorted(wanted - known)}",
            hint="states are " + ", ".join(state.value for state in JobState),
        )
    moment = since_moment(since) if since else None
    return QueueFilter(wanted, tuple(tags), name or None, moment, group or None)


def fleet_table(
    source: FleetSource,
    views: Sequence[HostView],
    flt: QueueFilter,
    *,
    host: str | None = None,
    offset: int = 0,
    limit: int = 100,
) -> FleetTable:
    """``{"jobs": [ROW + host], "total", "offset", "limit", "incomplete"}`` (see above)."""
    want = offset + limit
    parts: list[HostPart] = []
    asked: list[str] = []
    for view in views:
        if view.status != "ok" or (host is not None and view.name != host):
            continue
        part = from_snapshot(view, flt, want)
        if part is None:
            asked.append(view.name)
        else:
            parts.append(part)
    size = -(-want // LISTING_STEP) * LISTING_STEP
    words = flt.words()

    def ask(name: str) -> HostPart | VqError:
        try:
            answer = source.listing(name, words, size)
        except VqError as exc:
            return exc
        return HostPart(answer["jobs"][:want], answer["total"])

    incomplete: list[Incomplete] = []
    if asked:
        with ThreadPoolExecutor(max_workers=min(_MAX_PARALLEL, len(asked))) as pool:
            for name, got in zip(asked, pool.map(ask, asked), strict=True):
                if isinstance(got, VqError):
                    incomplete.append({"host": name, "error": got.message})
                else:
                    parts.append(got)
    return {**merge_page(parts, offset, limit), "incomplete": incomplete}
