"""The §6.3 queue cockpit of the console and ``GET /api/v1/queue``.

:func:`queue_summary` counts jobs per state (from the listing's ``counts``: only the
RUNNING/SUSPENDED rows are listed), sums the CPUs and declared memory of the
RUNNING/SUSPENDED ones, and adds the daemon's caps (None without a daemon), whether the
daemon answers, and the drain and throttle holds. It blocks on disk and the daemon socket
and raises :class:`~vq.errors.VqError` unscrubbed: call it through ``Backend``.
"""

from __future__ import annotations

from typing import Any

from vq.domain.spec import utcnow
from vq.domain.states import ACTIVE, JobState
from vq.gateway import Gateway
from vq.paths import StatePaths
from vq.services.control import read_drain, read_throttle
from vq.services.reports import state_counts

__all__ = ["queue_summary"]

_ACTIVE_NAMES = frozenset(state.value for state in ACTIVE)


def queue_summary(
    gateway: Gateway, paths: StatePaths, max_age: float | None = None
) -> dict[str, Any]:
    """The cockpit summary (the JSON of ``GET /api/v1/queue``).

    ``max_age``: the daemon may skip re-checking the spec files for other writers'
    changes when it did so at most that many seconds ago (its ``list`` parameter).
    """
    ping = gateway.ask("ping")
    # Only the RUNNING/SUSPENDED rows: every other state is counted, never listed.
    params: dict[str, Any] = {"states": sorted(_ACTIVE_NAMES), "offset": 0}
    if max_age is not None:
        params["max_age"] = max_age
    listing = gateway.list_rows(params)
    active: list[dict[str, Any]] = listing["jobs"]
    counts = {**state_counts(()), **listing["counts"]}
    info: dict[str, Any] = ping if isinstance(ping, dict) else {}
    caps = info.get("caps")
    drain = read_drain(paths)
    throttle = read_throttle(paths)
    now = utcnow()
    return {
        "total": sum(counts.values()),
        "active": len(active),
        "pending": counts[JobState.PENDING.value],
        "counts": counts,
        "active_cpus": sum(int(r["cpus"] or 0) for r in active),
        "declared_mem_mb": sum(int(r["mem_mb"] or 0) for r in active),
        "undeclared_mem_jobs": sum(1 for r in active if r["mem_mb"] is None),
        "quarantined": len(listing["quarantined"]),
        "caps": caps,
        "daemon": {
            "running": isinstance(ping, dict),
            **{key: info.get(key) for key in ("pid", "version", "uptime_seconds")},
        },
        "drain": {
            "mode": drain.mode,
            "reject_submits": drain.reject_submits,
            "reason": drain.reason,
            "set_at": drain.set_at,
        },
        "throttle": (
            {
                "max_jobs": throttle.max_jobs,
                "max_cpus": throttle.max_cpus,
                "expires_at": throttle.expires_at,
            }
            if throttle.active(now)
            else None
        ),
    }
