"""Opening files inside a tree another user controls, without following their symlinks.

In multi-user mode the root daemon reads and writes files below ``users/<uid>/``, a tree
its owner can change at any moment. Resolving a path and then opening it is a race the
owner can win (swap ``_vq`` or ``events.jsonl`` for a symlink to a root-owned file). This
module is the one place such files are opened:

* The trusted ``root`` (the state root the caller was given) is opened as is; every
  component below it is opened relative to its parent's descriptor with
  ``O_DIRECTORY | O_NOFOLLOW``, and the final component with ``O_NOFOLLOW``, so a planted
  symlink anywhere below ``root`` fails the open (ELOOP/ENOTDIR) instead of being followed.
* The final file must be a regular file with a single link (a hard link to someone
  else's file is refused). The open never blocks on a FIFO.

A refusal raises :class:`UnsafePath` (an OSError naming the path and the reason) and
changes nothing: nothing is deleted, created or followed.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from pathlib import Path

from vq._fs import read_fd_capped

__all__ = [
    "UnsafePath",
    "append_line_beneath",
    "atomic_write_beneath",
    "open_beneath",
    "open_dir_beneath",
    "read_regular_beneath",
]

log = logging.getLogger(__name__)

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafePath(OSError):
    """A path below a trusted root crosses a symlink, is not a regular file, or is a hard
    link; the open was refused and nothing was changed."""


def _refuse(path: Path, why: str) -> UnsafePath:
    return UnsafePath(errno.ELOOP, f"refused: {why}", str(path))


def _walk(root: Path, path: Path) -> tuple[int, str]:
    """A descriptor of ``path``'s parent directory, walked from ``root`` without following
    a symlink, and the final name. The caller closes the descriptor."""
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        raise _refuse(path, f"not below {root}") from None
    if not parts or any(part in ("..", ".") for part in parts):
        raise _refuse(path, f"not a file below {root}")
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise _refuse(path, f"{part!r} is a symlink or not a directory") from None
                raise
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd, parts[-1]


def open_dir_beneath(root: Path, path: Path, *, create: int | None = None) -> int:
    """An fd of the directory ``path`` below ``root``, walked without following a symlink;
    with ``create`` (a mode) a missing final directory is made first. Raises
    :class:`UnsafePath` for a symlink or non-directory on the way or at the end."""
    parent, name = _walk(root, path)
    try:
        if create is not None:
            try:
                os.mkdir(name, create, dir_fd=parent)
            except FileExistsError:
                pass
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=parent)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise _refuse(path, f"{name!r} is a symlink or not a directory") from None
            raise
    finally:
        os.close(parent)


def open_beneath(root: Path, path: Path, flags: int, mode: int = 0o644) -> int:
    """An fd of the regular file ``path`` (below the trusted ``root``) opened with ``flags``
    (``O_NOFOLLOW``, ``O_CLOEXEC`` and ``O_NONBLOCK`` are added; the fd is switched back to
    blocking). Raises :class:`UnsafePath` for a symlink on the way or at the end, a
    non-regular file or one with more than one link; other OSErrors as the open raised them
    (FileNotFoundError for a missing file without ``O_CREAT``)."""
    parent, name = _walk(root, path)
    try:
        try:
            fd = os.open(
                name,
                flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                mode,
                dir_fd=parent,
            )
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _refuse(path, "the file is a symlink") from None
            raise
    finally:
        os.close(parent)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _refuse(path, "not a regular file")
        if info.st_nlink != 1:
            raise _refuse(path, f"the file has {info.st_nlink} links")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def append_line_beneath(root: Path, path: Path, line: str) -> bool:
    """Append one line (newline added) to ``path`` below ``root`` through
    :func:`open_beneath`, creating it 0644 if missing. Best-effort: never raises; a refusal
    or failure is logged with its reason and returns False."""
    data = (line.rstrip("\n") + "\n").encode()
    try:
        fd = open_beneath(root, path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
    except OSError as exc:
        log.warning("could not append to %s: %s", path, exc)
        return False
    return True


def read_regular_beneath(root: Path, path: Path, limit: int) -> bytes:
    """The bytes of ``path`` below ``root`` (through :func:`open_beneath`), at most
    ``limit`` of them: a longer file raises ``OSError(EFBIG)``."""
    fd = open_beneath(root, path, os.O_RDONLY)
    try:
        data = read_fd_capped(fd, limit)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"is larger than {limit} bytes", str(path))
    return data


def atomic_write_beneath(
    root: Path,
    path: Path,
    data: bytes,
    *,
    mode: int = 0o644,
    durable: bool = True,
    parents: bool = False,
) -> None:
    """Replace ``path`` (below the trusted ``root``) with ``data`` atomically, every step
    relative to the descriptor of its directory, walked from ``root`` without following a
    symlink: a temp file is created there (``O_EXCL | O_NOFOLLOW``), written, given
    ``mode``, fsynced when ``durable``, and renamed over the name (a symlink at the name is
    replaced, never followed). ``parents``: missing directories between ``root`` and the
    file are made (0755) on the way. Raises :class:`UnsafePath` for a symlink or
    non-directory on the way; nothing outside the walked directory is touched."""
    parent = path.parent
    if parents:
        missing: list[Path] = []
        probe = parent
        while probe != root and root in probe.parents and not probe.is_dir():
            missing.append(probe)
            probe = probe.parent
        for directory in reversed(missing):
            os.close(open_dir_beneath(root, directory, create=0o755))
    dir_fd = open_dir_beneath(root, parent)
    try:
        tmp = f".{path.name}.{os.urandom(6).hex()}.tmp"
        fd = os.open(
            tmp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            mode,
            dir_fd=dir_fd,
        )
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fchmod(fd, mode)
                if durable:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dir_fd)
            except OSError:
                pass
            raise
        if durable:
            os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
