"""What a daemon advertises about its capacity (§4.3, §5.1).

``ping`` answers ``caps`` — the daemon's *base* caps, which the configured-cap
classification (``pending_over_capacity``, overages, ``over_capacity_pending_jobs``,
submit ``capacity_warnings``) compares with — and, separately, ``effective_caps``: the
dispatch budget after a temporary throttle. A throttle, a drain, live usage or a quota
never turns a job into an over-capacity one; they are ordinary blockers.
"""

from __future__ import annotations

from typing import TypedDict

from vq.domain.admission import Caps
from vq.protocol.answers import CapsJSON
from vq.services.context import ServiceContext
from vq.services.control import caps_json

__all__ = ["advertised_caps"]


class AdvertisedCaps(TypedDict):
    """The caps a ``ping`` answer advertises: the base caps and the effective ones."""

    caps: CapsJSON
    effective_caps: CapsJSON


def advertised_caps(ctx: ServiceContext) -> AdvertisedCaps:
    """``{"caps": base, "effective_caps": effective}`` for the ``ping`` answer."""
    base: Caps = ctx.base_caps if ctx.base_caps is not None else ctx.caps
    return {"caps": caps_json(base), "effective_caps": caps_json(ctx.caps)}
