"""Scheduler lanes (Slurm, Torque over SSH): the second executor behind the seam.

:func:`build_lanes` makes one :class:`~.lane.SchedulerLane` per ``[hosts.NAME]`` with
``scheduler_dialect`` whose ``scheduler_driver`` is this daemon. See docs/scheduler.md.
"""

from __future__ import annotations

from collections.abc import Callable

from vq.domain.dependencies import Lookup
from vq.domain.spec import JobSpec
from vq.hosts_config import HostSettings, is_local_name, lanes_of
from vq.transport.ssh import SshRunner

from .lane import SchedulerLane
from .ports import LaneContext, LaneLifecycle

__all__ = ["LaneContext", "SchedulerLane", "build_lanes"]


def build_lanes(
    hosts: dict[str, HostSettings],
    ctx: LaneContext,
    lifecycle: LaneLifecycle,
    *,
    pending: Callable[[], list[JobSpec]],
    call_soon: Callable[[Callable[[], None]], None],
    dependency_state: Lookup,
    hold: Callable[[], bool] = lambda: False,
) -> list[SchedulerLane]:
    """The lanes this daemon drives (``scheduler_driver = "localhost"``)."""
    lanes = []
    for lane in lanes_of(hosts).values():
        if not is_local_name(lane.driver):
            continue
        runner = SshRunner(
            lane.ssh, ssh_options=lane.ssh_options, host_key_policy=lane.host_key_policy
        )
        lanes.append(
            SchedulerLane(
                lane,
                ctx,
                lifecycle,
                runner,
                pending=pending,
                call_soon=call_soon,
                dependency_state=dependency_state,
                hold=hold,
            )
        )
    return lanes
