"""``[submit] export`` read cheaply for ``vq submit``'s fast path (no pydantic, no Click).

The full configuration is validated by :func:`vq.config.load_settings` (the daemon and
``vq config check`` refuse a bad ``submit.export``); here only that one key is needed, so
each layer is read as bytes and parsed with ``tomllib`` only when it mentions ``submit``.
"""

from __future__ import annotations

import os

from vq import _roots
from vq.errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["SITE_CONFIG", "configured_export"]

SITE_CONFIG = "/etc/vq/config.toml"


def _layer_export(path: str) -> str | None:
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError:
        return None  # missing or unreadable: the daemon reports unreadable layers
    if b"submit" not in raw:
        return None
    import tomllib

    try:
        data = tomllib.loads(raw.decode("utf-8", "replace"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}", hint="fix the TOML syntax") from None
    section = data.get("submit")
    value = section.get("export") if isinstance(section, dict) else None
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(
            f"{path}: submit.export: must be a string",
            hint='export = "ALL", "NONE" or "NAME,NAME=value"; see docs/config.md',
        )
    from vq.domain.environment import BadEnvironment, parse_export

    try:
        parse_export(value)
    except BadEnvironment as exc:
        raise ConfigError(
            f"{path}: submit.export: {exc}",
            hint='export = "ALL", "NONE" or "NAME,NAME=value"; see docs/config.md',
        ) from None
    return value


def configured_export(environ: Mapping[str, str], *, site_config: str = SITE_CONFIG) -> str | None:
    """The effective ``[submit] export`` (user layer over site layer), or None if unset."""
    user = os.path.join(_roots.config_root(environ), "config.toml")
    found = None
    for path in (site_config, user):
        value = _layer_export(path)
        if value is not None:
            found = value
    return found
