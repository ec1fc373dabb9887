"""The archive-rules view of a tar entry, for every reader of a tar stream (submit
sources and uploads in ``store``, SSH fetches in ``remote``, lane copy-backs in
``executors``): one place that maps a :class:`tarfile.TarInfo` onto
:class:`vq.domain.archive_rules.Member`."""

from __future__ import annotations

import tarfile

from vq.domain.archive_rules import Member, MemberKind

__all__ = ["tar_member"]


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
