"""The hosts a campaign's nodes name, each resolved to one :class:`~vq.campaign.hosts.CampaignHost`.

``localhost`` (or no host, or another alias of this machine) and the scheduler lanes this
queue drives are :class:`~vq.campaign.hosts.LocalHost`; a configured ``[hosts.NAME]``
daemon host is :class:`~vq.campaign.remote.RemoteQueue`. Any other name is a problem
reported before anything is submitted (:meth:`HostDirectory.problem`).
"""

from __future__ import annotations

from collections.abc import Mapping

from vq.campaign.hosts import CampaignHost, LocalHost
from vq.campaign.remote import RemoteQueue
from vq.config.host_names import configured_lanes, is_local_name
from vq.errors import InvalidInput
from vq.gateway import Gateway
from vq.remote.fleet import Fleet, load_fleet
from vq.services.runtime_generations import generation_problem, root_problem

__all__ = ["HostDirectory"]


class HostDirectory:
    """The hosts a campaign's nodes name, resolved against this machine's configuration
    (read once, on first need) and made once each, so an SSH connection is reused."""

    def __init__(self, gateway: Gateway, env: Mapping[str, str] | None = None) -> None:
        self.gateway = gateway
        self.env = env
        self._lanes: dict[str, str] | None = None
        self._fleet: Fleet | None = None
        self._made: dict[str, CampaignHost] = {}

    def _lane_drivers(self) -> dict[str, str]:
        if self._lanes is None:
            self._lanes = configured_lanes(self.env)
        return self._lanes

    def _daemon_fleet(self) -> Fleet:
        if self._fleet is None:
            self._fleet = load_fleet(self.env)
        return self._fleet

    def problem(self, name: str | None) -> str | None:
        """Why this controller cannot run a node on ``name`` (None when it can)."""
        if name is None or is_local_name(name):
            return None
        lanes = self._lane_drivers()
        if name in lanes:
            if is_local_name(lanes[name]):
                return None
            return (
                f"scheduler lane {name!r} is driven by host {lanes[name]!r}; a campaign "
                "submits only to lanes this queue drives"
            )
        if name in self._daemon_fleet().hosts:
            return None
        known = ", ".join(["localhost", *sorted(lanes), *self._daemon_fleet().names()])
        return f"host {name!r} is neither this machine nor a configured host (known: {known})"

    def runtime_problem(self, name: str | None, root: str, digest: str) -> str | None:
        """Why a node on ``name`` cannot be bound to generation ``digest`` of ``root``, as
        far as this machine can tell (None otherwise): here the generation must verify
        now; a remote daemon host verifies it at submit (a refusal leaves the attempt
        submitting); on a scheduler lane only the root's form is checked, because only the
        job's compute node sees the deployment (its script exits 126 when it does not
        verify)."""
        problem = root_problem(root)
        if problem is not None:
            return problem
        if name is None or is_local_name(name):
            return generation_problem(root, digest)
        return None  # a daemon host checks at submit; a lane's job script on the node

    def __call__(self, name: str | None) -> CampaignHost:
        """The host a node names (None = this machine)."""
        key = "localhost" if name is None or is_local_name(name) else name
        if key in self._made:
            return self._made[key]
        problem = self.problem(name)
        if problem is not None:
            raise InvalidInput(problem, hint="name localhost, a scheduler lane or a [hosts.NAME]")
        host: CampaignHost
        if key == "localhost":
            host = LocalHost(self.gateway)
        elif key in self._lane_drivers():
            host = LocalHost(self.gateway, lane=key)
        else:
            host = RemoteQueue(self._daemon_fleet().host(key))
        self._made[key] = host
        return host

    def close(self) -> None:
        for host in self._made.values():
            host.close()
