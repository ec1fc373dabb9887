"""Pure shaping of fleet data for pages and the API (no I/O).

:func:`fleet_queue` merges every answering host's rows into one table (newest first),
filtered like ``GET /api/v1/jobs`` (states, tags, name contains) plus ``host``, and
returns one page of it. :func:`host_rows` is the per-host status table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vq.web.fleet.source import HostView
from vq.web.pages.views import capacity_bars

__all__ = ["fleet_queue", "host_rows"]


def _matches(row: dict[str, Any], states: set[str], tags: Sequence[str], name: str | None) -> bool:
    if states and str(row.get("state", "")).upper() not in states:
        return False
    if tags and not set(tags) <= set(row.get("tags") or []):
        return False
    return not name or name.lower() in str(row.get("job_name") or "").lower()


def fleet_queue(
    hosts: Sequence[HostView],
    *,
    states: Sequence[str] = (),
    tags: Sequence[str] = (),
    name: str | None = None,
    host: str | None = None,
    offset: int = 0,
    limit: int = 100,
) -> dict[str, Any]:
    """``{"jobs": [ROW + host], "total", "offset", "limit"}`` (newest submitted first)."""
    wanted = {s.upper() for s in states}
    rows = [
        row
        for view in hosts
        if host is None or view.name == host
        for row in view.jobs
        if _matches(row, wanted, tags, name)
    ]
    rows.sort(key=lambda r: (str(r.get("submitted_at") or ""), r["host"]), reverse=True)
    return {
        "jobs": rows[offset : offset + limit],
        "total": len(rows),
        "offset": offset,
        "limit": limit,
    }


def host_rows(hosts: Sequence[HostView]) -> list[dict[str, Any]]:
    """One row per host for the fleet page: status, counts, capacity bars, running jobs."""
    out = []
    for view in hosts:
        summary = view.summary or {}
        running = [r for r in view.jobs if r.get("state") in ("RUNNING", "SUSPENDED")]
        out.append(
            {
                **view.as_dict(),
                "counts": summary.get("counts") or {},
                "bars": capacity_bars(summary) if view.status == "ok" else [],
                "running": running[:20],
            }
        )
    return out
