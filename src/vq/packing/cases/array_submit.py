"""``vq submit LANE --array … --pack NAME``: the check against the configuration, and the
fields a packed element's spec carries (rules in :mod:`vq.packing.lane_submit`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vq.packing.lane_submit import LaneFacts, PackRequest, check_pack_submission

if TYPE_CHECKING:
    from vq.config.settings import Settings
    from vq.domain.spec import SpecFields
    from vq.packing.profiles import PackingProfile
    from vq.protocol.messages import SubmitParams
    from vq.services.context import ServiceContext

__all__ = ["pack_configuration", "packed_fields"]


def pack_configuration(
    settings: Settings,
) -> tuple[dict[str, PackingProfile], dict[str, LaneFacts]]:
    """The packing profiles and the scheduler lanes of ``settings``, for the context."""
    from vq.config.hosts import lanes_of
    from vq.config.settings import packing_profiles

    lanes = {
        name: LaneFacts(lane.dialect, lane.accounting)
        for name, lane in lanes_of(settings.hosts).items()
    }
    return packing_profiles(settings), lanes


def packed_fields(ctx: ServiceContext, params: SubmitParams) -> SpecFields:
    """The spec fields of a packed array's elements (none without ``--pack``);
    :class:`~vq.errors.InvalidInput` for a submission that cannot be packed."""
    if params.scheduler_pack is None:
        return {}
    packed = check_pack_submission(
        PackRequest(
            profile=params.scheduler_pack,
            lane=params.scheduler_target,
            command=tuple(params.command),
            array=params.array is not None or params.array_values is not None,
            chain=params.chain is not None,
            rerun_until=params.rerun_until_file_exists is not None,
            cpus=params.cpus if "cpus" in params.model_fields_set else None,
            mem_mb=params.mem_mb,
            wall_time_seconds=params.wall_time_seconds,
        ),
        ctx.packing,
        ctx.pack_lanes,
    )
    return {
        "scheduler_pack": params.scheduler_pack,
        "cpus": packed.cpus,
        "mem_mb": packed.mem_mb,
        "wall_time_seconds": packed.wall_time_seconds,
    }
