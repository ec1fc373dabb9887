"""The authorities a fleet-wide job search reads (§2.2), for the CLI's discovery.

:func:`local_listing` is this queue's durable listing (``vq list --json``'s answer, from
the daemon or the disk), as :func:`vq.remote.discovery.discover` reads every host's;
:func:`lane_drivers` maps each configured scheduler lane to its driver's authority. A
leaf of the CLI: it imports no other command module, so the id parameter type
(:mod:`vq.cli.job_ids`) and the remote verbs may both use it.
"""

from __future__ import annotations

from vq.protocol.answers import ListAnswer

__all__ = ["lane_drivers", "local_listing"]


def local_listing() -> ListAnswer:
    """This queue's listing, every state (archived specs included)."""
    from vq.cli.common import gateway

    return gateway().list_rows(
        {"states": [], "tags": [], "name": None, "since": None, "group": None}
    )


def lane_drivers() -> dict[str, str]:
    """Each configured scheduler lane → its driver's authority (``localhost`` here)."""
    from vq.config.host_names import configured_lanes, is_local_name
    from vq.remote.discovery import LOCAL

    return {
        lane: LOCAL if is_local_name(driver) else driver
        for lane, driver in configured_lanes().items()
    }
