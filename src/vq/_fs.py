"""Durable file primitives: the only place vq writes state files.

Contracts:

* :func:`atomic_write_bytes` makes a write atomic against readers and durable against
  power loss: unique temp file in the *same* directory → write → fsync → ``os.replace`` →
  fsync of the directory. A reader sees the old bytes or the new bytes, never a torn file.
* :func:`spec_lock` is the per-spec advisory ``flock`` on the sidecar ``<spec>.lock``.
  Every read → mutate → write of a spec holds it across the read and the write. It never
  nests (no code holds two spec locks at once) and is never held across slow I/O
  (process launch, workspace copies, webhooks, archives).
* :func:`append_line` is best-effort: events are observability, not a journal, so an
  append failure is logged and swallowed.
* :func:`read_tail_lines` is the one bounded tail read (logs, samples, audit files).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

__all__ = [
    "append_line",
    "atomic_write_bytes",
    "atomic_write_json",
    "fsync_dir",
    "read_bytes_limited",
    "read_tail_lines",
    "spec_lock",
    "try_lock_file",
]


def fsync_dir(directory: Path) -> None:
    """fsync a directory so a rename or create inside it is durable. Best-effort."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(
    path: Path, data: bytes, *, mode: int = 0o644, durable: bool = True, sync_dir: bool = True
) -> None:
    """Replace ``path`` with ``data`` atomically (and durably unless ``durable=False``).

    The temp file lives in the target's directory so the rename never crosses a
    filesystem. On any failure the temp file is removed and the old file is untouched.
    ``sync_dir=False`` leaves the directory fsync to the caller, which must do it (once,
    :func:`fsync_dir`) before reporting the batch of writes as durable.
    """
    directory = path.parent
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.chmod(tmp_name, mode)
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    if durable and sync_dir:
        fsync_dir(directory)


def atomic_write_json(path: Path, payload: Any, *, durable: bool = True) -> None:
    """:func:`atomic_write_bytes` of ``payload`` as indented JSON with a trailing newline."""
    data = json.dumps(payload, indent=1, sort_keys=False).encode() + b"\n"
    atomic_write_bytes(path, data, durable=durable)


@contextlib.contextmanager
def spec_lock(spec_path: Path) -> Iterator[None]:
    """Hold the exclusive advisory lock of ``<spec_path>.lock`` for the ``with`` body.

    ``flock`` locks belong to the open file description, so two threads of one process
    that each enter this context also exclude each other.
    """
    lock_path = spec_path.with_name(spec_path.name + ".lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the description releases the flock


def try_lock_file(path: Path) -> int | None:
    """Take a non-blocking exclusive flock on ``path``; return the fd, or None if held.

    The caller owns the fd for as long as it wants the lock (the kernel drops it when
    the process dies, so a crashed holder never leaves a stale lock).
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return None
        raise
    return fd


def append_line(path: Path, line: str) -> bool:
    """Append one line (a newline is added) to ``path``. Best-effort: never raises.

    A single ``write`` of an ``O_APPEND`` descriptor keeps concurrent appenders from
    interleaving inside a line. Returns whether the append succeeded.
    """
    data = (line.rstrip("\n") + "\n").encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
    except OSError as exc:
        log.warning("could not append to %s: %s", path, exc)
        return False
    return True


def read_bytes_limited(path: Path, limit: int) -> bytes:
    """Read at most ``limit`` bytes of ``path`` (refusing to follow a final symlink)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        return os.read(fd, limit)
    finally:
        os.close(fd)


def read_tail_lines(path: str | os.PathLike[str], max_bytes: int) -> list[bytes]:
    """The lines of the last ``max_bytes`` of ``path``, split on ``b"\\n"``.

    A last element ``b""`` means the file ends with a newline. When the read starts
    inside the file, its first line (probably cut by the seek) is dropped. Raises
    OSError when the file cannot be read.
    """
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        start = max(0, size - max_bytes)
        handle.seek(start)
        data = handle.read(max_bytes)
    lines = data.split(b"\n")
    return lines[1:] if start > 0 else lines
