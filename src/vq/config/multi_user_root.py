"""Whether this process's CLI is in system multi-user mode, and where (stdlib only).

The system policy decides (§7.1, §7.3): ``[multi_user] enabled = true`` in the system
config, ``$VQ_CONFIG_DIR/config.toml`` when ``VQ_CONFIG_DIR`` is set, else
``/etc/vq/config.toml``. Then the state root is ``VQ_MULTI_USER_ROOT`` or
``/var/lib/vq``; root sees every owner's tree, any other user only ``users/<euid>``.
A system config that exists but cannot be read or parsed fails closed
(:class:`UnreadablePolicy`), rather than silently becoming single-user mode.

Only the ``enabled`` flag is read here, cheaply; the daemon validates the whole policy.
"""

from __future__ import annotations

import os

from vq.config.raw import read_config_bytes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["UnreadablePolicy", "multi_user_root"]

SITE_CONFIG = "/etc/vq/config.toml"
DEFAULT_ROOT = "/var/lib/vq"


class UnreadablePolicy(Exception):
    """The system config exists but cannot be read or parsed: ``str(self)`` says why."""


def system_config(env: Mapping[str, str]) -> str:
    configured = env.get("VQ_CONFIG_DIR")
    if configured:
        return os.path.join(os.path.abspath(os.path.expanduser(configured)), "config.toml")
    return SITE_CONFIG


def multi_user_root(env: Mapping[str, str]) -> str | None:
    """The system root when the system policy enables multi-user mode, else None."""
    path = system_config(env)
    try:
        data = read_config_bytes(path)  # never blocks on a planted FIFO
    except OSError as exc:
        raise UnreadablePolicy(f"{path}: {exc.strerror}") from None
    if data is None:
        return None
    if b"multi_user" not in data:  # the common case costs no TOML parser
        return None
    import tomllib

    try:
        section = tomllib.loads(data.decode()).get("multi_user")
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UnreadablePolicy(f"{path}: {exc}") from None
    if not isinstance(section, dict) or section.get("enabled") is not True:
        return None
    configured = env.get("VQ_MULTI_USER_ROOT")
    return os.path.abspath(configured) if configured else DEFAULT_ROOT
