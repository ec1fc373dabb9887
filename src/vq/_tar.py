"""The archive-rules view of a tar entry, for every reader of a tar stream (submit
sources and uploads in ``store``, SSH fetches in ``remote``, lane copy-backs in
``executors``): one place that maps a :class:`tarfile.TarInfo` onto
:class:`vq.domain.archive_rules.Member`, and :func:`extract_checked`, the extraction of
entries the archive rules already accepted, on any Python 3.11."""

from __future__ import annotations

import os
import tarfile
from collections.abc import Iterable
from pathlib import Path

from vq.domain.archive_rules import Member, MemberKind

__all__ = ["HAS_DATA_FILTER", "extract_checked", "tar_member"]

#: tar extraction filters (PEP 706) exist from Python 3.11.4; Debian 12 ships 3.11.2.
HAS_DATA_FILTER = hasattr(tarfile, "data_filter")


def tar_member(info: tarfile.TarInfo) -> Member:
    """The archive-rules view of one tar entry (its name, kind and link target)."""
    if info.isfile():
        return Member(info.name, MemberKind.FILE)
    if info.isdir():
        return Member(info.name, MemberKind.DIR)
    if info.issym():
        return Member(info.name, MemberKind.SYMLINK, info.linkname)
    if info.islnk():
        return Member(info.name, MemberKind.HARDLINK, info.linkname)
    if info.ischr() or info.isblk():
        return Member(info.name, MemberKind.DEVICE)
    return Member(info.name, MemberKind.FIFO if info.isfifo() else MemberKind.OTHER)


def extract_checked(
    tar: tarfile.TarFile, destination: Path, members: Iterable[tarfile.TarInfo]
) -> None:
    """Extract ``members`` of ``tar`` into ``destination``. The caller has already passed
    every entry through the archive rules (names, link targets, kinds), or passes them
    through as ``members`` is iterated (a stream read once: ``members`` is consumed
    exactly once, lazily). With the ``data`` filter (Python 3.11.4+) tar applies it as
    well; without it (Debian 12's 3.11.2) each entry gets what that filter would give it:
    no special mode bits, no group/other write, owner read/write on files, and the
    extracting user as owner (no chown to the archive's ids, even as root)."""
    if HAS_DATA_FILTER:
        tar.extractall(destination, members, filter="data")
        return
    tar.extractall(destination, map(_as_data_filter_would, members))  # noqa: S202 - checked


def _as_data_filter_would(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """``info`` with the mode and ownership the ``data`` filter would give it."""
    info.mode = (info.mode & 0o755) | (0o700 if info.isdir() else 0o600)
    info.uid, info.gid, info.uname, info.gname = os.getuid(), os.getgid(), "", ""
    return info
