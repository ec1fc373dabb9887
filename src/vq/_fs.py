"""Durable file primitives: the only place vq writes state files.

Contracts:

* :func:`atomic_write_bytes` makes a write atomic against readers and durable against
  power loss: unique temp file in the *same* directory → write → fsync → ``os.replace`` →
  fsync of the directory. A reader sees the old bytes or the new bytes, never a torn file.
* :func:`spec_lock` is the per-spec advisory ``flock`` on the sidecar ``<spec>.lock``.
  Every read → mutate → write of a spec holds it across the read and the write. It never
  nests (no thread holds two spec locks at once; a group commit gives each job its own
  worker) and is never held across slow I/O
  (process launch, workspace copies, webhooks, archives).
* :func:`append_line` is best-effort: events are observability, not a journal, so an
  append failure is logged and swallowed.
* :func:`read_tail_lines` is the one bounded tail read (logs, samples, audit files).
* :func:`read_regular` is the one read of a state or config file: it opens without
  blocking (a FIFO where a file should be never hangs the reader), refuses a final
  symlink unless told to follow one, anything that is not a regular file
  (:class:`NotRegularFile`), a file larger than its limit (:class:`FileTooLarge`, told by
  its size before anything is read) and, given an ``owner``, another user's file
  (:class:`ForeignFile`). A refusal changes nothing: the file is never followed, moved or
  deleted.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

__all__ = [
    "LOG_MODE",
    "FileTooLarge",
    "ForeignFile",
    "NotRegularFile",
    "append_line",
    "atomic_write_bytes",
    "atomic_write_json",
    "fsync_dir",
    "open_append_regular",
    "open_log",
    "open_regular_path",
    "parse_json",
    "read_bytes_limited",
    "read_fd_capped",
    "read_json_regular",
    "read_regular",
    "read_regular_text",
    "read_tail_lines",
    "spec_lock",
    "try_lock_file",
]


#: The mode of a state root's logs and indexes that name jobs (``daemon.log``, the audit
#: logs, the terminal index): never world-readable. In a multi-user system root (setgid,
#: group the admin group) that is the administrators' only.
LOG_MODE = 0o640


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
    path: Path,
    data: bytes,
    *,
    mode: int = 0o644,
    durable: bool = True,
    sync_dir: bool = True,
    owner: int | None = None,
    group: int | None = None,
) -> None:
    """Replace ``path`` with ``data`` atomically (and durably unless ``durable=False``).

    The temp file lives in the target's directory so the rename never crosses a
    filesystem. On any failure the temp file is removed and the old file is untouched.
    ``sync_dir=False`` leaves the directory fsync to the caller, which must do it (once,
    :func:`fsync_dir`) before reporting the batch of writes as durable. ``owner`` (a uid)
    and ``group`` (a gid) own the file before it is renamed into place.
    """
    atomic_write_chunks(
        path, (data,), mode=mode, durable=durable, sync_dir=sync_dir, owner=owner, group=group
    )


def atomic_write_chunks(
    path: Path,
    chunks: Iterable[bytes],
    *,
    mode: int = 0o644,
    durable: bool = True,
    sync_dir: bool = True,
    owner: int | None = None,
    group: int | None = None,
) -> None:
    """:func:`atomic_write_bytes` of the concatenated ``chunks``, written as they come
    (a large file is never one bytes object in memory). Mode, ``owner`` and ``group`` are set on the
    temp file's descriptor, never by its name (in a directory another user may write,
    the name could be swapped for a link before a by-name chmod or chown)."""
    directory = path.parent
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            for chunk in chunks:
                handle.write(chunk)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            if owner is not None or group is not None:
                os.fchown(
                    handle.fileno(),
                    -1 if owner is None else owner,
                    -1 if group is None else group,
                )
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        if exc.filename is None:  # a write or fsync: name the file it was for
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
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


def append_line(path: Path, line: str, *, log_file: bool = False) -> bool:
    """Append one line (a newline is added) to ``path``. Best-effort: never raises.

    A single ``write`` of an ``O_APPEND`` descriptor keeps concurrent appenders from
    interleaving inside a line. ``log_file``: ``path`` is a log that names jobs, opened
    with :func:`open_log` (never world-readable). Returns whether the append succeeded.
    """
    data = (line.rstrip("\n") + "\n").encode()
    try:
        fd = open_log(path) if log_file else open_append_regular(path)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
    except OSError as exc:
        log.warning("could not append to %s: %s", path, exc)
        return False
    return True


class NotRegularFile(OSError):
    """A path vq reads as a file is a FIFO, a device, a socket or a directory."""


def open_append_regular(path: str | os.PathLike[str], mode: int = 0o644) -> int:
    """An ``O_APPEND`` fd of the regular file ``path`` (created ``mode`` if missing).

    Opened without blocking and without following a final symlink, like
    :func:`open_regular_path`: a FIFO planted where a log should be never hangs the
    writer (no reader: ENXIO; a reader: refused after ``fstat``), a link is ELOOP.
    """
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOFOLLOW
    fd = os.open(path, flags, mode)
    try:
        st_mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(st_mode):
            why = f"is {_kind(st_mode)}, not a regular file"
            raise NotRegularFile(errno.EINVAL, why, str(path))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_log(path: str | os.PathLike[str]) -> int:
    """An ``O_APPEND`` fd of the log ``path`` (:func:`open_append_regular`), created with
    :data:`LOG_MODE`; an existing one that other users may read loses those bits."""
    fd = open_append_regular(path, LOG_MODE)
    try:
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
        if mode & 0o007:
            os.fchmod(fd, mode & ~0o007)
    except BaseException:
        os.close(fd)
        raise
    return fd


class FileTooLarge(OSError):
    """A file is larger than its reader's limit."""


