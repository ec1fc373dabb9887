"""``[submit] export`` read cheaply for ``vq submit``'s fast path (no pydantic, no Click),
and the environment options of a remote submit (:func:`remote_environment_options`).

The full configuration is validated by :func:`vq.config.settings.load_settings` (the daemon and
``vq config check`` refuse a bad ``submit.export``); here only that one key is needed, so
each layer is read as bytes and parsed with ``tomllib`` only when it mentions ``submit``.
"""

from __future__ import annotations

import os

from vq.config import roots
from vq.errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["SITE_CONFIG", "configured_export", "remote_environment_options"]

SITE_CONFIG = "/etc/vq/config.toml"


def _read_layer(path: str) -> bytes | None:
    """The bytes of one config layer; None when it is missing or this user may not read
    it (the daemon reports unreadable layers). A FIFO, directory or oversized file
    planted there is a ConfigError at once (:mod:`vq.config.raw`: never blocks)."""
    from vq.config.raw import read_config_bytes

    try:
        return read_config_bytes(path)
    except PermissionError:
        return None
    except OSError as exc:
        raise ConfigError(
            f"cannot read {path}: {exc.strerror}",
            hint="the configuration must be a readable regular file of TOML",
        ) from None


def _layer_export(path: str) -> str | None:
    raw = _read_layer(path)
    if raw is None or b"submit" not in raw:
        return None
    from vq.config.raw import parse_toml

    data, _ = parse_toml(path, raw)
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
    user = os.path.join(roots.config_root(environ), "config.toml")
    found = None
    for path in (site_config, user):
        value = _layer_export(path)
        if value is not None:
            found = value
    return found


def remote_environment_options(options: list[str], environ: Mapping[str, str]) -> list[str]:
    """``vq submit HOST`` options with the environment made explicit for the remote side.

    A remote submit defaults to ``--export NONE`` (:func:`vq.domain.environment.default_export`
    with ``remote=True``): the remote job gets the remote daemon's environment plus only
    what ``--export NAME[,NAME=value]`` and ``--env`` name, with ``NAME`` read from *this*
    shell. The result replaces those options by ``--export NONE`` and one
    ``--env NAME=value`` per variable, so the remote ``vq submit`` (which runs in an SSH
    session, not in this shell) captures nothing of its own.
    """
    from vq.domain.environment import BadEnvironment, capture
    from vq.errors import UsageError

    kept: list[str] = []
    export: str | None = None
    assignments: list[str] = []
    words = iter(options)
    for word in words:
        flag, has_value, inline = word.partition("=")
        if flag in ("--export", "--env"):
            value = inline if has_value else next(words, "")
            if flag == "--export":
                export = value
            else:
                assignments.append(value)
            continue
        kept.append(word)
    try:
        captured = capture(environ, export, assignments, remote=True)
    except BadEnvironment as exc:
        raise UsageError(
            str(exc), hint="--export ALL|NONE|NAME[,NAME=value…] and --env NAME=value"
        ) from None
    if captured.base != "daemon":
        raise UsageError(
            "--export ALL is not supported with a remote HOST",
            hint="name the variables: --export NAME[,NAME…] or --env NAME=value",
        )
    forwarded = [f"--env={name}={value}" for name, value in sorted(captured.variables.items())]
    return [*kept, "--export", "NONE", *forwarded]
