"""The §6.3 queue cockpit of the console and ``GET /api/v1/queue``.

:func:`queue_summary` counts jobs per state (from the listing's ``counts``: only the
RUNNING/SUSPENDED rows are listed), sums the CPUs and declared memory of the
RUNNING/SUSPENDED ones (``active_*``: every such job; ``local_*``: only this host's, which
are what its caps bound — a scheduler lane's jobs run on a cluster and are counted in
``lanes`` instead), and adds the daemon's caps (None without a daemon), whether the
daemon answers, and the drain and throttle holds. It blocks on disk and the daemon socket
and raises :class:`~vq.errors.VqError` unscrubbed: call it through ``Backend``.
"""

from __future__ import annotations

from typing import TypedDict

from vq.domain.spec import utcnow
from vq.domain.states import ACTIVE, JobState
from vq.gateway import Gateway
from vq.paths import StatePaths
from vq.protocol import answers as rpc
from vq.protocol.answers import CapsJSON, DrainAnswer, ListQuery, ListRow
from vq.protocol.report_answers import LaneUse
from vq.services.control import read_drain, read_throttle
from vq.services.reports import state_counts
from vq.services.rows import is_local, lane_use

__all__ = ["QueueSummary", "queue_summary"]


class DaemonFacts(TypedDict):
    """Whether the daemon answers, and who it is."""

    running: bool
    pid: int | None
    version: str | None
    uptime_seconds: float | None


class ThrottleHold(TypedDict):
    """A throttle in force, as the cockpit shows it."""

    max_jobs: int | None
    max_cpus: int | None
    expires_at: str | None


class QueueSummary(TypedDict):
    """``GET /api/v1/queue``: the cockpit's counts, reservations, caps and holds."""

    total: int
    active: int
    pending: int
    counts: dict[str, int]
    active_cpus: int
    declared_mem_mb: int
    undeclared_mem_jobs: int
    quarantined: int
    local_active: int
    local_active_cpus: int
    local_declared_mem_mb: int
    lanes: LaneUse
    caps: CapsJSON | None
    daemon: DaemonFacts
    drain: DrainAnswer
    throttle: ThrottleHold | None


_ACTIVE_NAMES = frozenset(state.value for state in ACTIVE)


def queue_summary(
    gateway: Gateway, paths: StatePaths, max_age: float | None = None
) -> QueueSummary:
    """The cockpit summary (the JSON of ``GET /api/v1/queue``).

    ``max_age``: the daemon may skip re-checking the spec files for other writers'
    changes when it did so at most that many seconds ago (its ``list`` parameter).
    """
    ping = gateway.ask(rpc.PING)
    # Only the RUNNING/SUSPENDED rows: every other state is counted, never listed.
    params: ListQuery = {"states": sorted(_ACTIVE_NAMES), "offset": 0}
    if max_age is not None:
        params["max_age"] = max_age
    listing = gateway.list_rows(params)
    active: list[ListRow] = listing["jobs"]
    local = [row for row in active if is_local(row)]
    counts = {**state_counts(()), **listing["counts"]}
    caps = ping.get("caps") if ping is not None else None
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
        "local_active": len(local),
        "local_active_cpus": sum(int(r["cpus"] or 0) for r in local),
        "local_declared_mem_mb": sum(int(r["mem_mb"] or 0) for r in local),
        "lanes": lane_use(active),
        "caps": caps,
        "daemon": {
            "running": ping is not None,
            "pid": ping.get("pid") if ping is not None else None,
            "version": ping.get("version") if ping is not None else None,
            "uptime_seconds": ping.get("uptime_seconds") if ping is not None else None,
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
