"""Scheduler lanes (Slurm, Torque over SSH): engines beside the local one (the daemon
loop ticks them; :class:`~vq.executors.base.AdoptingEngine`).

:func:`lane_factory` builds one :class:`~.lane.SchedulerLane` from a lane's settings;
:class:`~.lane_set.LaneSet` holds one per ``[hosts.NAME]`` with ``scheduler_dialect``
whose ``scheduler_driver`` is this daemon, rebuilt on a reload. See docs/scheduler.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from vq.config.hosts import LaneSettings
from vq.domain.dependencies import Lookup
from vq.domain.spec import JobSpec
from vq.packing.profiles import PackingProfile
from vq.transport.ssh import SshRunner

from .lane import SchedulerLane
from .lane_set import LaneChanges, LaneSet, LaneSnapshot, driven_lanes
from .loop_guard import LoopGuard, WrongThread
from .ports import LaneContext, LaneLifecycle, PackRemoteFor

__all__ = [
    "LaneChanges",
    "LaneContext",
    "LaneSet",
    "LaneSnapshot",
    "LoopGuard",
    "PackRemoteFor",
    "SchedulerLane",
    "WrongThread",
    "driven_lanes",
    "lane_factory",
]


def lane_factory(
    ctx: LaneContext,
    lifecycle: LaneLifecycle,
    *,
    pending: Callable[[str], list[JobSpec]],
    call_soon: Callable[[Callable[[], None]], None],
    dependency_state: Lookup,
    hold: Callable[[], bool] = lambda: False,
    packing: Callable[[], Mapping[str, PackingProfile]] | None = None,
    pack_remote: PackRemoteFor | None = None,
    guard: LoopGuard | None = None,
) -> Callable[[LaneSettings], SchedulerLane]:
    """A builder of lanes on this daemon's parts, each with its own SSH runner;
    ``packing`` (the packing profiles as configured now: a reload changes them) and
    ``pack_remote`` let a Slurm lane run packed arrays (``vq submit LANE --array …
    --pack P``); ``guard`` is the loop's thread, shared with the :class:`LaneSet`."""

    def make(lane: LaneSettings) -> SchedulerLane:
        runner = SshRunner(
            lane.ssh, ssh_options=lane.ssh_options, host_key_policy=lane.host_key_policy
        )
        return SchedulerLane(
            lane,
            ctx,
            lifecycle,
            runner,
            pending=pending,
            call_soon=call_soon,
            dependency_state=dependency_state,
            hold=hold,
            packing=packing,
            pack_remote=pack_remote if lane.dialect == "slurm" else None,
            guard=guard,
        )

    return make
