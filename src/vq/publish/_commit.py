"""No-replace commits and the syncs around them: the only kernel-facing part of publication.

* :func:`commit_no_replace` moves a finished stage onto an absent destination and never
  overwrites: ``renameat2(RENAME_NOREPLACE)`` (Linux, through ctypes) when the kernel and
  filesystem support it; otherwise ``link`` + ``unlink`` for a regular file (``link`` fails
  on an existing name) and, for a directory, ``rename`` under an advisory lock on the
  parent's ``.vq-publish.lock`` held only for the absence check, the rename and the
  verification that the destination is the staged inode. The fallback protects against
  cooperating vq publishers only.
* :func:`sync_tree` makes a stage's content durable before its commit.
* :func:`fsync_dir` makes a commit durable; its errors propagate (publication must not
  report durability it could not prove).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import fcntl
import os
import stat
import sys
from pathlib import Path

__all__ = [
    "AlreadyExists",
    "SpecialFile",
    "commit_no_replace",
    "fsync_dir",
    "fsync_path",
    "native_available",
    "sync_tree",
]

_AT_FDCWD = -100
_RENAME_NOREPLACE = 1
LOCK_NAME = ".vq-publish.lock"
#: Above this many entries a stage is synced with one ``syncfs`` instead of per-file fsyncs.
SYNCFS_THRESHOLD = 64


class AlreadyExists(Exception):
    """The destination exists: the commit did nothing."""


def _load_libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None


_LIBC = _load_libc()


def native_available() -> bool:
    """Whether this platform offers ``renameat2`` at all (a filesystem may still refuse)."""
    return _LIBC is not None and hasattr(_LIBC, "renameat2")


def _renameat2(source: Path, dest: Path) -> bool:
    """Rename without replacing. True on success; False when unsupported here.

    Raises :class:`AlreadyExists` when ``dest`` exists and OSError on other failures.
    """
    if not native_available():
        return False
    assert _LIBC is not None
    result = _LIBC.renameat2(
        _AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(dest), _RENAME_NOREPLACE
    )
    if result == 0:
        return True
    err = ctypes.get_errno()
    if err == errno.EEXIST:
        raise AlreadyExists(str(dest))
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False  # the filesystem (or an old kernel) does not support the flag
    raise OSError(err, os.strerror(err), str(dest))


def _fallback_file(source: Path, dest: Path) -> None:
    try:
        os.link(source, dest, follow_symlinks=False)
    except FileExistsError as exc:
        raise AlreadyExists(str(dest)) from exc
    os.unlink(source)


def _fallback_dir(source: Path, dest: Path) -> None:
    staged = os.lstat(source)
    fd = os.open(dest.parent / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if os.path.lexists(dest):
            raise AlreadyExists(str(dest))
        os.rename(source, dest)
        landed = os.lstat(dest)
        if (landed.st_dev, landed.st_ino) != (staged.st_dev, staged.st_ino):
            raise OSError(errno.EEXIST, "the destination is not the staged directory", str(dest))
    finally:
        os.close(fd)


def commit_no_replace(source: Path, dest: Path, *, native: bool = True) -> None:
    """Move ``source`` to the absent ``dest`` (same directory), never replacing anything.

    ``native=False`` forces the fallback (tests use it to exercise that path).
    """
    if native and _renameat2(source, dest):
        return
    if stat.S_ISDIR(os.lstat(source).st_mode):
        _fallback_dir(source, dest)
    else:
        _fallback_file(source, dest)


def fsync_path(path: Path, *, directory: bool = False) -> None:
    """fsync one file or directory without following a final symlink. Errors propagate."""
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW
    if directory:
        flags |= os.O_DIRECTORY
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(directory: Path) -> None:
    """fsync ``directory`` so a rename or create inside it is durable. Errors propagate."""
    fsync_path(directory, directory=True)


def _syncfs(path: Path) -> bool:
    if _LIBC is None or not hasattr(_LIBC, "syncfs"):
        return False
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_DIRECTORY)
    try:
        if _LIBC.syncfs(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), str(path))
    finally:
        os.close(fd)
    return True


class SpecialFile(Exception):
    """The tree holds something other than files, directories and symlinks."""


def _entries(directory: str, out: list[tuple[str, bool]]) -> None:
    out.append((directory, True))
    with os.scandir(directory) as scan:
        for entry in scan:  # the entry's type from the directory itself: no lstat each
            if entry.is_dir(follow_symlinks=False):
                _entries(entry.path, out)
            elif entry.is_file(follow_symlinks=False):
                out.append((entry.path, False))
            elif not entry.is_symlink():
                raise SpecialFile(entry.path)


def sync_tree(root: Path) -> None:
    """Make every file and directory under ``root`` (itself included) durable.

    Links are never followed; a symlink's name is made durable by its directory's sync.
    A special file (FIFO, socket, device) raises :class:`SpecialFile` before any sync.
    A large tree is synced with one ``syncfs`` of its filesystem (what ``sync`` does, for
    one filesystem) instead of thousands of fsyncs.
    """
    entries: list[tuple[str, bool]] = []
    _entries(os.fspath(root), entries)
    if len(entries) > SYNCFS_THRESHOLD and _syncfs(root):
        return
    for path, is_dir in reversed(entries):
        fsync_path(Path(path), directory=is_dir)
