"""View models of the console pages, built from Backend data (pure: no I/O, no clock).

Contracts:

* :class:`TableQuery` is the queue table's query string (``state``, ``tag``, ``name``,
  ``sort``, ``dir``, ``open``, ``page``): unknown sort keys fall back to
  ``submitted``/``desc`` and a malformed page to 1, so a hand-edited URL never errors.
  ``open`` lists the groups shown expanded; a new sort starts again at page 1.
* :func:`table_entries` sorts list rows and folds every array/chain (rows sharing an
  ``array_group_id`` or ``chain_group_id``) into one group entry placed where its first
  member sorts, members in index order, with per-state counts (the order of
  :func:`vq.services.listing.table_row_key`, which pages the same entries).
* :func:`capacity_bars` gives used/cap/percent for CPUs, memory and jobs from
  ``Backend.queue_summary()`` (cap None when no daemon reports caps).
* :func:`sample_series` turns watchdog samples into the chart's columns (epoch seconds,
  RSS MB, CPU %, the memory limit as a flat series); :func:`usage_by_day_and_tag` the
  CPU-hours per UTC day and tag of the overview chart (accounting as ``vq usage``).
* :func:`watchdog_reading` is the reading that made the watchdog end a job (its RSS,
  the limit and when: the spec's ``watchdog_evidence`` at ``finished_at``), which the
  chart marks: samples are periodic, so the killing reading is usually not among them.
* :func:`queue_over_time` rebuilds, from the specs' ``submitted_at``/``started_at``/
  ``finished_at`` alone, how many jobs were running and pending over the last 24 h (the
  peak within each bucket, so a job shorter than a bucket still shows) and how many
  ended per UTC hour, completed or not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypedDict
from urllib.parse import urlencode

from vq.domain.states import ACTIVE, TERMINAL, JobState
from vq.protocol.answers import ListRow
from vq.services.listing import table_row_key
from vq.services.reports import active_seconds

__all__ = [
    "SORT_KEYS",
    "STATES",
    "CapacityBar",
    "GroupEntry",
    "JobEntry",
    "QueueChart",
    "SampleSeries",
    "TableEntry",
    "TableQuery",
    "UsageChart",
    "WatchdogReading",
    "capacity_bars",
    "queue_over_time",
    "sample_series",
    "table_entries",
    "usage_by_day_and_tag",
    "watchdog_reading",
]

STATES: tuple[str, ...] = tuple(state.value for state in JobState)


class JobEntry(TypedDict):
    """A job of the queue table on its own."""

    kind: Literal["job"]
    row: ListRow


class GroupEntry(TypedDict):
    """An array or chain of the queue table: its members' rows and their states' counts."""

    kind: Literal["group"]
    type: str
    id: str
    name: str | None
    rows: list[ListRow]
    counts: dict[str, int]
    open: bool


TableEntry = JobEntry | GroupEntry


class CapacityBar(TypedDict):
    """One capacity bar of the cockpit: use against the cap, in percent when capped."""

    label: str
    used: float
    cap: float | None
    unit: str
    percent: float | None


class SampleSeries(TypedDict):
    """The chart columns of a job's watchdog samples (uPlot's data)."""

    t: list[float]
    elapsed: list[float | None]
    rss_mb: list[float | None]
    cpu_percent: list[float | None]
    mem_limit_mb: list[float] | None
    mem_mb: int | None


class WatchdogReading(TypedDict):
    """The watchdog's memory reading that ended a job: epoch seconds, RSS and limit MB."""

    at: float
    rss_mb: float
    limit_mb: int | None


class TagSeries(TypedDict):
    """One tag's CPU-hours per day."""

    label: str
    values: list[float]


class UsageChart(TypedDict):
    """CPU-hours per day and tag (the overview's usage chart)."""

    days: list[float]
    labels: list[str]
    series: list[TagSeries]
    total_cpu_hours: float


class EndedCounts(TypedDict):
    """Jobs ended in the window, completed or not."""

    completed: int
    failed: int


class QueueChart(TypedDict):
    """Running and pending jobs over time, and jobs ended per hour."""

    t: list[float]
    running: list[int]
    pending: list[int]
    hours_t: list[float]
    completed: list[int]
    failed: list[int]
    now_running: int
    now_pending: int
    peak_running: int
    peak_pending: int
    ended: EndedCounts
    window_hours: int


_STATE_ORDER = {name: i for i, name in enumerate(STATES)}
SORT_KEYS: tuple[str, ...] = ("submitted", "priority", "state", "name")
#: The overview chart's window and how many tags get their own series.
USAGE_DAYS = 14
USAGE_TOP_TAGS = 6
#: The overview's queue chart: its window and the width of one bucket of its lines.
QUEUE_HOURS = 24
QUEUE_STEP_MINUTES = 15
_INF = float("inf")
_ACTIVE_NAMES = frozenset(s.value for s in ACTIVE)
_TERMINAL_NAMES = frozenset(s.value for s in TERMINAL)


