"""Where the state and config roots are, as plain strings (stdlib ``os`` only).

The one place for the resolution rules; :mod:`vq.paths` wraps them in ``Path`` objects,
and the CLI's fast submit path uses them directly to avoid importing ``pathlib``.

State root: ``VQ_STATE_DIR`` → ``$XDG_DATA_HOME/vq`` → ``~/.local/share/vq``.
Config root: ``VQ_CONFIG_DIR`` → ``$XDG_CONFIG_HOME/vq`` → ``~/.config/vq``.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:  # collections.abc is not needed at run time on the fast path
    from collections.abc import Mapping

__all__ = ["config_root", "daemon_socket", "state_root"]


def _home(env: Mapping[str, str]) -> str:
    return env.get("HOME") or os.path.expanduser("~")


def _absolute(path: str) -> str:
    return os.path.abspath(os.path.expanduser(path))


def state_root(env: Mapping[str, str]) -> str:
    if env.get("VQ_STATE_DIR"):
        return _absolute(env["VQ_STATE_DIR"])
    if env.get("XDG_DATA_HOME"):
        return os.path.join(_absolute(env["XDG_DATA_HOME"]), "vq")
    return os.path.join(_home(env), ".local", "share", "vq")


def config_root(env: Mapping[str, str]) -> str:
    if env.get("VQ_CONFIG_DIR"):
        return _absolute(env["VQ_CONFIG_DIR"])
    if env.get("XDG_CONFIG_HOME"):
        return os.path.join(_absolute(env["XDG_CONFIG_HOME"]), "vq")
    return os.path.join(_home(env), ".config", "vq")


def daemon_socket(env: Mapping[str, str]) -> str:
    return os.path.join(state_root(env), "daemon.sock")
