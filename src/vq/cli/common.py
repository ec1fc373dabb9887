"""Helpers shared by CLI commands: the client, the no-daemon fallback, JSON output.

Pattern: when a daemon answers, a command asks it (fast, consistent with its index);
when none does, the command runs the same service against the disk itself. Heavy modules
(pydantic, services) are imported only on that fallback path.
"""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from vq.cli.output import echo_json, warn
from vq.client import Client
from vq.domain.durations import parse_duration
from vq.errors import DaemonNotRunning
from vq.paths import StatePaths

if TYPE_CHECKING:
    from vq.services.context import ServiceContext

__all__ = ["call_daemon", "client", "echo_json", "local_context", "paths", "since_moment", "warn"]


def paths() -> StatePaths:
    return StatePaths.from_env()


def client(timeout: float = 60.0) -> Client:
    return Client(str(paths().daemon_sock), timeout=timeout)


def call_daemon(method: str, params: dict[str, Any] | None = None) -> Any | None:
    """The daemon's answer, or None when no daemon is answering (use the fallback)."""
    if not paths().daemon_sock.exists():
        return None
    try:
        return client().call(method, params)
    except DaemonNotRunning:
        return None


def local_context() -> ServiceContext:
    """A service context over the disk with the configured caps (no daemon needed)."""
    from vq.config import load_settings
    from vq.services.context import ServiceContext

    settings = load_settings()
    return ServiceContext(
        paths(), settings.daemon.caps(), profiles=settings.profile, programs=settings.programs
    )


def stdout_is_tty() -> bool:
    return sys.stdout.isatty() and os.environ.get("TERM") != "dumb"


def since_moment(text: str | None) -> datetime | None:
    """A ``--since`` value: an ISO time (naive = local time) or a duration ago (``2h``)."""
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        moment = datetime.now(UTC) - timedelta(seconds=parse_duration(text))
    if moment.tzinfo is None:
        moment = moment.astimezone()
    return moment.astimezone(UTC)
