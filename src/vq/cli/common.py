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

import click

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
    "owner_option",
    "paths",
    "since_moment",
    "warn",
]


def paths() -> StatePaths:
    """This CLI's layout (:func:`vq.paths.client_layout`): in multi-user mode the caller's
    own tree (root: the whole system root), else the single-user state root."""
    from vq.config.multi_user_root import UnreadablePolicy

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


def gateway(uid: int | None = None) -> Gateway:
    """The shared daemon-or-disk access (:mod:`vq.gateway`) to this shell's state root.

    ``uid`` (``--uid``, multi-user mode only): act on that owner's job. A user's CLI
    then works on ``users/<uid>`` behind the ownership helper (another owner's job is
    refused before anything of it is read; the admin group reaches it through the
    daemon); root's CLI selects that owner's copy of the id."""
    layout = paths()
    if uid is None:
        return Gateway(layout)
    from vq.paths import MultiUserLayout, StateLayout

    if isinstance(layout, MultiUserLayout):
        return Gateway(layout, owner=uid)
    if layout.owner_dir is None:
        from vq.errors import UsageError

        raise UsageError(
            "--uid selects an owner's job in multi-user mode only",
            hint="drop --uid: this queue has one owner",
        )
    return Gateway(StateLayout(layout.root, layout.archive_override).for_owner(uid), owner=uid)


#: ``--uid UID`` of the per-job verbs (multi-user mode): see :func:`gateway`.
owner_option = click.option(
    "--uid",
    "uid",
    type=click.IntRange(0, 2**31 - 1),
    help="Multi-user mode: the job of this owner (uid).",
)


def daemon_answers() -> bool:
    """Whether a daemon answers on this state root's socket right now (a quick ping)."""
    from vq.protocol.answers import PING

    return gateway().ask(PING) is not None


def stdout_is_tty() -> bool:
    return sys.stdout.isatty() and os.environ.get("TERM") != "dumb"
