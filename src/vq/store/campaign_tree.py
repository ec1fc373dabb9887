"""Hashing a file tree for campaigns, descriptor-relative and without following any link.

Contracts:

* Every path component below the given root is opened with ``O_NOFOLLOW`` relative to
  its parent's descriptor, so a symbolic link is never followed, not even as a component
  of the path to the tree (``out`` → ``elsewhere`` is refused before anything is read).
* :func:`hash_strict` is for publishing and pinning: a symbolic link or special file
  anywhere raises :class:`~vq.errors.UnsafeArchive`; the result is every entry's path,
  type, size and SHA-256, parents first, names sorted.
* :func:`observe` is for verification: it never raises for what it finds, reporting links
  and special files as entries of type ``symlink`` / ``special`` so the caller can name
  them. It returns None when the tree itself is absent. Its ``known`` callback may give a
  regular file's SHA-256 from the file's :func:`stat_key` without reading it (a file
  unchanged since it was verified); every other file is read.
* :func:`file_keys` is the :func:`stat_key` of every regular file of a tree (nothing is
  read): what a later :func:`observe` compares to skip reading unchanged files.
* File contents are read in 1 MiB blocks into one reused buffer (hashlib releases the
  GIL), close to ``sha256sum``'s speed.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable
from pathlib import Path

from vq.domain.artifact import ArtifactEntry, Observed
from vq.errors import NotFound, UnsafeArchive

__all__ = ["KnownDigest", "descend", "file_keys", "hash_fd", "hash_strict", "observe", "stat_key"]

#: ``(path in the tree, the open file's stat)`` -> its SHA-256 when known without reading.
KnownDigest = Callable[[str, os.stat_result], str | None]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_BLOCK = 1 << 20
MAX_DEPTH = 128


def hash_fd(fd: int) -> tuple[int, str]:
    """(bytes read, SHA-256 hex) of an open file, read from its current offset."""
    digest = hashlib.sha256()
    buffer = bytearray(_BLOCK)
    view = memoryview(buffer)
    total = 0
    while True:
        count = os.readv(fd, [buffer])
        if not count:
            break
        digest.update(view[:count])
        total += count
    return total, digest.hexdigest()


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "special"


def descend(root: Path, rel: str, what: str) -> tuple[int, os.stat_result] | None:
    """Open ``root/rel`` component by component without following links below ``root``
    (``root`` itself is the directory the user named and may be reached through one).

    Returns (descriptor, lstat) of the final entry (a directory, or a regular file opened
    for reading), or None when an entry is missing. UnsafeArchive for a link or special
    file on the way; ``what`` names the tree in messages. The caller closes the fd.
    """
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        raise NotFound(f"the {what} {root} does not exist or is not a directory") from None
    parts = [part for part in rel.split("/") if part] if rel not in ("", ".") else []
    for index, part in enumerate(parts):
        here = "/".join(parts[: index + 1])
        try:
            info = os.stat(part, dir_fd=fd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            os.close(fd)
            return None
        kind = _kind(info.st_mode)
        last = index == len(parts) - 1
        if kind in ("symlink", "special") or (not last and kind != "directory"):
            os.close(fd)
            label = {"symlink": "a symbolic link", "special": "a special file"}.get(kind, "a file")
            raise UnsafeArchive(
                f"{here!r} in the {what} is {label}; refusing it",
                hint="outputs and sources must be real files and directories, without links",
            )
        try:
            child = os.open(part, _DIR_FLAGS if kind == "directory" else _FILE_FLAGS, dir_fd=fd)
        finally:
            os.close(fd)
        fd = child
        if (os.fstat(fd).st_dev, os.fstat(fd).st_ino) != (info.st_dev, info.st_ino):
            os.close(fd)
            raise UnsafeArchive(f"{here!r} in the {what} changed while being opened")
    return fd, os.fstat(fd)


def hash_strict(fd: int, info: os.stat_result, what: str) -> list[ArtifactEntry]:
    """The entries of an open file (``[".", file]``) or directory (everything below it)."""
    if stat.S_ISREG(info.st_mode):
        size, digest = hash_fd(fd)
        return [ArtifactEntry(path=".", type="file", size=size, sha256=digest)]
    entries: list[ArtifactEntry] = []
    _walk_strict(fd, "", 0, entries, what)
    return entries


def _walk_strict(fd: int, prefix: str, depth: int, out: list[ArtifactEntry], what: str) -> None:
    for name in sorted(os.listdir(fd)):
        rel = prefix + name
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        kind = _kind(info.st_mode)
        if kind in ("symlink", "special"):
            label = "a symbolic link" if kind == "symlink" else "a special file"
            raise UnsafeArchive(
                f"{rel!r} in the {what} is {label}; refusing it",
                hint="outputs and sources must be real files and directories, without links",
            )
        if depth + 1 >= MAX_DEPTH:
            raise UnsafeArchive(f"{rel!r} in the {what} is nested deeper than {MAX_DEPTH} levels")
        child = os.open(name, _DIR_FLAGS if kind == "directory" else _FILE_FLAGS, dir_fd=fd)
        try:
            if (os.fstat(child).st_dev, os.fstat(child).st_ino) != (info.st_dev, info.st_ino):
                raise UnsafeArchive(f"{rel!r} in the {what} changed while being read")
            if kind == "directory":
                out.append(ArtifactEntry(path=rel, type="directory", size=0, sha256=None))
                _walk_strict(child, rel + "/", depth + 1, out, what)
            else:
                size, digest = hash_fd(child)
                out.append(ArtifactEntry(path=rel, type="file", size=size, sha256=digest))
        finally:
            os.close(child)


def stat_key(info: os.stat_result) -> list[int]:
    """What changes whenever a file's bytes do: device, inode, size, mtime and ctime (in
    ns). The ctime cannot be set back by the file's owner: a file rewritten in place, then
    given its old mtime, still shows a new ctime."""
    return [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]


def file_keys(path: Path) -> dict[str, list[int]]:
    """:func:`stat_key` of every regular file at or below ``path`` (``"."`` for ``path``
    itself when it is a file), by path in the tree; links are not followed."""
    keys: dict[str, list[int]] = {}
    info = os.lstat(path)
    if stat.S_ISREG(info.st_mode):
        return {".": stat_key(info)}
    pending = [("", path)]
    while pending:
        prefix, directory = pending.pop()
        with os.scandir(directory) as scan:
            for entry in scan:
                rel = prefix + entry.name
                if entry.is_dir(follow_symlinks=False):
                    pending.append((rel + "/", Path(entry.path)))
                elif entry.is_file(follow_symlinks=False):
                    keys[rel] = stat_key(entry.stat(follow_symlinks=False))
    return keys


def observe(path: Path, known: KnownDigest | None = None) -> list[Observed] | None:
    """What lies at ``path`` (itself as ``"."``) and below it; None when absent.
    ``known`` may spare reading a regular file (see the module docstring)."""
    try:
        info = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    kind = _kind(info.st_mode)
    if kind in ("symlink", "special"):
        return [Observed(".", kind, info.st_size)]
    flags = _DIR_FLAGS if kind == "directory" else _FILE_FLAGS
    try:
        fd = os.open(path, flags)
    except OSError:
        return [Observed(".", "special", info.st_size)]  # swapped for a link meanwhile
    try:
        if kind == "file":
            return [_observe_file(fd, ".", known)]
        out = [Observed(".", "directory", 0)]
        _walk_observe(fd, "", 0, out, known)
        return out
    finally:
        os.close(fd)


def _observe_file(fd: int, rel: str, known: KnownDigest | None) -> Observed:
    info = os.fstat(fd)
    digest = known(rel, info) if known is not None else None
    if digest is not None:
        return Observed(rel, "file", info.st_size, digest)
    size, digest = hash_fd(fd)
    return Observed(rel, "file", size, digest)


def _walk_observe(
    fd: int, prefix: str, depth: int, out: list[Observed], known: KnownDigest | None
) -> None:
    for name in sorted(os.listdir(fd)):
        rel = prefix + name
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            continue
        kind = _kind(info.st_mode)
        if kind in ("symlink", "special") or depth + 1 >= MAX_DEPTH:
            out.append(Observed(rel, kind if depth + 1 < MAX_DEPTH else "special", info.st_size))
            continue
        try:
            child = os.open(name, _DIR_FLAGS if kind == "directory" else _FILE_FLAGS, dir_fd=fd)
        except OSError:
            out.append(Observed(rel, "special", info.st_size))
            continue
        try:
            if kind == "directory":
                out.append(Observed(rel, "directory", 0))
                _walk_observe(child, rel + "/", depth + 1, out, known)
            else:
                out.append(_observe_file(child, rel, known))
        finally:
            os.close(child)
