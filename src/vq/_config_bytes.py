"""The bytes of one configuration file, read by the one rule (``os`` and ``stat`` only).

Used by every reader of a config file — :mod:`vq._toml_file` (and so :mod:`vq.config`),
and the fast CLI paths that must not import more (:mod:`vq._hostnames`,
:mod:`vq.cli.submit_env`): the file is opened without blocking (a FIFO planted as the
config never hangs a reader), anything but a regular file is refused, and so is a file
larger than :data:`MAX_CONFIG_BYTES`. A user's config may be a symlink (dotfile
managers), so the final link is followed. The same rule as :func:`vq._fs.read_regular`,
without its imports.
"""

from __future__ import annotations

import errno
import os
import stat

__all__ = ["MAX_CONFIG_BYTES", "read_config_bytes"]

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
