"""Helpers shared by CLI commands: the client, the no-daemon fallback, JSON output.

Pattern: when a daemon answers, a command asks it (fast, consistent with its index);
when none does, the command runs the same service against the disk itself. That rule
lives in :mod:`vq.gateway` (shared with the web console). Heavy modules (pydantic,
services) are imported only on that fallback path.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from vq.cli.output import echo_json, warn
from vq.client import Client
from vq.errors import ConfigError
from vq.gateway import Gateway, since_moment
from vq.paths import StatePaths, client_layout

if TYPE_CHECKING:
    pass

__all__ = [
    "client",
    "daemon_answers",
    "echo_json",
    "gateway",
    "paths",
    "since_moment",
    "warn",
]


def paths() -> StatePaths:
    """This CLI's layout (:func:`vq.paths.client_layout`): in multi-user mode the caller's
    own tree (root: the whole system root), else the single-user state root."""
    from vq._multi_root import UnreadablePolicy

    try:
        layout = client_layout()
    except UnreadablePolicy as exc:
        raise ConfigError(
            f"the system multi-user policy cannot be read: {exc}",
            hint="an administrator fixes the system config (docs/multi-user.md)",
        ) from None
    return layout


def client(timeout: float = 60.0) -> Client:
    return Client(str(paths().daemon_sock), timeout=timeout)


def gateway() -> Gateway:
    """The shared daemon-or-disk access (:mod:`vq.gateway`) to this shell's state root."""
    return Gateway(paths())


def daemon_answers() -> bool:
    """Whether a daemon answers on this state root's socket right now (a quick ping)."""
    return gateway().ask("ping") is not None


def stdout_is_tty() -> bool:
    return sys.stdout.isatty() and os.environ.get("TERM") != "dumb"