@dataclass(frozen=True)
class TableQuery:
    state: str = ""
    tag: str = ""
    name: str = ""
    sort: str = "submitted"
    dir: str = "desc"
    open: tuple[str, ...] = field(default_factory=tuple)
    page: int = 1

    @classmethod
    def from_params(cls, params: Mapping[str, str], opened: Sequence[str] = ()) -> TableQuery:
        state = params.get("state", "").strip().upper()
        sort = params.get("sort", "submitted")
        direction = params.get("dir", "desc")
        return cls(
            state=state if state in _STATE_ORDER else "",
            tag=params.get("tag", "").strip()[:200],
            name=params.get("name", "").strip()[:200],
            sort=sort if sort in SORT_KEYS else "submitted",
            dir=direction if direction in ("asc", "desc") else "desc",
            open=tuple(dict.fromkeys(g for g in opened if g))[:50],
            page=_page_number(params.get("page", "")),
        )

    def params(self, **changes: Any) -> dict[str, str | int | list[str]]:
        """The non-default parameters (``open`` repeated), with ``changes`` applied."""
        query = replace(self, **changes)
        values: dict[str, str | int | list[str]] = {}
        for key in ("state", "tag", "name"):
            if getattr(query, key):
                values[key] = getattr(query, key)
        if query.sort != "submitted" or query.dir != "desc":
            values["sort"] = query.sort
            values["dir"] = query.dir
        if query.open:
            values["open"] = list(query.open)
        if query.page != 1:
            values["page"] = query.page
        return values

    def qs(self, **changes: Any) -> str:
        """The query string (no leading ``?``) of this query with ``changes`` applied."""
        return urlencode(self.params(**changes), doseq=True)

    def sort_qs(self, key: str) -> str:
        """Link target of a column header: sort by ``key``, toggling the direction."""
        if self.sort == key:
            return self.qs(dir="asc" if self.dir == "desc" else "desc", page=1)
        return self.qs(sort=key, dir="asc" if key == "name" else "desc", page=1)

    def toggle_qs(self, group_id: str) -> str:
        opened = tuple(g for g in self.open if g != group_id)
        if group_id not in self.open:
            opened = (*self.open, group_id)
        return self.qs(open=opened)

    @property
    def filtered(self) -> bool:
        return bool(self.state or self.tag or self.name)


def _page_number(text: str) -> int:
    """A 1-based page number from the query string (1 when absent or malformed)."""
    try:
        return max(1, min(int(text.strip()), 1_000_000))
    except ValueError:
        return 1


def _group_of(row: Mapping[str, Any]) -> tuple[str, str] | None:
    if row.get("array_group_id"):
        return "array", str(row["array_group_id"])
    if row.get("chain_group_id"):
        return "chain", str(row["chain_group_id"])
    return None


def table_entries(rows: Sequence[ListRow], query: TableQuery) -> list[TableEntry]:
    """Sorted table entries: ``{"kind": "job", "row"}`` or ``{"kind": "group", ...}``."""
    ordered = sorted(rows, key=table_row_key(query.sort), reverse=query.dir == "desc")
    entries: list[TableEntry] = []
    groups: dict[str, GroupEntry] = {}
    for row in ordered:
        grouped = _group_of(row)
        if grouped is None:
            entries.append({"kind": "job", "row": row})
            continue
        kind, group_id = grouped
        group = groups.get(group_id)
        if group is None:
            group = {
                "kind": "group",
                "type": kind,
                "id": group_id,
                "name": row.get("job_name"),
                "rows": [],
                "counts": {},
                "open": group_id in query.open,
            }
            groups[group_id] = group
            entries.append(group)
        group["rows"].append(row)
    for group in groups.values():
        if group["type"] == "array":
            group["rows"].sort(key=lambda r: (r.get("array_index") or 0, r["id"]))
        else:
            group["rows"].sort(key=lambda r: (r.get("chain_index") or 0, r["id"]))
        counts: dict[str, int] = {}
        for row in group["rows"]:
            counts[row["state"]] = counts.get(row["state"], 0) + 1
        group["counts"] = dict(sorted(counts.items(), key=lambda kv: _STATE_ORDER.get(kv[0], 99)))
    return entries


def _bar(label: str, used: float, cap: float | None, unit: str = "") -> CapacityBar:
    percent = None
    if cap:
        percent = max(0.0, min(100.0, 100.0 * used / cap))
    return {"label": label, "used": used, "cap": cap, "unit": unit, "percent": percent}


