"""Materialize a job workspace ``jobs/<id>/`` from the SOURCE of ``vq submit SOURCE``.

SOURCE is a single file, a directory, or an archive (``.tar``, ``.tar.gz``/``.tgz``,
``.tar.bz2``/``.tbz2``, ``.tar.xz``/``.txz``, ``.zip``). Contracts:

* All or nothing: the workspace is built in a sibling ``.staging-<name>-<random>``
  directory and renamed into place only when complete. On any failure the staging
  directory is removed and the error re-raised, so nothing is left behind.
* Every entry is validated (:mod:`vq.domain.archive_rules`) before the first one is
  written. Hostile content (paths or links escaping the workspace, special files, a
  top-level ``_vq``) raises :class:`~vq.errors.UnsafeArchive`; tar extraction also runs
  Python's ``"data"`` filter as defense in depth, and zip members are written one by one
  with ``O_EXCL | O_NOFOLLOW``.
* A missing SOURCE raises :class:`~vq.errors.NotFound`; an unreadable, corrupt or
  mislabelled one raises :class:`~vq.errors.InvalidInput`; an existing workspace raises
  :class:`~vq.errors.Conflict`. Failures writing the workspace itself (e.g. ``ENOSPC``)
  propagate as :class:`OSError`.
"""

from __future__ import annotations

import contextlib
import logging
import lzma
import os
import secrets
import shutil
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Literal

from vq._fs import fsync_dir
from vq._tar import extract_checked, tar_member
from vq.domain.archive_rules import META_DIR, Member, MemberKind, check_member, check_members
from vq.errors import Conflict, InvalidInput, NotFound, UnsafeArchive

__all__ = ["SourceKind", "detect_source_kind", "materialize"]

log = logging.getLogger(__name__)

SourceKind = Literal["file", "dir", "tar", "zip"]

_TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")
_ZIP_SUFFIXES = (".zip",)
#: Errors meaning "the archive's bytes are bad" (bz2 and gzip report theirs as OSError).
_CORRUPT: tuple[type[BaseException], ...] = (
    tarfile.TarError,
    zipfile.BadZipFile,
    EOFError,
    zlib.error,
    lzma.LZMAError,
    NotImplementedError,  # zip compression method this Python cannot decode
)
_READ_FAILURES: tuple[type[BaseException], ...] = (*_CORRUPT, OSError)
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


# --- detection ------------------------------------------------------------------------
def detect_source_kind(path: Path) -> SourceKind:
    """Classify SOURCE. Archives are recognized by suffix and then verified by content.

    Raises NotFound if ``path`` does not exist, InvalidInput for special files (FIFO,
    device, socket), unreadable files, and archive-named files that are not archives.
    """
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise NotFound(
            f"source {str(path)!r} does not exist",
            hint="check the path (relative paths start from the current directory)",
        ) from exc
    except OSError as exc:
        raise InvalidInput(f"cannot read source {str(path)!r}: {exc.strerror}") from exc
    if stat.S_ISDIR(mode):
        return "dir"
    if not stat.S_ISREG(mode):
        raise InvalidInput(
            f"source {str(path)!r} is a special file (FIFO, device or socket)",
            hint="submit a regular file, a directory or an archive",
        )
    lowered = path.name.lower()
    if lowered.endswith(_TAR_SUFFIXES):
        _verify(path, "tar", tarfile.is_tarfile)
        return "tar"
    if lowered.endswith(_ZIP_SUFFIXES):
        _verify(path, "zip", zipfile.is_zipfile)
        return "zip"
    return "file"


def _verify(path: Path, label: str, is_archive: Callable[[Path], bool]) -> None:
    with _reading(path):
        ok = is_archive(path)
    if not ok:
        raise InvalidInput(
            f"source {str(path)!r} is named like a {label} archive but is not one",
            hint="re-create the archive, or rename the file to submit it as a plain file",
        )


