"""What a daemon advertises about its capacity (§4.3, §5.1).

``ping`` answers ``caps`` — the daemon's *base* caps, which the configured-cap
classification (``pending_over_capacity``, overages, ``over_capacity_pending_jobs``,
submit ``capacity_warnings``) compares with — and, separately, ``effective_caps``: the
dispatch budget after a temporary throttle. A throttle, a drain, live usage or a quota
never turns a job into an over-capacity one; they are ordinary blockers.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from vq.domain.admission import Caps
from vq.services.context import ServiceContext

__all__ = ["advertised_caps"]


def advertised_caps(ctx: ServiceContext) -> dict[str, Any]:
    """``{"caps": base, "effective_caps": effective}`` for the ``ping`` answer."""
    base: Caps = ctx.base_caps if ctx.base_caps is not None else ctx.caps
    return {"caps": asdict(base), "effective_caps": asdict(ctx.caps)}
