"""Atomic, durable, no-replace publication of one directory or one regular file.

Contract of :func:`publish` and :func:`publish_file`:

* The destination is absent or one complete entry, never partial. An existing destination
  is refused (:class:`~vq.errors.Conflict`, ``publish-exists``) before the callback runs,
  and the commit itself is no-replace against later races.
* The callback works in a hidden stage beside the destination (same directory, so the same
  filesystem): ``.<name>.vqstage-<random>``. A callback that raises exposes nothing and its
  stage is removed. A process killed mid-way leaves at most a hidden stage.
* Content (every file and directory of the stage) is synced before the commit, and the
  parent directory after it: when the call returns the publication is durable.
* Callbacks must be quiescent when they return; concurrent writers are not detected.
"""

from __future__ import annotations

import os
import secrets
import shutil
import stat
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from vq.errors import Conflict, InvalidInput, NotFound
from vq.publish._commit import (
    AlreadyExists,
    SpecialFile,
    commit_no_replace,
    fsync_dir,
    sync_tree,
)

__all__ = [
    "Draft",
    "Publication",
    "copy_tree",
    "publish",
    "publish_file",
    "remove_pinned",
    "safe_relpath",
]

STAGE_MARK = ".vqstage-"


@dataclass(frozen=True)
class Publication:
    """A committed, synced destination. ``cleanup_pending`` reports residue (a retired or
    private tree that could not be proved removed); it never undoes the publication."""

    path: Path
    cleanup_pending: bool = False


def safe_relpath(relpath: str | os.PathLike[str]) -> PurePosixPath:
    """``relpath`` as a relative path of plain names (no ``..``, ``.``, empty or absolute)."""
    text = os.fspath(relpath)
    path = PurePosixPath(text)
    if (
        not text
        or path.is_absolute()
        or "\x00" in text
        or any(part in ("", ".", "..") for part in text.split("/"))
    ):
        raise InvalidInput(
            f"{text!r} is not a safe relative path",
            hint="use plain names separated by '/', without '..' or a leading '/'",
            reference="publish-unsafe-path",
        )
    return path


