"""One page of a ``vq list`` selection: sorting, group folding, offset and limit.

The daemon's ``list`` method and the gateway's disk fallback share :func:`page_params`
and :func:`paged`, so ``GET /api/v1/jobs`` and the console's queue table ask for just
one page instead of every row. Without any paging parameter a listing is unchanged
(``vq list`` sends none). Parameters, beside the :class:`~vq.services.query.ListFilter`
ones:

* ``sort`` — the API's order (``docs/web.md``): ``submitted_at`` (default: the
  listing's own order, oldest first, group members in index order), ``priority``,
  ``state``, ``job_name``, ``id``, ``finished_at``; a ``-`` prefix sorts descending.
  Jobs without the value come last either way; ties keep the listing's order.
* ``table_sort`` (``submitted``, ``priority``, ``state``, ``name``) and ``table_dir``
  (``asc``/``desc``) — the console table's order (:func:`table_row_key`). Array and
  chain groups then fold into one *entry* each, placed where their first member sorts:
  ``offset``/``limit`` count entries, and a page holds every member of its groups.
* ``offset`` (≥ 0, default 0) and ``limit`` (≥ 0, default all).
* ``count_only`` — no rows at all, only the totals.

With any of them the answer adds ``total`` (matching jobs; with ``table_sort``,
matching entries) and ``total_jobs`` (matching jobs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from vq.domain.states import JobState
from vq.errors import InvalidInput
from vq.protocol.answers import ListAnswer

if TYPE_CHECKING:  # only a type: the CLI imports this module without pydantic's models
    from vq.domain.summary import Listed
    from vq.services.context import ServiceContext

__all__ = [
    "API_SORTS",
    "TABLE_SORTS",
    "Ordering",
    "Page",
    "PageParams",
    "list_on_disk",
    "order",
    "order_key",
    "page_of",
    "page_params",
    "paged",
    "table_row_key",
]

API_SORTS: tuple[str, ...] = ("submitted_at", "priority", "state", "job_name", "id", "finished_at")
TABLE_SORTS: tuple[str, ...] = ("submitted", "priority", "state", "name")
_STATE_ORDER = {state.value: i for i, state in enumerate(JobState)}
_ZERO = timedelta(0)
_PAGING_KEYS = ("sort", "table_sort", "table_dir", "offset", "limit", "count_only")


@dataclass(frozen=True)
class PageParams:
    sort: str = "submitted_at"
    table_sort: str | None = None
    table_desc: bool = True
    offset: int = 0
    limit: int | None = None
    count_only: bool = False


@dataclass(frozen=True)
class Page:
    specs: list[Listed]
    total: int
    total_jobs: int


def _count(params: Mapping[str, Any], key: str) -> int | None:
    value = params.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInput(f"{key} must be a whole number ≥ 0")
    return value


def page_params(params: Mapping[str, Any]) -> PageParams | None:
    """The paging parameters of a ``list`` request; None when it has none."""
    if not any(params.get(key) is not None for key in _PAGING_KEYS):
        return None
    sort = params.get("sort") or "submitted_at"
    if not isinstance(sort, str) or sort.removeprefix("-") not in API_SORTS:
        raise InvalidInput(
            f"unknown sort {sort!r}", hint="sort by " + ", ".join(API_SORTS) + " (- descending)"
        )
    table_sort = params.get("table_sort")
    if table_sort is not None and table_sort not in TABLE_SORTS:
        raise InvalidInput(f"unknown table_sort {table_sort!r}")
    direction = params.get("table_dir") or "desc"
    if direction not in ("asc", "desc"):
        raise InvalidInput("table_dir must be asc or desc")
    return PageParams(
        sort=sort,
        table_sort=table_sort,
        table_desc=direction == "desc",
        offset=_count(params, "offset") or 0,
        limit=_count(params, "limit"),
        count_only=bool(params.get("count_only")),
    )


# --- the API's sort ----------------------------------------------------------------------
def _submitted(specs: Sequence[Listed]) -> Callable[[Listed], Any]:
    """A sort key ordering specs exactly as their ``submitted_at`` ISO strings do.

    The datetime itself when every one is in UTC (same offset: the strings then order
    chronologically, and equal strings mean equal times), else the string.
    """
    if all(spec.submitted_at.utcoffset() == _ZERO for spec in specs):
        return lambda spec: spec.submitted_at
    return lambda spec: spec.submitted_at.isoformat()


def _api_value(spec: Listed, key: str) -> Any:
    """The value of ``key`` in the spec's ``list_row`` (what the API sorts rows by)."""
    if key == "submitted_at":
        return spec.submitted_at.isoformat()
    if key == "finished_at":
        return spec.finished_at.isoformat() if spec.finished_at else None
    if key == "state":
        return spec.state.value
    return getattr(spec, key)


