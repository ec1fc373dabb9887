"""Host names without pydantic: what names this queue, and which names are configured.

Stdlib only, so the CLI can decide whether a word on the command line names a host
without validating the configuration (:mod:`vq.config.hosts` does that).
"""

from __future__ import annotations

import os
import re
import socket

from vq.config import roots

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "HOST_NAME",
    "LOCAL_DEFAULT_HOST",
    "LOCAL_NAMES",
    "SITE_CONFIG",
    "configured_lanes",
    "configured_names",
    "effective_default_host",
    "is_local_name",
]

#: A configured host's name (also its health file's name).
HOST_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
#: Names that always mean this queue.
LOCAL_NAMES = frozenset({"localhost", "local"})
SITE_CONFIG = "/etc/vq/config.toml"
#: What a hostless verb targets when ``default_host`` is unset: this queue.
LOCAL_DEFAULT_HOST = "localhost"


def effective_default_host(default: str | None) -> str:
    """The host a hostless verb targets: ``default_host`` as configured, else
    :data:`LOCAL_DEFAULT_HOST`. ``vq hosts`` and ``vq config show`` both print this."""
    return default or LOCAL_DEFAULT_HOST


def is_local_name(name: str) -> bool:
    """Whether ``name`` is an alias of this queue (``localhost``, ``local``, this host)."""
    return name in LOCAL_NAMES or name == socket.gethostname().split(".")[0].lower()


def _hosts_tables(env: Mapping[str, str] | None) -> list[dict[str, object]]:
    env = os.environ if env is None else env
    tables: list[dict[str, object]] = []
    from vq.config.raw import read_toml
    from vq.errors import ConfigError

    for path in (SITE_CONFIG, os.path.join(roots.config_root(env), "config.toml")):
        try:
            hosts = read_toml(path)[0].get("hosts", {})
        except ConfigError as exc:
            if isinstance(exc.__cause__, PermissionError):
                continue  # another user's site file: it names no hosts for us
            raise
        if isinstance(hosts, dict):
            tables.append(hosts)
    return tables


def configured_lanes(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The scheduler lanes (``[hosts.NAME]`` with ``scheduler_dialect``) and their
    ``scheduler_driver`` (default ``localhost``), unvalidated and fast."""
    lanes: dict[str, str] = {}
    for hosts in _hosts_tables(env):
        for name, table in hosts.items():
            if isinstance(table, dict) and "scheduler_dialect" in table:
                lanes[str(name)] = str(table.get("scheduler_driver", "localhost"))
    return lanes


def configured_names(env: Mapping[str, str] | None = None) -> frozenset[str]:
    """The ``[hosts.NAME]`` names of the site and user files (unvalidated, fast).

    A file that is not a regular file, not UTF-8 or not TOML is a
    :class:`~vq.errors.ConfigError` (as it is for every other verb; a FIFO never blocks
    the reader); a missing one, or one this user may not read, has no hosts.
    """
    env = os.environ if env is None else env
    names: set[str] = set()
    for hosts in _hosts_tables(env):
        names.update(str(name) for name in hosts)
    return frozenset(names)
