"""Reading a job's tree (workspace or workdir) without ever leaving it.

Used by ``vq fetch`` (copying) and ``vq cleanup`` (archiving). Contracts:

* Descriptor-relative and no-follow: a directory is opened with ``O_NOFOLLOW`` relative
  to its parent's descriptor and entered only if it is still the inode that was listed;
  a file is opened with ``O_NOFOLLOW`` and must still be the regular file that was
  listed. No symlink is ever followed, so nothing outside the root is ever read.
* Whether a symlink *would* stay inside the tree is decided textually by the
  :mod:`vq.domain.archive_rules` link rule (:func:`link_stays_inside`), so a copier can
  recreate the safe ones and skip the rest.
* :func:`walk_tree` never raises for a single bad entry: entries that vanish, cannot be
  entered, or nest deeper than :data:`MAX_DEPTH` are reported in ``skipped``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from vq.domain.archive_rules import META_DIR, MemberKind, check_member
from vq.errors import InvalidInput, NotFound, UnsafeArchive

__all__ = [
    "MAX_DEPTH",
    "TreeEntry",
    "link_stays_inside",
    "open_file_below",
    "open_regular",
    "open_root",
    "relative_parts",
    "walk_tree",
]

#: Deeper directories are skipped (each level holds one open descriptor while walked).
MAX_DEPTH = 128
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass(frozen=True)
class TreeEntry:
    """One entry below a root. ``dir_fd`` (its parent) is valid during iteration only."""

    rel: str
    name: str
    dir_fd: int
    info: os.stat_result  # lstat


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def open_root(root: Path, what: str) -> int:
    """A descriptor of the real directory ``root`` (the caller closes it).

    NotFound if it does not exist; UnsafeArchive if it is a symlink or not a directory.
    """
    try:
        info = os.lstat(root)
    except (FileNotFoundError, NotADirectoryError):
        raise NotFound(f"the {what} {root} does not exist") from None
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeArchive(f"the {what} {root} is not a real directory; refusing to read it")
    fd = os.open(root, _DIR_FLAGS)
    if not _same(os.fstat(fd), info):
        os.close(fd)
        raise UnsafeArchive(f"the {what} {root} changed while being opened")
    return fd


def walk_tree(root_fd: int, skipped: list[dict[str, str]]) -> Iterator[TreeEntry]:
    """Every entry below ``root_fd``, parents first, names sorted, no symlink followed.

    A directory is entered only after its own entry was yielded (so a copier can create
    it first). Problems are appended to ``skipped`` as ``{"path", "reason"}``.
    """
    yield from _walk(root_fd, "", 0, skipped)


def _walk(fd: int, prefix: str, depth: int, skipped: list[dict[str, str]]) -> Iterator[TreeEntry]:
    try:
        names = sorted(os.listdir(fd))
    except OSError as exc:
        skipped.append({"path": prefix.rstrip("/") or ".", "reason": f"unreadable: {exc.strerror}"})
        return
    for name in names:
        rel = prefix + name
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            continue  # vanished between listing and stat (a running job)
        yield TreeEntry(rel, name, fd, info)
        if not stat.S_ISDIR(info.st_mode):
            continue
        if depth + 1 >= MAX_DEPTH:
            skipped.append({"path": rel, "reason": f"nested deeper than {MAX_DEPTH} levels"})
            continue
        try:
            child = os.open(name, _DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            skipped.append({"path": rel, "reason": f"cannot enter: {exc.strerror}"})
            continue
        try:
            if _same(os.fstat(child), info):
                yield from _walk(child, rel + "/", depth + 1, skipped)
            else:
                skipped.append({"path": rel, "reason": "replaced while being read"})
        finally:
            os.close(child)


def open_regular(entry: TreeEntry) -> int:
    """Open the regular file ``entry`` without following a link; refuse a swapped entry."""
    fd = os.open(entry.name, _FILE_FLAGS, dir_fd=entry.dir_fd)
    if not (stat.S_ISREG(os.fstat(fd).st_mode) and _same(os.fstat(fd), entry.info)):
        os.close(fd)
        raise UnsafeArchive(f"{entry.rel!r} changed while being read")
    return fd


def _probe(rel: str) -> str:
    """``rel`` with a top-level ``_vq`` renamed (same depth): the reserved-name rule guards
    writes of submitted sources, not reads of a finished tree."""
    head, sep, rest = rel.partition("/")
    return f"x{head}{sep}{rest}" if head == META_DIR else rel


def link_stays_inside(rel: str, target: str) -> bool:
    """Whether a symlink at ``rel`` pointing to ``target`` provably stays in the tree."""
    try:
        check_member(_probe(rel), MemberKind.SYMLINK, target)
    except UnsafeArchive:
        return False
    return True


def relative_parts(name: str, what: str = "--name") -> list[str]:
    """The components of a user-given relative path; UnsafeArchive for an absolute path,
    ``..``, NUL or an empty name."""
    try:
        check_member(_probe(name), MemberKind.FILE)
    except UnsafeArchive as exc:
        reason = exc.message.removeprefix(f"entry {_probe(name)!r} ")
        raise UnsafeArchive(
            f"{what} {name!r} is refused: it {reason}",
            hint="give a path relative to the workspace, such as results/out.log",
        ) from None
    return [part for part in name.split("/") if part not in ("", ".")]


def open_file_below(root_fd: int, parts: list[str], where: str) -> int:
    """Open the regular file ``parts`` below ``root_fd``, refusing any symlink on the way.

    ``where`` names the tree in messages. NotFound when missing, UnsafeArchive for a
    symlink, InvalidInput for something that is not a regular file.
    """
    if not parts:
        raise InvalidInput(f"no file named in {where}")
    fds = [root_fd]
    try:
        for index, part in enumerate(parts):
            here, last = "/".join(parts[: index + 1]), index == len(parts) - 1
            try:
                info = os.stat(part, dir_fd=fds[-1], follow_symlinks=False)
            except (FileNotFoundError, NotADirectoryError):
                raise NotFound(f"there is no {here!r} in {where}") from None
            if stat.S_ISLNK(info.st_mode):
                raise UnsafeArchive(
                    f"{here!r} in {where} is a symbolic link; not followed",
                    hint="only regular files are fetched by name; name the link's target",
                )
            if last and not stat.S_ISREG(info.st_mode):
                raise InvalidInput(f"{here!r} in {where} is not a regular file")
            if not last and not stat.S_ISDIR(info.st_mode):
                raise NotFound(f"{here!r} in {where} is not a directory")
            entry = TreeEntry(here, part, fds[-1], info)
            fds.append(open_regular(entry) if last else os.open(part, _DIR_FLAGS, dir_fd=fds[-1]))
        return fds.pop()
    finally:
        for fd in fds[1:]:
            os.close(fd)
