"""Which addresses the console may bind (§7.1): loopback by default, others on request.

Pure and import-light (no FastAPI), so the CLI and ``python -m vq.web`` share it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from vq.errors import UsageError

__all__ = ["check_bind", "is_loopback"]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(
    host: str, port: int, allow_remote: bool, allowed_hosts: Sequence[str] = ()
) -> str | None:
    """Refuse a non-loopback ``host`` unless ``allow_remote`` and at least one allowed host
    name (the console answers only to those and loopback names); then return a warning.

    Returns None for a loopback bind. Raises :class:`~vq.errors.UsageError` (exit 2).
    """
    if is_loopback(host):
        return None
    if not allow_remote:
        raise UsageError(
            f"refusing to bind the console to non-loopback address {host}",
            hint="pass --allow-remote to accept that risk, or use an SSH tunnel to 127.0.0.1",
        )
    if not allowed_hosts:
        raise UsageError(
            "--allow-remote needs the host names clients will use",
            hint="name them with --allowed-host NAME (repeatable) or [web] allowed_hosts "
            "in config.toml; requests for any other Host are refused (DNS rebinding)",
        )
    return (
        f"warning: serving the vq console on {host}:{port}, reachable from the network; "
        "reads are open unless console accounts exist (`vq web user add`), and TLS and "
        "access control are yours to add"
    )