def capacity_bars(summary: Mapping[str, Any]) -> list[CapacityBar]:
    """CPUs, memory and jobs this host reserves (declared, its own jobs only: a
    scheduler lane's run on a cluster) against the daemon's caps. A summary from an
    older vq without the ``local_*`` keys falls back to every active job."""
    caps = summary.get("caps") or {}

    def used(local: str, every: str) -> Any:
        value = summary.get(local)
        return (summary.get(every) if value is None else value) or 0

    return [
        _bar("CPUs", used("local_active_cpus", "active_cpus"), caps.get("max_cpus")),
        _bar(
            "Memory",
            used("local_declared_mem_mb", "declared_mem_mb"),
            caps.get("max_mem_mb"),
            "MB",
        ),
        _bar("Jobs", used("local_active", "active"), caps.get("max_jobs")),
    ]


def _epoch(value: Any) -> float | None:
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def sample_series(samples: Sequence[Mapping[str, Any]], mem_mb: int | None) -> SampleSeries:
    """``{"t", "elapsed", "rss_mb", "cpu_percent", "mem_limit_mb", "mem_mb"}`` for uPlot.

    ``t`` is epoch seconds, ``elapsed`` the job's active seconds at each sample; charts.js
    builds the same columns from ``GET /api/v1/jobs/{id}/samples`` while the job runs.
    """
    times: list[float] = []
    elapsed: list[float | None] = []
    rss: list[float | None] = []
    cpu: list[float | None] = []
    for sample in samples:
        moment = _epoch(sample.get("ts"))
        if moment is None:
            continue
        times.append(moment)
        elapsed.append(_number(sample.get("elapsed_seconds")))
        rss.append(_number(sample.get("rss_mb")))
        cpu.append(_number(sample.get("cpu_percent")))
    limit = [float(mem_mb)] * len(times) if mem_mb else None
    return {
        "t": times,
        "elapsed": elapsed,
        "rss_mb": rss,
        "cpu_percent": cpu,
        "mem_limit_mb": limit,
        "mem_mb": mem_mb,
    }


def watchdog_reading(job: Mapping[str, Any]) -> WatchdogReading | None:
    """The memory reading that made the watchdog end ``job`` (a status view), or None
    when no memory verdict ended it (or the view predates ``watchdog_evidence``)."""
    evidence = job.get("watchdog_evidence")
    if not isinstance(evidence, Mapping):
        return None
    rss = _number(evidence.get("rss_mb"))
    moment = _epoch(job.get("finished_at"))
    if rss is None or moment is None:
        return None
    limit = evidence.get("limit_mb")
    return {
        "at": moment,
        "rss_mb": rss,
        "limit_mb": limit if isinstance(limit, int) and not isinstance(limit, bool) else None,
    }


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def usage_by_day_and_tag(
    rows: Sequence[Mapping[str, Any]], now: datetime, days: int = USAGE_DAYS
) -> UsageChart:
    """CPU-hours per UTC day (of ``started_at``) and tag over the last ``days`` days.

    Days are given as the epoch second of their noon, so a bar is centred on its day.

    A job with several tags counts under each (as ``vq usage --by tag``); the
    :data:`USAGE_TOP_TAGS` largest tags get a series each, the rest are summed as
    ``other``, untagged jobs as ``(untagged)``. Returns ``{"days": [epoch], "labels":
    [ISO date], "series": [{"label", "values"}], "total_cpu_hours"}``.
    """
    today = now.astimezone(UTC).date()
    first = today - timedelta(days=days - 1)
    day_list = [first + timedelta(days=i) for i in range(days)]
    index = {day: i for i, day in enumerate(day_list)}
    per_tag: dict[str, list[float]] = {}
    total = 0.0
    for row in rows:
        started = _epoch(row.get("started_at")) if row.get("started_at") else None
        if started is None:
            continue
        day = datetime.fromtimestamp(started, UTC).date()
        if day not in index:
            continue
        wall = active_seconds(row, now)
        if wall is None:
            continue
        hours = wall * int(row.get("cpus") or 1) / 3600
        total += hours
        for tag in list(dict.fromkeys(row.get("tags") or [])) or ["(untagged)"]:
            per_tag.setdefault(tag, [0.0] * days)[index[day]] += hours
    ranked = sorted(per_tag.items(), key=lambda kv: (-sum(kv[1]), kv[0]))
    kept = ranked[:USAGE_TOP_TAGS]
    rest = ranked[USAGE_TOP_TAGS:]
    if rest:
        kept.append(("other", [sum(values[i] for _, values in rest) for i in range(days)]))
    series: list[TagSeries] = [
        {"label": tag, "values": [round(v, 4) for v in values]} for tag, values in kept
    ]
    return {
        "days": [datetime(d.year, d.month, d.day, 12, tzinfo=UTC).timestamp() for d in day_list],
        "labels": [d.isoformat() for d in day_list],
        "series": series,
        "total_cpu_hours": round(total, 4),
    }