@dataclass(frozen=True)
class Draft:
    """The stage a builder fills. ``path`` is an empty directory of the destination's
    filesystem; the builder owns its contents."""

    path: Path

    def link(self, source: str | os.PathLike[str], relpath: str | os.PathLike[str]) -> Path:
        """Hard-link ``source`` into the draft at ``relpath`` (parents are created).

        The source must be a regular file on the draft's filesystem; a symlink, a directory
        or a file elsewhere is refused and nothing stays behind.
        """
        rel = safe_relpath(relpath)
        target = self.path.joinpath(*rel.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(source, target, follow_symlinks=False)
        except OSError as exc:
            raise InvalidInput(
                f"cannot link {os.fspath(source)!r} into the draft: {exc.strerror}",
                hint="link a regular file from the same filesystem as the destination",
                reference="publish-link",
            ) from exc
        info = os.lstat(target)
        if not stat.S_ISREG(info.st_mode) or info.st_dev != os.lstat(self.path).st_dev:
            os.unlink(target)
            raise InvalidInput(
                f"{os.fspath(source)!r} is not a regular file of the destination's filesystem",
                hint="link regular files only; copy anything else into the draft",
                reference="publish-link",
            )
        return target


def _copy_file(source: str, target: str, mode: int, size: int) -> None:
    src = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        dst = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
        try:
            left = size
            try:
                while left > 0:
                    copied = os.copy_file_range(src, dst, left)
                    if copied == 0:
                        break
                    left -= copied
            except OSError:  # no copy_file_range here: a plain read/write loop
                while chunk := os.read(src, 1 << 20):
                    os.write(dst, chunk)
            else:
                while chunk := os.read(src, 1 << 20):  # the file grew since its stat
                    os.write(dst, chunk)
        finally:
            os.close(dst)
    finally:
        os.close(src)


def copy_tree(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> int:
    """Copy the files, directories and symlinks of ``source`` into the existing directory
    ``target`` (a draft); modes are kept, links are copied as links, never followed.
    A special file is refused. Returns the number of regular files copied."""
    files = 0
    with os.scandir(source) as scan:
        entries = list(scan)
    for entry in entries:
        src, dst = os.path.join(source, entry.name), os.path.join(target, entry.name)
        info = entry.stat(follow_symlinks=False)
        mode = stat.S_IMODE(info.st_mode)
        if stat.S_ISDIR(info.st_mode):
            os.mkdir(dst, 0o700)
            files += copy_tree(src, dst)
            os.chmod(dst, mode)
        elif stat.S_ISLNK(info.st_mode):
            os.symlink(os.readlink(src), dst)
        elif stat.S_ISREG(info.st_mode):
            _copy_file(src, dst, mode, info.st_size)
            files += 1
        else:
            raise InvalidInput(
                f"{src} is a special file", hint="publish files, directories and symlinks only"
            )
    return files


def _check_destination(dest: Path) -> Path:
    dest = Path(os.path.abspath(dest))
    if not dest.name or dest.name in (".", ".."):
        raise InvalidInput(f"{dest} cannot be a destination", reference="publish-unsafe-path")
    if not dest.parent.is_dir():
        raise NotFound(
            f"{dest.parent} is not an existing directory",
            hint="create the destination's parent directory first",
        )
    if os.path.lexists(dest):
        raise _exists(dest)
    return dest


def _exists(dest: Path) -> Conflict:
    return Conflict(
        f"{dest} already exists",
        hint="publication never replaces anything: choose a new destination",
        reference="publish-exists",
    )


def _stage_name(dest: Path) -> Path:
    return dest.parent / f".{dest.name}{STAGE_MARK}{secrets.token_hex(6)}"


def _discard(path: Path) -> None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def _pin(path: Path, what: str) -> tuple[int, int]:
    try:
        info = os.lstat(path)
    except FileNotFoundError as exc:
        raise NotFound(f"{what} {path} does not exist") from exc
    if not stat.S_ISDIR(info.st_mode):
        raise InvalidInput(
            f"{what} {path} is not a directory (links are refused)",
            reference="publish-unsafe-retire",
        )
    if info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise InvalidInput(
            f"{what} {path} must be owned by you and private (mode 0700)",
            hint=f"chmod 700 {path}",
            reference="publish-unsafe-retire",
        )
    return info.st_dev, info.st_ino


def remove_pinned(path: Path, pin: tuple[int, int]) -> bool:
    """Remove the directory ``path`` only if it is still the pinned inode; sync its parent.

    True when the removal is proved durable; False (nothing touched beyond what was safely
    removed) when the entry was moved, substituted or could not be removed.
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISDIR(info.st_mode) or (info.st_dev, info.st_ino) != pin:
        return False
    try:
        shutil.rmtree(path)  # descriptor-based on Linux: never follows a link inside
        fsync_dir(path.parent)
    except OSError:
        return False
    return True


def publish(
    dest: str | os.PathLike[str],
    build: Callable[[Draft], None],
    retire: str | os.PathLike[str] | None = None,
) -> Publication:
    """Build a directory in a stage and commit it at ``dest``; see the module contract.

    ``retire`` names a private (0700, yours) sibling directory of ``dest`` to remove once
    the publication is durable. It is pinned before ``build`` runs; any failure before the
    commit preserves it; a retirement that cannot be proved sets ``cleanup_pending``.
    """
    target = _check_destination(Path(dest))
    pin: tuple[int, int] | None = None
    retired: Path | None = None
    if retire is not None:
        retired = Path(os.path.abspath(retire))
        if retired.parent != target.parent or retired.name == target.name:
            raise InvalidInput(
                f"{retired} must be a different entry of {target.parent}",
                reference="publish-unsafe-retire",
            )
        pin = _pin(retired, "the tree to retire")
    stage = _stage_name(target)
    os.mkdir(stage, 0o777)  # the umask applies, as for any new directory
    # Held open through the build so a replacement directory cannot reuse the inode number.
    stage_fd = os.open(stage, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW)
    staged = os.fstat(stage_fd)
    try:
        build(Draft(stage))
        now = os.lstat(stage)
        if not stat.S_ISDIR(now.st_mode) or now.st_ino != staged.st_ino:
            raise InvalidInput(
                "the builder replaced its draft directory", reference="publish-draft-replaced"
            )
        sync_tree(stage)
        commit_no_replace(stage, target)
    except AlreadyExists as exc:
        _discard(stage)
        raise _exists(target) from exc
    except SpecialFile as exc:
        _discard(stage)
        raise InvalidInput(
            f"the draft holds a special file: {os.path.basename(str(exc))!r}",
            hint="a publication holds only files, directories and symlinks",
            reference="publish-special-file",
        ) from None
    except BaseException:
        _discard(stage)
        raise
    finally:
        os.close(stage_fd)
    fsync_dir(target.parent)
    pending = False
    if retired is not None and pin is not None and not remove_pinned(retired, pin):
        pending = True
        warnings.warn(
            f"published {target}, but {retired} could not be removed safely; remove it by hand",
            RuntimeWarning,
            stacklevel=2,
        )
    return Publication(target, cleanup_pending=pending)


def publish_file(dest: str | os.PathLike[str], write: Callable[[Path], None]) -> Publication:
    """Commit one regular file at ``dest``. ``write`` receives an empty adjacent regular
    file (mode 0666 through the umask) and must write it in place; replacing, unlinking or
    retyping it fails the publication."""
    target = _check_destination(Path(dest))
    stage = _stage_name(target)
    # The pinning descriptor stays open through the writer so the inode number cannot be
    # reused by a replacement file.
    pin_fd = os.open(
        stage, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o666
    )
    try:
        pinned = os.fstat(pin_fd)
        write(stage)
        fd = os.open(stage, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        try:
            now = os.fstat(fd)
            if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (
                pinned.st_dev,
                pinned.st_ino,
            ):
                raise InvalidInput(
                    "the writer replaced its staged file", reference="publish-draft-replaced"
                )
            os.fsync(fd)
        finally:
            os.close(fd)
        commit_no_replace(stage, target)
    except AlreadyExists as exc:
        _discard(stage)
        raise _exists(target) from exc
    except BaseException:
        _discard(stage)
        raise
    finally:
        os.close(pin_fd)
    fsync_dir(target.parent)
    return Publication(target)
