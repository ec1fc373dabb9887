"""A terminal job's outputs as a streamed ``.tar.gz`` (§10.3, ``GET .../outputs.tar.gz``).

Contracts:

* The same tree ``vq fetch`` produces: the workspace read with :mod:`vq.store.tree`
  (descriptor-relative, never following a symlink); a symlink is kept only when it
  provably stays inside the tree, other symlinks and special files are skipped and listed
  in the manifest's ``skipped``; then ``_vq/fetch-manifest.json`` (transport ``http``)
  and ``_vq/terminal-diagnosis.json`` (:func:`vq.fetch.local.fetch_manifest`,
  :func:`vq.domain.diagnosis.terminal_diagnosis`), replacing same-named workspace files.
* Every member lies under one top directory, ``<job_name>-<id>/`` (``<id>/`` when
  unnamed): ``tar -xzf`` gives what ``vq fetch ID`` gives.
* Streamed: files are read in 1 MiB chunks and compressed on the fly; neither the
  archive nor a whole file is ever held in memory or written to disk. A file that
  shrinks while read is zero-padded to its listed size (and listed in ``skipped``).
* Only terminal jobs (:class:`~vq.errors.Conflict` otherwise); ``last_fetched_at`` is
  stamped once the last byte was produced, as a workspace fetch does.
* Errors carry no server path (the caller may still scrub).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tarfile
import zlib
from collections.abc import Iterator

from vq.domain.archive_rules import META_DIR
from vq.domain.diagnosis import terminal_diagnosis
from vq.domain.spec import JobSpec
from vq.errors import Conflict, NotFound, VqError
from vq.fetch.local import default_dest_name, fetch_manifest, stamp_fetched
from vq.services.context import ServiceContext
from vq.store.tree import link_stays_inside, open_regular, open_root, walk_tree

__all__ = ["OutputsArchive"]

_CHUNK = 1 << 20
_BLOCK = tarfile.BLOCKSIZE
_RECORD = tarfile.RECORDSIZE
_SIDECARS = ("fetch-manifest.json", "terminal-diagnosis.json")


class OutputsArchive:
    """Opened eagerly (so refusals happen before a response starts), streamed by
    :meth:`chunks`, closed by :meth:`close` (idempotent; ``chunks`` closes at its end)."""

    def __init__(self, ctx: ServiceContext, job_id: str) -> None:
        self.ctx = ctx
        self.spec: JobSpec = ctx.store.read(job_id)
        if not self.spec.is_terminal:
            raise Conflict(
                f"job {job_id} is {self.spec.state.value}, not finished: no outputs yet",
                hint=f"wait first: GET /api/v1/jobs/{job_id}/wait?timeout=60",
                reference="not-terminal",
            )
        if self.spec.archive_path and not ctx.paths.workspace(job_id).exists():
            raise NotFound(
                f"the workspace of job {job_id} was archived by `vq cleanup`",
                hint="the operator can extract it from the state root's archive directory",
            )
        try:
            self._root_fd: int | None = open_root(ctx.paths.workspace(job_id), "workspace")
        except NotFound:
            raise NotFound(f"job {job_id} has no workspace any more") from None
        self.name = default_dest_name(self.spec)
        self.started = ctx.now()
        self.skipped: list[dict[str, str]] = []
        self._gzip = zlib.compressobj(6, zlib.DEFLATED, 31)
        self._written = 0  # uncompressed tar bytes, for the final record padding

    @property
    def filename(self) -> str:
        return f"{self.name}.tar.gz"

    def close(self) -> None:
        if self._root_fd is not None:
            os.close(self._root_fd)
            self._root_fd = None

    # --- tar encoding -----------------------------------------------------------------
    def _pack(self, data: bytes) -> bytes:
        self._written += len(data)
        return self._gzip.compress(data)

    def _header(self, rel: str, kind: bytes, info: os.stat_result | None, **extra: object) -> bytes:
        member = tarfile.TarInfo(f"{self.name}/{rel}" if rel else self.name)
        member.type = kind
        if info is not None:
            member.mode = stat.S_IMODE(info.st_mode)
            member.mtime = int(info.st_mtime)
        else:
            member.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
            member.mtime = int(self.started.timestamp())
        for key, value in extra.items():
            setattr(member, key, value)
        return self._pack(member.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape"))

    def _bytes_member(self, rel: str, data: bytes) -> Iterator[bytes]:
        yield self._header(rel, tarfile.REGTYPE, None, size=len(data))
        yield self._pack(data + b"\0" * (-len(data) % _BLOCK))

    def _file_member(self, rel: str, fd: int, info: os.stat_result) -> Iterator[bytes]:
        size = info.st_size
        yield self._header(rel, tarfile.REGTYPE, info, size=size)
        left = size
        with os.fdopen(fd, "rb") as reader:
            while left > 0:
                chunk = reader.read(min(_CHUNK, left))
                if not chunk:
                    self.skipped.append({"path": rel, "reason": "shrank while being read"})
                    chunk = b"\0" * left
                left -= len(chunk)
                yield self._pack(chunk)
        yield self._pack(b"\0" * (-size % _BLOCK))

    # --- the stream -------------------------------------------------------------------
    def _entries(self, root_fd: int) -> Iterator[bytes]:
        yield self._header("", tarfile.DIRTYPE, os.fstat(root_fd))
        meta_is_dir = False
        for entry in walk_tree(root_fd, self.skipped):
            mode = entry.info.st_mode
            if entry.rel == META_DIR:
                if not stat.S_ISDIR(mode):
                    self.skipped.append({"path": META_DIR, "reason": "not a directory; replaced"})
                    continue
                meta_is_dir = True
            elif entry.rel in (f"{META_DIR}/{name}" for name in _SIDECARS):
                continue  # written fresh at the end
            if stat.S_ISDIR(mode):
                yield self._header(entry.rel, tarfile.DIRTYPE, entry.info)
            elif stat.S_ISREG(mode):
                try:
                    fd = open_regular(entry)
                except (OSError, VqError):  # vanished, or swapped for something else
                    self.skipped.append({"path": entry.rel, "reason": "changed while being read"})
                    continue
                yield from self._file_member(entry.rel, fd, entry.info)
            elif stat.S_ISLNK(mode):
                link = os.readlink(entry.name, dir_fd=entry.dir_fd)
                if link_stays_inside(entry.rel, link):
                    yield self._header(entry.rel, tarfile.SYMTYPE, entry.info, linkname=link)
                else:
                    reason = f"symbolic link to {link!r} leaves the tree; not followed"
                    self.skipped.append({"path": entry.rel, "reason": reason})
            else:
                self.skipped.append({"path": entry.rel, "reason": "special file; not copied"})
        if not meta_is_dir:
            yield self._header(META_DIR, tarfile.DIRTYPE, None)

    def chunks(self) -> Iterator[bytes]:
        """The gzip'd tar, piece by piece (empty pieces are not yielded)."""
        try:
            if self._root_fd is None:
                raise NotFound(f"the outputs of job {self.spec.id} were already streamed")
            pieces = self._entries(self._root_fd)
            for piece in pieces:
                if piece:
                    yield piece
            manifest = fetch_manifest(
                self.spec.id,
                "workspace",
                f"jobs/{self.spec.id}",
                self.skipped,
                self.started,
                transport="http",
            )
            for rel, document in (
                (f"{META_DIR}/{_SIDECARS[0]}", manifest),
                (f"{META_DIR}/{_SIDECARS[1]}", terminal_diagnosis(self.spec)),
            ):
                data = json.dumps(document, indent=2, sort_keys=True).encode() + b"\n"
                for piece in self._bytes_member(rel, data):
                    if piece:
                        yield piece
            end = b"\0" * (2 * _BLOCK)
            end += b"\0" * (-(self._written + len(end)) % _RECORD)
            yield self._pack(end) + self._gzip.flush()
        finally:
            self.close()
        with contextlib.suppress(VqError, OSError):  # bookkeeping only
            stamp_fetched(self.ctx, self.spec)
