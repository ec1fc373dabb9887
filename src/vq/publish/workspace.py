"""Resumable private work that ends in one publication.

``Workspace(dest, identity=b"...")`` keeps its state in a hidden, owner-only container
beside the destination: ``<parent>/.<name>.vqwork/<sha256(identity)>/`` holding ``work/``
(:attr:`Workspace.path`, where the application keeps checkpoints across restarts) and
``lease`` (the lock file). Entering the ``with`` block takes a non-blocking exclusive lock
on the lease (a second holder gets :class:`~vq.errors.Conflict`, ``workspace-busy``).

:meth:`Workspace.child` makes a workspace whose destination is ``<parent work>/<leaf>``.
Entering a child also takes a *shared* lock on the parent's lease, so children run
concurrently with each other while the parent cannot be entered (finalized) until they
close.

The container is the trust root: every entry is checked without following links when the
workspace is prepared and again before publishing. A substituted entry refuses the
publication; after a successful publication the pinned private tree is removed only if it
is still the same inode, otherwise :attr:`~vq.publish.core.Publication.cleanup_pending`
is set.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import stat
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from vq.errors import Conflict, InvalidInput
from vq.publish.core import Draft, Publication, publish, remove_pinned, safe_relpath

__all__ = ["Workspace"]


def _private_dir(path: Path) -> tuple[int, int]:
    """Create ``path`` (0700) if missing; refuse anything that is not our private dir."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise InvalidInput(
            f"{path} is not a private directory of yours (a link or a substituted entry?)",
            hint="remove it by hand after checking what it is",
            reference="workspace-unsafe",
        )
    return info.st_dev, info.st_ino


class Workspace:
    """Private, resumable work bound to one destination and one opaque identity."""

    def __init__(
        self,
        dest: str | os.PathLike[str],
        *,
        identity: bytes,
        _parent: Workspace | None = None,
    ) -> None:
        self.dest = Path(os.path.abspath(dest))
        self.digest = hashlib.sha256(identity).hexdigest()
        self.container = self.dest.parent / f".{self.dest.name}.vqwork"
        self.home = self.container / self.digest
        self._parent = _parent
        self._fds: list[int] = []
        self._pins = self._prepare()

    def _prepare(self) -> dict[Path, tuple[int, int]]:
        pins = {}
        for path in (self.container, self.home, self.path):
            pins[path] = _private_dir(path)
        return pins

    @property
    def path(self) -> Path:
        """The private work directory (kept across restarts until publication)."""
        return self.home / "work"

    @property
    def lease(self) -> Path:
        return self.home / "lease"

    def child(self, leaf: str, identity: bytes) -> Workspace:
        """A workspace publishing ``<self.path>/<leaf>``, sharing this one's lease."""
        rel = safe_relpath(leaf)
        if len(rel.parts) != 1:
            raise InvalidInput(f"{leaf!r} must be one name", reference="publish-unsafe-path")
        return Workspace(self.path / leaf, identity=identity, _parent=self)

    # --- the lease -----------------------------------------------------------------
    def _lock(self, path: Path, how: int) -> None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, how | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise Conflict(
                    f"the workspace of {self.dest} is in use by another process",
                    hint="wait for it to finish (its children, too) and try again",
                    reference="workspace-busy",
                ) from exc
            raise
        self._fds.append(fd)

    def __enter__(self) -> Workspace:
        try:
            if self._parent is not None:
                self._lock(self._parent.lease, fcntl.LOCK_SH)
            self._lock(self.lease, fcntl.LOCK_EX)
        except BaseException:
            self._release()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._release()

    def _release(self) -> None:
        while self._fds:
            os.close(self._fds.pop())

    # --- publication ---------------------------------------------------------------
    def _verify(self) -> None:
        for path, pin in self._pins.items():
            try:
                info = os.lstat(path)
            except FileNotFoundError:
                info = None
            if (
                info is None
                or not stat.S_ISDIR(info.st_mode)
                or (
                    info.st_dev,
                    info.st_ino,
                )
                != pin
            ):
                raise InvalidInput(
                    f"{path} was moved or substituted since the workspace was opened",
                    hint="check it by hand; nothing was published",
                    reference="workspace-unsafe",
                )

    def publish(self, build: Callable[[Draft], None]) -> Publication:
        """Publish ``dest`` with ``build``; then remove this workspace's private tree."""
        if not self._fds:
            raise Conflict(
                "publish needs the workspace entered (`with Workspace(...) as ws:`)",
                reference="workspace-not-entered",
            )
        self._verify()
        done = publish(self.dest, build)
        removed = remove_pinned(self.home, self._pins[self.home])
        if removed:
            try:
                os.rmdir(self.container)  # only when no other identity is left
            except OSError:
                pass
        return Publication(done.path, cleanup_pending=not removed)