@contextlib.contextmanager
def _reading(source: Path) -> Iterator[None]:
    """Translate read-side failures of an archive into InvalidInput."""
    try:
        yield
    except _READ_FAILURES as exc:
        raise InvalidInput(
            f"{str(source)!r} is not a readable archive: {exc}",
            hint="check that the file is complete and not corrupt (re-create or re-download)",
        ) from exc


# --- the transaction --------------------------------------------------------------------
def materialize(
    source: Path | None, workspace: Path, *, sync_parent: bool = True
) -> SourceKind | None:
    """Create ``workspace`` (which must not exist; its parent must) from ``source``.

    The workspace gets the source's content plus an empty ``_vq/``. Returns the source
    kind, or None when ``source`` is None (an empty workspace with just ``_vq/``).
    """
    if os.path.lexists(workspace):
        raise Conflict(
            f"workspace {str(workspace)!r} already exists",
            hint="remove the stale directory if an earlier submit was interrupted",
        )
    kind = None if source is None else detect_source_kind(source)
    staging = workspace.parent / f".staging-{workspace.name}-{secrets.token_hex(6)}"
    staging.mkdir()
    try:
        if source is not None and kind is not None:
            _fill(kind, source, staging)
        (staging / META_DIR).mkdir()
        if os.path.lexists(workspace):  # narrows, but cannot close, a race with another writer
            raise Conflict(f"workspace {str(workspace)!r} appeared while it was being built")
        staging.rename(workspace)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if os.path.lexists(staging):
            log.warning("could not remove staging directory %s", staging)
        raise
    if sync_parent:  # a batch (an array) syncs the parent once for all its workspaces
        fsync_dir(workspace.parent)
    return kind


def _fill(kind: SourceKind, source: Path, staging: Path) -> None:
    fill = {"file": _fill_file, "dir": _fill_dir, "tar": _fill_tar, "zip": _fill_zip}[kind]
    try:
        fill(source, staging)
    except UnsafeArchive as exc:
        raise UnsafeArchive(
            f"refusing {str(source)!r}: {exc.message}", hint=exc.hint, reference=exc.reference
        ) from exc


# --- writing helpers ------------------------------------------------------------------
def _write_new(destination: Path, reader: IO[bytes], mode: int) -> None:
    """Stream ``reader`` into a new file (never an existing one, never through a link)."""
    fd = os.open(destination, _CREATE, 0o600)
    with os.fdopen(fd, "wb") as out:
        shutil.copyfileobj(reader, out)
        os.fchmod(out.fileno(), mode & 0o777)


