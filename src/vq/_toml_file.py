"""Reading one TOML configuration file: the one rule for every reader (stdlib only).

:func:`read_toml` is what :mod:`vq.config` parses each layer with, and what the fast,
pydantic-free readers (:mod:`vq._hostnames`) use too, so a hostile config file is the
same clear :class:`~vq.errors.ConfigError` wherever it is met: a FIFO, device or
directory is refused without blocking the reader, a file over :data:`MAX_CONFIG_BYTES`
is refused, a byte that is not UTF-8 is named with its line, and TOML errors name the
file. A user's config may be a symlink (dotfile managers), so the final link is followed.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from vq._fs import read_regular
from vq.errors import ConfigError

__all__ = ["MAX_CONFIG_BYTES", "read_toml"]

#: A configuration file larger than this is refused (it is a few kilobytes).
MAX_CONFIG_BYTES = 1024 * 1024


def read_toml(path: Path) -> tuple[dict[str, Any], str]:
    """The parsed TOML of ``path`` and its text; ``({}, "")`` when it does not exist.

    Any other failure is a :class:`ConfigError` naming the file (and the line when
    there is one).
    """
    try:
        data = read_regular(path, MAX_CONFIG_BYTES, follow=True)
    except FileNotFoundError:
        return {}, ""
    except OSError as exc:
        raise ConfigError(
            f"cannot read {path}: {exc.strerror}",
            hint="the configuration must be a readable regular file of TOML",
        ) from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"{path}:{line}: byte 0x{data[exc.start]:02x} is not UTF-8",
            hint="save the file as UTF-8; dispatch is held until it is fixed",
        ) from None
    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"{path}: {exc}", hint="fix the TOML syntax; `vq daemon run` refuses to start"
        ) from exc