def _api_sorted(specs: Sequence[Listed], sort: str) -> list[Listed]:
    key = sort.lstrip("-")
    if sort == "submitted_at":
        return list(specs)  # the listing's own order
    if key == "submitted_at":  # never missing
        return sorted(specs, key=_submitted(specs), reverse=True)
    values = [(_api_value(spec, key), spec) for spec in specs]
    present = [pair for pair in values if pair[0] is not None]
    missing = [spec for value, spec in values if value is None]
    present.sort(key=lambda pair: pair[0], reverse=sort.startswith("-"))
    return [spec for _, spec in present] + missing


# --- the console table's order ---------------------------------------------------------
def table_row_key(sort: str) -> Callable[[Mapping[str, Any]], Any]:
    """The console table's sort key of a ``list_row`` (reversed for ``desc``)."""
    if sort == "priority":
        return lambda row: (row.get("priority") or 0, row.get("submitted_at") or "")
    if sort == "state":
        return lambda row: (_STATE_ORDER.get(row["state"], 99), row.get("submitted_at") or "")
    if sort == "name":
        return lambda row: ((row.get("job_name") or "").lower(), row.get("submitted_at") or "")
    return lambda row: (row.get("submitted_at") or "", row["id"])


def _table_spec_key(sort: str, specs: Sequence[Listed]) -> Callable[[Listed], Any]:
    """:func:`table_row_key` over specs (the same order as over their rows)."""
    at = _submitted(specs)
    if sort == "priority":
        return lambda spec: (spec.priority or 0, at(spec))
    if sort == "state":
        return lambda spec: (_STATE_ORDER.get(spec.state.value, 99), at(spec))
    if sort == "name":
        return lambda spec: ((spec.job_name or "").lower(), at(spec))
    return lambda spec: (at(spec), spec.id)


def _entries(ordered: Sequence[Listed]) -> list[list[Listed]]:
    """Jobs, with each array/chain group folded where its first member sorts."""
    entries: list[list[Listed]] = []
    groups: dict[str, list[Listed]] = {}
    for spec in ordered:
        group = spec.array_group_id or spec.chain_group_id
        if not group:
            entries.append([spec])
            continue
        members = groups.get(group)
        if members is None:
            members = groups[group] = []
            entries.append(members)
        members.append(spec)
    return entries


@dataclass(frozen=True)
class Ordering:
    """A whole selection in page order: each entry one job, or one folded group."""

    entries: list[list[Listed]]
    total_jobs: int


def order(selected: Sequence[Listed], params: PageParams) -> Ordering:
    """Every entry of ``selected`` (the listing's order, as ``select`` returns it), sorted.

    Depends on the specs and on ``sort``/``table_sort``/``table_desc`` only, so a caller
    may keep it while none of those changed (see :func:`order_key`).
    """
    if params.table_sort is None:
        return Ordering([[spec] for spec in _api_sorted(selected, params.sort)], len(selected))
    key = _table_spec_key(params.table_sort, selected)
    return Ordering(_entries(sorted(selected, key=key, reverse=params.table_desc)), len(selected))


def order_key(params: PageParams) -> tuple[str, str | None, bool]:
    """What of ``params`` an :class:`Ordering` depends on."""
    return (params.sort, params.table_sort, params.table_desc)


def page_of(ordering: Ordering, params: PageParams) -> Page:
    """The page ``params`` asks for (``offset``/``limit`` count entries)."""
    end = None if params.limit is None else params.offset + params.limit
    chosen = [] if params.count_only else ordering.entries[params.offset : end]
    return Page(
        [spec for entry in chosen for spec in entry], len(ordering.entries), ordering.total_jobs
    )


def paged(selected: Sequence[Listed], params: PageParams) -> Page:
    """One page of ``selected`` (the listing's order, as :func:`~vq.services.query.select`)."""
    return page_of(order(selected, params), params)


def list_on_disk(ctx: ServiceContext, params: Mapping[str, Any]) -> ListAnswer:
    """The daemon's ``list`` answer, from the spec files (the no-daemon path).

    ``{"jobs", "quarantined", "counts"}`` (``counts``: every job by state), plus
    ``total`` and ``total_jobs`` with paging parameters.
    """
    from vq.services.query import ListFilter, list_row, select

    flt = ListFilter.from_params(params)
    paging = page_params(params)
    scan = ctx.store.scan()
    now = ctx.now()
    selected = select(scan.specs.values(), flt)
    page = paged(selected, paging) if paging is not None else None
    counts = {state.value: 0 for state in JobState}
    for spec in scan.specs.values():
        counts[spec.state.value] += 1
    answer: ListAnswer = {
        "jobs": [
            list_row(s, ctx.base_caps, now, ctx.lanes) for s in (page.specs if page else selected)
        ],
        "quarantined": [item.as_dict() for item in scan.quarantined.values()],
        "counts": counts,
    }
    if page is not None:
        answer["total"] = page.total
        answer["total_jobs"] = page.total_jobs
    return answer
