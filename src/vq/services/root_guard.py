"""Whether a daemon may start under this effective uid (§7.1), decided before anything else.

A daemon with euid 0 serves every user, so it starts only in multi-user mode: the whole
configuration validates and the system policy says ``[multi_user] enabled = true``. The one
exception, for containers and CI where everything runs as root, is ``--allow-root`` (or
``VQ_ALLOW_ROOT=1``): a single-user daemon as root, with a warning in the log and in
``vq doctor``. Callers run :func:`start_mode` before logging, the pidfile, the web sidecar
or the daemon object exist, so a refused start leaves nothing behind.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from vq.config.multi_user import system_config_path
from vq.config.settings import Settings
from vq.errors import ConfigError

__all__ = ["ROOT_SINGLE_USER_WARNING", "StartMode", "start_mode"]

ROOT_SINGLE_USER_WARNING = (
    "running a single-user daemon as root (--allow-root / VQ_ALLOW_ROOT=1): "
    "every job runs as root; use [multi_user] for a shared machine"
)
_DOCS = "see docs/multi-user.md"


@dataclass(frozen=True)
class StartMode:
    """How the daemon runs: ``user`` (not root), ``root_single_user`` or ``multi_user``."""

    kind: Literal["user", "root_single_user", "multi_user"]
    settings: Settings

    @property
    def warning(self) -> str | None:
        return ROOT_SINGLE_USER_WARNING if self.kind == "root_single_user" else None


def start_mode(
    euid: int,
    allow_root: bool,
    load: Callable[[], Settings],
    env: Mapping[str, str] | None = None,
) -> StartMode:
    """The start mode, or :class:`ConfigError` (exit 9) when this daemon must not start.

    ``load`` reads the whole configuration; as root any error in it refuses the start.
    ``enabled = true`` wins over ``allow_root`` (system policy beats a flag).
    """
    env = os.environ if env is None else env
    if euid != 0:
        return StartMode("user", load())
    system = system_config_path(env)
    try:
        settings = load()
    except ConfigError as exc:
        if allow_root:  # told it is a single-user daemon: the error an ordinary user gets
            raise
        raise ConfigError(
            f"a daemon run as root needs a valid configuration: {exc.message}",
            hint=exc.hint or _DOCS,
        ) from exc
    if settings.multi_user.enabled:
        from vq.config.multi_user import multi_user_root
        from vq.services.system_tree import check_system_tree

        if settings.multi_user.privilege_drop != "collector":
            raise ConfigError(
                f"{system}: multi_user.privilege_drop = "
                f"{settings.multi_user.privilege_drop!r}: this build has only the collector "
                "drop, so the daemon refuses to start rather than run jobs as root",
                hint=f'set privilege_drop = "collector"; {_DOCS}',
            )
        check_system_tree(multi_user_root(env), settings.multi_user)  # refusals name the path
        return StartMode("multi_user", settings)
    if allow_root:
        return StartMode("root_single_user", settings)
    raise ConfigError(
        f"a daemon run as root serves every user and needs [multi_user] enabled = true in {system}",
        hint="enable multi-user mode (docs/multi-user.md), run the daemon as your own user, "
        "or pass --allow-root (VQ_ALLOW_ROOT=1) for a single-user daemon as root",
    )
