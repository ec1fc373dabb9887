"""The configured hosts as one object: name → :class:`~vq.remote.host.RemoteHost`.

Everything that acts on a host goes through :func:`load_fleet`, which validates the
configuration (:func:`vq.config.host_names.configured_names` is the cheap, unvalidated check).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from vq.config.host_names import LOCAL_NAMES, is_local_name
from vq.config.hosts import HostSettings
from vq.domain.text import escape_controls
from vq.errors import NotFound
from vq.paths import resolve_state_root
from vq.remote.host import RemoteHost

__all__ = ["Fleet", "load_fleet"]


@dataclass
class Fleet:
    """Every configured host plus ``default_host`` (None: this queue)."""

    hosts: dict[str, HostSettings]
    default_host: str | None
    state_root: Path
    _made: dict[str, RemoteHost] = field(default_factory=dict)

    def host(self, name: str) -> RemoteHost:
        """The configured remote host ``name``; NotFound for any other name, this queue's
        own names (``localhost``, ``local``) included: they name no remote host."""
        if name not in self.hosts:
            remote = ", ".join(sorted(self.hosts)) or "none"
            if is_local_name(name):
                raise NotFound(
                    f"{name!r} is this queue, not a configured remote host",
                    hint=f"configured remote hosts: {remote}; this queue's jobs are "
                    "reached without a host name",
                )
            raise NotFound(
                f"no host named {escape_controls(repr(name))} is configured",
                hint=f"configured remote hosts: {remote} (localhost is this queue)",
            )
        if name not in self._made:
            self._made[name] = RemoteHost(name, self.hosts[name], self.state_root)
        return self._made[name]

    def names(self) -> list[str]:
        return sorted(self.hosts)

    def live_names(self) -> list[str]:
        """Configured hosts not marked down."""
        return [name for name in self.names() if not self.hosts[name].down]

    @property
    def remote_default(self) -> str | None:
        """The default host when it is a remote one, else None (this queue)."""
        if self.default_host is None or is_local_name(self.default_host):
            return None
        return self.default_host

    @property
    def default_is_local(self) -> bool:
        return self.default_host is None or self.default_host in LOCAL_NAMES


def load_fleet(env: Mapping[str, str] | None = None) -> Fleet:
    """The validated configuration's hosts (a ConfigError names a bad key)."""
    from vq.config.settings import load_settings

    env = os.environ if env is None else env
    settings = load_settings(env)
    from vq.config.hosts import daemon_hosts

    # Scheduler lanes run no vq: they are reached by the driver daemon, never as a fleet.
    return Fleet(daemon_hosts(settings.hosts), settings.default_host, resolve_state_root(env))
