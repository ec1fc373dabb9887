"""Reading one TOML configuration file: the one rule for every reader (stdlib only).

:func:`read_toml` is what :mod:`vq.config` parses each layer with, and what the fast,
pydantic-free readers (:mod:`vq._hostnames`) use too, so a hostile config file is the
same clear :class:`~vq.errors.ConfigError` wherever it is met: what
:func:`vq._config_bytes.read_config_bytes` refuses (a FIFO, device or directory, without
blocking; a file too large), a byte that is not UTF-8 (named with its line), TOML errors
(naming the file). Stdlib, ``vq.errors`` and ``vq._config_bytes`` only: cheap to import.
"""

from __future__ import annotations

import os
import tomllib
from typing import Any

from vq._config_bytes import read_config_bytes
from vq.errors import ConfigError

__all__ = ["parse_toml", "read_toml"]


def read_toml(path: str | os.PathLike[str]) -> tuple[dict[str, Any], str]:
    """The parsed TOML of ``path`` and its text; ``({}, "")`` when it does not exist.

    Any other failure is a :class:`ConfigError` naming the file (and the line when
    there is one).
    """
    try:
        data = read_config_bytes(path)
    except OSError as exc:
        raise ConfigError(
            f"cannot read {path}: {exc.strerror}",
            hint="the configuration must be a readable regular file of TOML",
        ) from exc
    if data is None:
        return {}, ""
    return parse_toml(path, data)


def parse_toml(path: str | os.PathLike[str], data: bytes) -> tuple[dict[str, Any], str]:
    """The parsed TOML of ``data`` (the bytes of ``path``) and its text.

    A byte that is not UTF-8 (named with its line) or a TOML error is a
    :class:`ConfigError` naming the file.
    """
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
        ) from None
