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
from vq.gateway import Gateway, since_moment
from vq.paths import StatePaths

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
    return StatePaths.from_env()


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
