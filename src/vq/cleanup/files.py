"""The file work of ``vq cleanup``: no-follow deletion and writing an archive.

* :func:`remove_tree` deletes a real directory reached descriptor-relative from the
  job's trusted owner tree (:mod:`vq._safe_open`): a symlink planted on the way or in
  its place is refused (:class:`~vq.errors.UnsafeArchive`), never followed; read-only
  trees a job left are made writable first.
* :func:`add_tree` adds a real directory to a tar archive without following links
  (links are stored as links, special files are left out; an entry that cannot be read
  safely fails the archive rather than leaving it silently incomplete).
* :func:`atomic_file` writes a file that replaces its target only once complete and
  synced.

The decisions (what is a candidate, when a job is blocked, the order of record and
removal) are :mod:`vq.cleanup.jobs`'s.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from vq._fs import fsync_dir
from vq._safe_open import UnsafePath, open_dir_beneath
from vq.errors import NotFound, UnsafeArchive, VqError
from vq.services.context import ServiceContext
from vq.store.tree import open_regular, open_root, walk_tree

__all__ = [
    "add_tree",
    "atomic_file",
    "make_writable",
    "remove_job_trees",
    "remove_tree",
    "tar_header",
]


def make_writable(root: Path) -> None:
    """Add owner rwx to every real directory below ``root`` (jobs leave read-only trees)."""
    for directory, subdirs, _ in os.walk(root):
        for name in subdirs:
            path = os.path.join(directory, name)
            info = os.lstat(path)
            if stat.S_ISDIR(info.st_mode):
                os.chmod(path, stat.S_IMODE(info.st_mode) | stat.S_IRWXU)


def remove_tree(tree: Path, path: Path, what: str) -> bool:
    """Delete the real directory ``path`` (no-follow, descriptor-relative). False if absent.

    Its parent is reached from the trusted ``tree`` (the job's owner tree) through
    :mod:`vq._safe_open`, so a link planted on the way is refused, never followed."""
    try:
        parent_fd = open_dir_beneath(tree, path.parent)
    except FileNotFoundError:
        return False
    except UnsafePath as exc:
        raise UnsafeArchive(f"the {what} {path} is not reachable safely: {exc.strerror}") from exc
    try:
        try:
            info = os.stat(path.name, dir_fd=parent_fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        if not stat.S_ISDIR(info.st_mode):
            raise UnsafeArchive(f"the {what} {path} is not a real directory; not deleting it")
        try:
            shutil.rmtree(path.name, dir_fd=parent_fd)
        except PermissionError:
            os.chmod(path, stat.S_IMODE(info.st_mode) | stat.S_IRWXU)
            make_writable(path)
            shutil.rmtree(path.name, dir_fd=parent_fd)
        os.fsync(parent_fd)
    finally:
        os.close(parent_fd)
    return True


def tar_header(name: str, info: os.stat_result, kind: bytes) -> tarfile.TarInfo:
    header = tarfile.TarInfo(name)
    header.type, header.mode = kind, stat.S_IMODE(info.st_mode)
    header.mtime, header.uid, header.gid = int(info.st_mtime), info.st_uid, info.st_gid
    return header


def add_tree(tar: tarfile.TarFile, root: Path, prefix: str, what: str) -> None:
    """Add the real directory ``root`` under ``prefix``; nothing if it does not exist."""
    try:
        root_fd = open_root(root, what)
    except NotFound:
        return
    try:
        tar.addfile(tar_header(prefix, os.fstat(root_fd), tarfile.DIRTYPE))
        skipped: list[dict[str, str]] = []
        for entry in walk_tree(root_fd, skipped):
            name, mode = f"{prefix}/{entry.rel}", entry.info.st_mode
            if stat.S_ISDIR(mode):
                tar.addfile(tar_header(name, entry.info, tarfile.DIRTYPE))
            elif stat.S_ISLNK(mode):
                header = tar_header(name, entry.info, tarfile.SYMTYPE)
                header.linkname = os.readlink(entry.name, dir_fd=entry.dir_fd)
                tar.addfile(header)
            elif stat.S_ISREG(mode):
                with os.fdopen(open_regular(entry), "rb") as reader:
                    tar.addfile(tar.gettarinfo(arcname=name, fileobj=reader), reader)
        if skipped:
            first = skipped[0]
            raise VqError(f"cannot archive all of {root}: {first['path']}: {first['reason']}")
    finally:
        os.close(root_fd)


@contextlib.contextmanager
def atomic_file(target: Path) -> Iterator[BinaryIO]:
    """A temp file next to ``target`` that replaces it only when the block succeeds."""
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(target.parent)


def remove_job_trees(ctx: ServiceContext, job_id: str) -> None:
    """Remove a job's workdir and workspace (no-follow); the last step of an archive."""
    tree = ctx.paths.tree_of(job_id)
    remove_tree(tree, ctx.paths.workdir(job_id), "workdir")
    remove_tree(tree, ctx.paths.workspace(job_id), "workspace")