class ForeignFile(OSError):
    """A file vq acts on only when it is its own belongs to another user."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def open_regular_path(
    path: str | os.PathLike[str], *, follow: bool = False, owner: int | None = None
) -> int:
    """An fd of ``path`` opened for reading, which is certainly a regular file.

    The open is non-blocking (opening a FIFO with no writer would otherwise wait forever)
    and, unless ``follow``, refuses a final symlink (ELOOP), for files that are vq's own.
    With ``owner`` (a uid) a file another user owns is refused (:class:`ForeignFile`).
    After ``fstat`` says the file is regular the descriptor is switched back to blocking.
    Raises :class:`NotRegularFile` (``strerror`` names the kind) or the OSError of the open.
    """
    return _open_regular(path, follow=follow, owner=owner, dir_fd=None)[0]


def _open_regular(
    path: str | os.PathLike[str], *, follow: bool, owner: int | None, dir_fd: int | None
) -> tuple[int, os.stat_result]:
    """:func:`open_regular_path` (``path`` relative to ``dir_fd`` when given), with the
    ``fstat`` that checked it."""
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | (0 if follow else os.O_NOFOLLOW)
    fd = os.open(path, flags, dir_fd=dir_fd)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = _kind(info.st_mode)
            raise NotRegularFile(errno.EINVAL, f"is {kind}, not a regular file", str(path))
        if owner is not None and info.st_uid != owner:
            why = f"is owned by uid {info.st_uid}, not {owner}"
            raise ForeignFile(errno.EPERM, why, str(path))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def read_fd_capped(fd: int, limit: int, *, expected: int | None = None) -> bytes:
    """At most ``limit + 1`` bytes read from ``fd`` (left open), so a caller tells a file
    longer than ``limit`` by the length of the answer. ``expected``: the size ``fstat``
    gave, so the first read asks for just that (plus the byte that shows growth) and
    the rest in small steps, instead of a 1 MiB buffer per read."""
    chunks: list[bytes] = []
    remaining = limit + 1
    step = 1 << 20 if expected is None else expected + 1
    while remaining > 0:
        chunk = os.read(fd, min(remaining, step))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
        if expected is not None:
            step = 1 << 16  # the file grew since its fstat (or a short read): go on
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def read_regular(
    path: str | os.PathLike[str],
    limit: int,
    *,
    follow: bool = False,
    owner: int | None = None,
    dir_fd: int | None = None,
) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them.

    Raises :class:`NotRegularFile` for anything but a regular file and :class:`ForeignFile`
    for another owner's (see :func:`open_regular_path`), :class:`FileTooLarge` when the file
    holds more than ``limit`` bytes (a file whose size says so is refused before a byte is
    read, one that grows while read once ``limit + 1`` were), or the OSError of the
    open/read (FileNotFoundError for a missing file). ``dir_fd``: ``path`` is relative to
    that open directory (a caller reading many files of one directory).
    """
    fd, info = _open_regular(path, follow=follow, owner=owner, dir_fd=dir_fd)
    try:
        too_large = info.st_size > limit
        data = b"" if too_large else read_fd_capped(fd, limit, expected=info.st_size)
    finally:
        os.close(fd)
    if too_large or len(data) > limit:
        raise FileTooLarge(errno.EFBIG, f"is larger than {limit} bytes", str(path))
    return data


def read_regular_text(path: str | os.PathLike[str], limit: int, *, follow: bool = False) -> str:
    """:func:`read_regular` decoded as UTF-8 (UnicodeDecodeError for other bytes)."""
    return read_regular(path, limit, follow=follow).decode("utf-8")


def parse_json(data: bytes | str) -> Any:
    """``json.loads`` of bytes read from a file: nesting too deep for the parser (a
    hostile ``[[[[…``) is a ValueError like any malformed JSON, never a RecursionError."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def read_json_regular(
    path: str | os.PathLike[str], limit: int, *, follow: bool = False, owner: int | None = None
) -> Any:
    """:func:`parse_json` of :func:`read_regular`: OSError (:class:`NotRegularFile`,
    :class:`FileTooLarge`, :class:`ForeignFile`, missing…) or ValueError (malformed, not
    UTF-8, too deep)."""
    return parse_json(read_regular(path, limit, follow=follow, owner=owner))


def read_bytes_limited(path: Path, limit: int) -> bytes:
    """Read at most ``limit`` bytes of the regular file ``path`` (no final symlink).

    Unlike :func:`read_regular`, a longer file is not an error: its head is returned.
    """
    fd = open_regular_path(path)
    try:
        return os.read(fd, limit)
    finally:
        os.close(fd)


def read_tail_lines(path: str | os.PathLike[str], max_bytes: int) -> list[bytes]:
    """The lines of the last ``max_bytes`` of ``path``, split on ``b"\\n"``.

    A last element ``b""`` means the file ends with a newline. When the read starts
    inside the file, its first line (probably cut by the seek) is dropped. Raises
    OSError when the file cannot be read (:class:`NotRegularFile` for a FIFO or device).
    """
    with os.fdopen(open_regular_path(path, follow=True), "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        start = max(0, size - max_bytes)
        handle.seek(start)
        data = handle.read(max_bytes)
    lines = data.split(b"\n")
    return lines[1:] if start > 0 else lines