def _intervals(row: Mapping[str, Any]) -> tuple[tuple[float, float], ...]:
    """The (pending, running) spans of one job as half-open ``[start, end)`` epochs.

    A nonterminal job's last span is open (``inf``). A PENDING job that has a
    ``started_at`` waits for a retry: its earlier attempt's end is not on record, so it
    counts as pending since submission and not as running.
    """
    state = str(row.get("state") or "")
    submitted = _epoch(row.get("submitted_at")) if row.get("submitted_at") else None
    started = _epoch(row.get("started_at")) if row.get("started_at") else None
    finished = _epoch(row.get("finished_at")) if row.get("finished_at") else None
    end = _INF if state not in _TERMINAL_NAMES else finished
    if submitted is None or end is None:
        return ((0.0, 0.0), (0.0, 0.0))
    if state == JobState.PENDING.value or started is None:
        return ((submitted, end), (0.0, 0.0))
    if state in _ACTIVE_NAMES:
        return ((submitted, started), (started, _INF))
    return ((submitted, started), (started, end))


def _peaks(spans: Sequence[tuple[float, float]], edges: Sequence[float]) -> list[int]:
    """Most spans open at once within each ``[edges[k], edges[k+1])``, and at the last edge."""
    events: dict[float, int] = {}
    for start, end in spans:
        if end > start:
            events[start] = events.get(start, 0) + 1
            events[end] = events.get(end, 0) - 1
    moments = sorted(events)
    count, i, peaks = 0, 0, list[int]()
    for k, edge in enumerate(edges):
        while i < len(moments) and moments[i] <= edge:
            count += events[moments[i]]
            i += 1
        peak = count
        upper = edges[k + 1] if k + 1 < len(edges) else edge
        running = count
        while i < len(moments) and moments[i] < upper:
            running += events[moments[i]]
            peak = max(peak, running)
            i += 1
        count = running
        peaks.append(peak)
    return peaks


def queue_over_time(
    rows: Sequence[Mapping[str, Any]],
    now: datetime,
    hours: int = QUEUE_HOURS,
    step_minutes: int = QUEUE_STEP_MINUTES,
) -> QueueChart:
    """Running and pending jobs over the last ``hours``, and jobs ended per UTC hour.

    ``t`` are bucket starts (epoch seconds, aligned to ``step_minutes`` in UTC) and
    then ``now`` itself; ``running``/``pending`` give the most jobs in that state at
    any instant of each bucket (the last point: at ``now``). A job counts as pending
    from ``submitted_at`` to ``started_at`` (or its end, if it never ran) and as
    running (SUSPENDED included) from ``started_at`` to ``finished_at``.

    ``hours_t`` are the centres of the last ``hours`` UTC hours (the current one last);
    ``completed``/``failed`` count jobs whose ``finished_at`` falls in each, COMPLETED
    or any other terminal state. Also ``now_running``, ``now_pending``, ``peak_running``,
    ``peak_pending`` and ``ended`` (``{"completed", "failed"}`` over the window).
    """
    end = now.astimezone(UTC).timestamp()
    step = step_minutes * 60
    first = (end - hours * 3600) // step * step
    edges: list[float] = []
    while first < end:
        edges.append(first)
        first += step
    edges.append(end)
    spans = [_intervals(row) for row in rows]
    pending = _peaks([s[0] for s in spans], edges)
    running = _peaks([s[1] for s in spans], edges)

    hour0 = end // 3600 * 3600 - (hours - 1) * 3600
    completed = [0] * hours
    failed = [0] * hours
    for row in rows:
        state = str(row.get("state") or "")
        finished = _epoch(row.get("finished_at")) if row.get("finished_at") else None
        if state not in _TERMINAL_NAMES or finished is None or not hour0 <= finished <= end:
            continue
        bucket = min(hours - 1, int((finished - hour0) // 3600))
        (completed if state == JobState.COMPLETED.value else failed)[bucket] += 1
    return {
        "t": edges,
        "running": running,
        "pending": pending,
        "hours_t": [hour0 + k * 3600 + 1800 for k in range(hours)],
        "completed": completed,
        "failed": failed,
        "now_running": running[-1],
        "now_pending": pending[-1],
        "peak_running": max(running),
        "peak_pending": max(pending),
        "ended": {"completed": sum(completed), "failed": sum(failed)},
        "window_hours": hours,
    }