def _copy_regular(source: Path, destination: Path, *, follow: bool) -> None:
    """Copy a regular file with its mode and times (like ``shutil.copy2``), refusing to
    follow a final symlink unless ``follow`` and refusing anything not a regular file."""
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(source, flags)
    except OSError as exc:
        raise InvalidInput(f"cannot read {str(source)!r}: {exc.strerror}") from exc
    with os.fdopen(fd, "rb") as reader:
        info = os.fstat(reader.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeArchive(f"entry {str(source)!r} stopped being a regular file")
        _write_new(destination, reader, stat.S_IMODE(info.st_mode))
    os.utime(destination, ns=(info.st_atime_ns, info.st_mtime_ns), follow_symlinks=False)


# --- file and directory sources ---------------------------------------------------------
def _fill_file(source: Path, staging: Path) -> None:
    name = check_member(source.name, MemberKind.FILE)
    _copy_regular(source, staging / name, follow=True)


def _dir_member(entry: os.DirEntry[str], name: str) -> Member:
    if entry.is_symlink():
        return Member(name, MemberKind.SYMLINK, os.readlink(entry.path))
    if entry.is_dir(follow_symlinks=False):
        return Member(name, MemberKind.DIR)
    if entry.is_file(follow_symlinks=False):
        return Member(name, MemberKind.FILE)
    mode = entry.stat(follow_symlinks=False).st_mode
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return Member(name, MemberKind.DEVICE)
    return Member(name, MemberKind.FIFO if stat.S_ISFIFO(mode) else MemberKind.OTHER)


def _scan_dir(root: Path) -> list[tuple[Member, Path]]:
    """Every entry under ``root``, parents before children, never following symlinks."""
    found: list[tuple[Member, Path]] = []
    pending: list[tuple[str, Path]] = [("", root)]
    try:
        while pending:
            prefix, directory = pending.pop()
            with os.scandir(directory) as entries:
                for entry in sorted(entries, key=lambda e: e.name):
                    member = _dir_member(entry, prefix + entry.name)
                    found.append((member, Path(entry.path)))
                    if member.kind is MemberKind.DIR:
                        pending.append((member.name + "/", Path(entry.path)))
    except OSError as exc:
        raise InvalidInput(f"cannot read source directory {str(root)!r}: {exc}") from exc
    return found


def _fill_dir(source: Path, staging: Path) -> None:
    plan = _scan_dir(source)
    names = check_members(member for member, _ in plan)
    for (member, path), name in zip(plan, names, strict=True):
        destination = staging / name
        if member.kind is MemberKind.DIR:
            destination.mkdir()
        elif member.kind is MemberKind.SYMLINK:
            destination.symlink_to(member.link_target or "")
        else:
            _copy_regular(path, destination, follow=False)


# --- tar ----------------------------------------------------------------------------------


_FILTER_ERRORS: tuple[type[Exception], ...] = (
    (tarfile.FilterError,) if hasattr(tarfile, "FilterError") else ()
)


def _fill_tar(source: Path, staging: Path) -> None:
    with _reading(source):
        tar = tarfile.open(source, "r:*")  # noqa: SIM115 (closed below; only opening is "reading")
    with tar:
        with _reading(source):
            members = tar.getmembers()  # reads the whole archive: truncation shows here
        check_members(tar_member(info) for info in members)
        try:
            extract_checked(tar, staging, members)
        except _FILTER_ERRORS as exc:
            raise UnsafeArchive(f"tar's safety filter refused an entry: {exc}") from exc
        except _CORRUPT as exc:
            raise InvalidInput(f"{str(source)!r} is not a readable archive: {exc}") from exc


# --- zip ----------------------------------------------------------------------------------
def _zip_member(info: zipfile.ZipInfo) -> Member:
    mode = info.external_attr >> 16
    if stat.S_ISLNK(mode):
        raise UnsafeArchive(
            f"entry {info.filename!r} is a symbolic link: "
            "symbolic links in zip archives are not supported",
            hint="replace the link by the file it points to, or use a tar archive",
        )
    if info.flag_bits & 0x1:
        raise InvalidInput(
            f"entry {info.filename!r} is encrypted", hint="submit an unencrypted archive"
        )
    if info.is_dir() or stat.S_ISDIR(mode):
        return Member(info.filename, MemberKind.DIR)
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return Member(info.filename, MemberKind.DEVICE)
    if stat.S_ISFIFO(mode):
        return Member(info.filename, MemberKind.FIFO)
    file_type = stat.S_IFMT(mode)
    return Member(
        info.filename, MemberKind.FILE if file_type in (0, stat.S_IFREG) else MemberKind.OTHER
    )


def _fill_zip(source: Path, staging: Path) -> None:
    with _reading(source):
        archive = zipfile.ZipFile(source)
    with archive:
        infos = archive.infolist()
        members = [_zip_member(info) for info in infos]
        names = check_members(members)
        for info, member, name in zip(infos, members, names, strict=True):
            destination = staging / name
            if member.kind is MemberKind.DIR:
                destination.mkdir(parents=True, exist_ok=True)
                continue
            destination.parent.mkdir(parents=True, exist_ok=True)
            mode = 0o755 if (info.external_attr >> 16) & 0o111 else 0o644
            try:
                with archive.open(info) as reader:
                    _write_new(destination, reader, mode)
            except _CORRUPT as exc:
                raise InvalidInput(f"{str(source)!r} is not a readable archive: {exc}") from exc
