"""The scheduler lanes one host drives, as its fleet snapshot reports them.

:func:`lane_summaries` is pure: it takes the lanes this host's daemon drives
(``scheduler_driver = "localhost"``), the host's unfinished jobs, each lane's health record
(``hosts/<lane>.json``, written by the lane's polls) and the blind-lane warnings of its
jobs, and answers one summary per lane, in name order::

    {"name", "kind": "slurm"|"torque", "tracked", "queued", "running",
     "status": "ok"|"slow"|"unreachable"|"invalid"|"unknown", "last_ok_at", "last_attempt_at",
     "last_error", "warnings": [{"job", "code", "message", "hint"}]}

``tracked`` counts the lane's unfinished jobs; ``queued`` those not yet running (PENDING
in vq, or waiting in the scheduler's queue); ``running`` the rest. :func:`driven_lanes_here`
reads the configuration (an unreadable one: no lanes, the snapshot still answers).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vq.config.hosts import LaneSettings, is_local_name, lanes_of
from vq.errors import VqError
from vq.hosts.health import HostHealth
from vq.protocol.answers import SchedulerWarning
from vq.web.fleet.shapes import LaneSummary, LaneWarning

__all__ = ["driven_lanes_here", "lane_summaries"]

#: Scheduler states of a submitted job still waiting in the scheduler's queue.
_WAITING = ("submitting", "queued", "held", "hold")


def driven_lanes_here() -> dict[str, LaneSettings]:
    """The configured lanes this host's daemon drives (none when the config is unreadable)."""
    from vq.config.settings import load_settings

    try:
        lanes = lanes_of(load_settings().hosts)
    except VqError:
        return {}
    return {name: lane for name, lane in lanes.items() if is_local_name(lane.driver)}


def lane_summaries(
    lanes: Mapping[str, LaneSettings],
    unfinished: Sequence[Mapping[str, Any]],
    health: Mapping[str, HostHealth],
    warnings: Mapping[str, SchedulerWarning],
) -> list[LaneSummary]:
    """One summary per lane (see the module docstring). ``unfinished``: the host's
    PENDING, RUNNING and SUSPENDED rows; ``warnings``: job id → its blind-lane warning."""
    out: list[LaneSummary] = []
    for name in sorted(lanes):
        rows = [row for row in unfinished if row.get("scheduler_target") == name]
        queued = [
            row
            for row in rows
            if row.get("state") == "PENDING" or row.get("scheduler_state") in _WAITING
        ]
        record = health.get(name) or HostHealth(name)
        out.append(
            {
                "name": name,
                "kind": lanes[name].dialect,
                "tracked": len(rows),
                "queued": len(queued),
                "running": len(rows) - len(queued),
                "status": record.status,
                "last_ok_at": record.last_ok_at,
                "last_attempt_at": record.last_attempt_at,
                "last_error": record.last_error,
                "warnings": [
                    LaneWarning(job=str(row.get("id")), **warnings[str(row.get("id"))])
                    for row in rows
                    if str(row.get("id")) in warnings
                ],
            }
        )
    return out
