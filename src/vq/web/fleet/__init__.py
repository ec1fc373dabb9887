"""The fleet console: one web console and API over every configured host (§6.3).

Mounted only in fleet mode (:func:`mount`): ``/fleet`` pages (campaigns under
``/fleet/campaigns``), ``/fleet/actions`` form
posts and ``/api/v1/fleet``. Reads fan out over SSH through one shared, cached
:class:`~vq.web.fleet.source.FleetSource`; writes go through
:mod:`vq.web.fleet.control`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["mount"]


def mount(app: Any, config: Any) -> None:
    """Add the fleet routers and the shared source to ``app`` (no I/O here: the host
    configuration is read on the first fleet request)."""
    from vq.remote.fleet import load_fleet
    from vq.web.fleet import actions, api, campaigns, pages
    from vq.web.fleet.source import FleetSource

    def here() -> Any:  # this workstation's own queue, read in-process
        from vq.web.fleet.snapshots import Snapshots

        return Snapshots(config.state)

    app.state.fleet_source = FleetSource(load_fleet, local=here)
    app.include_router(api.router, prefix="/api/v1")
    app.include_router(pages.router)
    app.include_router(campaigns.router)
    app.include_router(actions.router)
