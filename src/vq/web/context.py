"""What one web process serves: the state root, the config root and its limits.

The app keeps one :class:`WebConfig` on ``app.state.vq``; route handlers get it through
:func:`vq.web.deps.web_config`. Nothing here does I/O at import time.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from vq.config.multi_user_root import UnreadablePolicy
from vq.config.settings import load_settings
from vq.errors import ConfigError
from vq.paths import StatePaths, client_layout, resolve_config_root
from vq.web.waits import PER_PEER, PER_TOKEN, TOTAL

__all__ = ["WebConfig"]


@dataclass(frozen=True)
class WebConfig:
    """Immutable settings of one web process.

    ``state`` and ``config_root`` are resolved exactly as the CLI resolves them
    (``VQ_STATE_DIR`` / ``VQ_CONFIG_DIR`` and their XDG fallbacks; in multi-user mode
    :func:`vq.paths.client_layout`: root's console serves the whole system root), so a
    console started in a shell sees the queue that shell's ``vq`` sees.
    """

    state: StatePaths
    config_root: Path
    #: "standalone" (``vq web serve``) or "sidecar" (child of ``vq daemon run --web``).
    mode: str = "standalone"
    #: Host names beside the loopback ones that requests may carry (:mod:`vq.web.hosts`).
    allowed_hosts: tuple[str, ...] = ()
    #: Fleet mode (``vq web serve --fleet``, ``[web] fleet = true``): the ``/fleet`` pages
    #: and ``/api/v1/fleet`` over every configured host are mounted (:mod:`vq.web.fleet`).
    fleet: bool = False
    #: Caps on concurrent long-polls: per credential, per client address, in all
    #: (``[web] wait_max_*``; :mod:`vq.web.waits`).
    wait_caps: tuple[int, int, int] = (PER_TOKEN, PER_PEER, TOTAL)

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str] | None = None,
        *,
        mode: str = "standalone",
        allowed_hosts: tuple[str, ...] = (),
        fleet: bool = False,
    ) -> WebConfig:
        env = os.environ if env is None else env
        web = load_settings(env).web
        try:
            state = client_layout(env)
        except UnreadablePolicy as exc:
            raise ConfigError(
                f"the system multi-user policy cannot be read: {exc}",
                hint="an administrator fixes the system config (docs/multi-user.md)",
            ) from None
        return cls(
            state,
            resolve_config_root(env),
            mode=mode,
            allowed_hosts=allowed_hosts,
            fleet=fleet,
            wait_caps=(web.wait_max_per_credential, web.wait_max_per_peer, web.wait_max_total),
        )
