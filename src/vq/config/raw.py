"""The raw reader of configuration files: bytes and TOML by the one rule (stdlib only).

Every reader of a config file goes through here: :mod:`vq.config.settings` (the
validated settings) and the fast CLI paths that must not import more
(:mod:`vq.config.host_names`, :mod:`vq.config.multi_user_root`, :mod:`vq.cli.submit_env`).
Stdlib and ``vq.errors`` only: cheap to import (``tomllib`` is loaded on the first
parse), never pydantic.

:func:`read_config_bytes` opens the file without blocking (a FIFO planted as the config
never hangs a reader), refuses anything but a regular file, and a file larger than
:data:`MAX_CONFIG_BYTES`. A user's config may be a symlink (dotfile managers), so the
final link is followed. The same rule as :func:`vq._fs.read_regular`, without its imports.

:func:`read_toml` parses one layer, so a hostile config file is the same clear
:class:`~vq.errors.ConfigError` wherever it is met: what :func:`read_config_bytes`
refuses, a byte that is not UTF-8 (named with its line), TOML errors (naming the file).
"""

from __future__ import annotations

import errno
import os
import stat

from vq.errors import ConfigError

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the fast CLI paths never import typing
if TYPE_CHECKING:
    from typing import Any

__all__ = ["MAX_CONFIG_BYTES", "parse_toml", "read_config_bytes", "read_toml"]

#: A configuration file larger than this is refused (it is a few kilobytes).
MAX_CONFIG_BYTES = 1024 * 1024

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a directory"), (stat.S_ISSOCK, "a socket"))


def read_config_bytes(path: str | os.PathLike[str]) -> bytes | None:
    """The bytes of ``path``; None when it does not exist.

    Raises OSError otherwise, its ``strerror`` saying why: the open's own error
    (``Permission denied``…), ``is a FIFO, not a regular file`` (or a directory, a
    device…), or ``is larger than N bytes``.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "a device")
            raise OSError(errno.EINVAL, f"is {kind}, not a regular file", str(path))
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_CONFIG_BYTES:
                raise OSError(errno.EFBIG, f"is larger than {MAX_CONFIG_BYTES} bytes", str(path))
    finally:
        os.close(fd)
    return b"".join(chunks)


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
    import tomllib  # here, not at the top: the byte reader's fast paths never parse

    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"{path}: {exc}", hint="fix the TOML syntax; `vq daemon run` refuses to start"
        ) from None
