"""``vq fetch``: copy a job's workspace, workdir or one artifact out of the state root (§4.6).

Contracts:

* Disk only: works with or without a daemon. The spec lock is taken once, briefly, to
  stamp ``last_fetched_at`` (§6.1) — never across the copy.
* Nothing outside the source tree is read (:mod:`vq.store.tree`). A symlink is recreated
  only when it provably stays inside the tree; other symlinks and special files are
  skipped and listed in the manifest's ``skipped`` (``[{"path", "reason"}]``).
* A tree fetch (workspace or workdir) is built in a hidden temp directory next to DEST,
  given ``_vq/fetch-manifest.json`` (``vq.fetch-manifest.v1``) and
  ``_vq/terminal-diagnosis.json`` (``vq.terminal-diagnosis.v1``), then published by one
  rename (first fetch) or an atomic exchange (refetch; two renames where the kernel has
  no ``RENAME_EXCHANGE``), so DEST always holds one whole snapshot (the sidecars, the
  earlier-fetch check and publishing live in :mod:`vq.fetch.snapshot`; this
  module copies the tree and runs the use cases). File modes and times are kept;
  directories also get owner ``rwx`` so a snapshot can always be replaced.
* A DEST that exists and is not a previous fetch of the same job *and* source kind is
  refused with :class:`~vq.errors.Conflict`; nothing is written.
* A refetch that cannot refresh (source gone, copy failure) raises and stamps
  ``stale: true``, ``refresh_error`` and ``refresh_attempted_at`` onto the existing
  manifest; the previous snapshot is otherwise untouched.
* ``last_fetched_at`` is written after a published *workspace* fetch of a job that was
  terminal when the fetch began, and only while the spec keeps that identity
  (``submitted_at`` and state).
* An artifact fetch (``--name``) copies one regular file reached without passing a
  symlink, replaces an existing file at the target atomically (like ``cp``) and writes no
  sidecars.
"""

from __future__ import annotations

import contextlib
import copy
import os
import secrets
import shutil
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, TypedDict

from vq._fault_points import crash_point
from vq._fs import atomic_write_json
from vq.cleanup.recovery import sweep_fetch_staging
from vq.domain.archive_rules import META_DIR
from vq.domain.spec import JobSpec
from vq.errors import Conflict, InvalidInput, NotFound, VqError
from vq.fetch.records import recorded_fetch
from vq.fetch.snapshot import (
    MANIFEST_NAME,
    MANIFEST_SCHEMA,
    FetchManifest,
    SourceKind,
    fetch_manifest,
    previous_fetch,
    publish,
    write_sidecars,
)
from vq.services.context import ServiceContext
from vq.store.tree import (
    link_stays_inside,
    open_file_below,
    open_regular,
    open_root,
    relative_parts,
    walk_tree,
)

__all__ = [
    "MANIFEST_SCHEMA",
    "FetchResult",
    "default_dest_name",
    "fetch_artifact",
    "fetch_manifest",
    "fetch_tree",
    "stamp_fetched",
]

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


# --- naming --------------------------------------------------------------------------------
def default_dest_name(spec: JobSpec) -> str:
    """``<job_name>-<id>`` when named, else ``<id>`` (also the archive's stem, §2.4)."""
    if not spec.job_name:
        return spec.id
    return "".join("_" if ch in "/\0" else ch for ch in spec.job_name) + "-" + spec.id


# --- copying ------------------------------------------------------------------------------
class FetchResultJSON(TypedDict):
    """``vq fetch --json``."""

    job_id: str
    source_kind: SourceKind
    source_path: str
    dest: str
    artifact: str | None
    files: int
    bytes: int
    skipped: list[dict[str, str]]
    replaced: bool
    manifest: FetchManifest | None
    last_fetched_at: str | None


class GroupFetchElement(FetchResultJSON):
    """One element of ``vq fetch --group --json``: its index and its fetch."""

    index: int


class GroupFetchProblem(TypedDict):
    """An element ``vq fetch --group`` could not fetch."""

    index: int
    job_id: str
    error: str


class GroupFetchJSON(TypedDict):
    """``vq fetch --group GROUP DEST --json``: each element in ``DEST/<index>/``."""

    group: str
    dest: str
    elements: list[GroupFetchElement]
    failed: list[GroupFetchProblem]


@dataclass
class FetchResult:
    """What one fetch did: the ``vq fetch --json`` document (:meth:`as_dict`)."""

    job_id: str
    source_kind: SourceKind
    source_path: str
    dest: str
    artifact: str | None = None
    files: int = 0
    bytes: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)
    replaced: bool = False
    manifest: FetchManifest | None = None
    last_fetched_at: str | None = None

    def as_dict(self) -> FetchResultJSON:
        return {
            "job_id": self.job_id,
            "source_kind": self.source_kind,
            "source_path": self.source_path,
            "dest": self.dest,
            "artifact": self.artifact,
            "files": self.files,
            "bytes": self.bytes,
            "skipped": copy.deepcopy(self.skipped),
            "replaced": self.replaced,
            "manifest": copy.deepcopy(self.manifest),
            "last_fetched_at": self.last_fetched_at,
        }


def _source(ctx: ServiceContext, job_id: str, kind: SourceKind) -> Path:
    return ctx.paths.workspace(job_id) if kind == "workspace" else ctx.paths.workdir(job_id)


def _open_source(ctx: ServiceContext, spec: JobSpec, kind: SourceKind) -> int:
    """The source tree's descriptor, or NotFound saying where it went."""
    try:
        return open_root(_source(ctx, spec.id, kind), kind)
    except NotFound as exc:
        if spec.archive_path:
            raise NotFound(
                f"the {kind} of job {spec.id} is gone: it was archived to {spec.archive_path}"
                f" at {_iso(spec.archived_at)}",
                hint=f"extract it with: tar -xjf {spec.archive_path}",
            ) from None
        if kind == "workdir" and spec.workdir_swept_at:
            raise NotFound(
                f"the workdir of job {spec.id} was swept at {_iso(spec.workdir_swept_at)}",
                hint="its workspace is still there: `vq fetch ID` without --workdir",
            ) from None
        hint = "a job gets its workdir when it is dispatched" if kind == "workdir" else None
        raise NotFound(f"job {spec.id}: {exc.message}", hint=hint) from None


def _copy_file(reader: IO[bytes], target: Path, info: os.stat_result) -> int:
    with os.fdopen(os.open(target, _CREATE, 0o600), "wb") as out:
        shutil.copyfileobj(reader, out, 1 << 20)
        size = out.tell()
        os.fchmod(out.fileno(), stat.S_IMODE(info.st_mode))
    os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns), follow_symlinks=False)
    return size


def _copy_tree(root_fd: int, target: Path, result: FetchResult) -> None:
    directories: list[tuple[Path, os.stat_result]] = [(target, os.fstat(root_fd))]
    for entry in walk_tree(root_fd, result.skipped):
        out, mode = target / entry.rel, entry.info.st_mode
        if stat.S_ISDIR(mode):
            out.mkdir(mode=0o700)
            directories.append((out, entry.info))
        elif stat.S_ISREG(mode):
            try:
                fd = open_regular(entry)
            except (OSError, VqError):
                result.skipped.append({"path": entry.rel, "reason": "changed while being read"})
                continue
            with os.fdopen(fd, "rb") as reader:
                result.bytes += _copy_file(reader, out, entry.info)
            result.files += 1
        elif stat.S_ISLNK(mode):
            link = os.readlink(entry.name, dir_fd=entry.dir_fd)
            if link_stays_inside(entry.rel, link):
                os.symlink(link, out)
            else:
                reason = f"symbolic link to {link!r} leaves the tree; not followed"
                result.skipped.append({"path": entry.rel, "reason": reason})
        else:
            result.skipped.append({"path": entry.rel, "reason": "special file; not copied"})
    for path, info in reversed(directories):
        os.chmod(path, stat.S_IMODE(info.st_mode) | stat.S_IRWXU)
        os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))


# --- the use cases ------------------------------------------------------------------------
@contextlib.contextmanager
def _reported(what: str) -> Iterator[None]:
    """Turn an OSError into a one-line VqError (no traceback on the CLI)."""
    try:
        yield
    except OSError as exc:
        raise VqError(f"{what} failed: {exc.strerror or exc}") from exc


def fetch_tree(
    ctx: ServiceContext,
    job_id: str,
    dest: Path | None = None,
    *,
    kind: SourceKind = "workspace",
    cwd: Path | None = None,
    stamp: bool = True,
) -> FetchResult:
    """Copy the job's workspace (or workdir) to ``dest`` with both sidecars (see module).

    ``dest`` defaults to ``<cwd>/<job_name>-<id>`` (``<cwd>/<id>`` when unnamed).
    ``stamp=False`` leaves ``last_fetched_at`` alone (a snapshot streamed to another host,
    which acknowledges it separately once it has published it).
    """
    spec = ctx.read_owned(job_id)
    target = Path(os.path.abspath(dest or (cwd or Path.cwd()) / default_dest_name(spec)))
    source = _source(ctx, job_id, kind)
    inner, outer = os.path.realpath(target), os.path.realpath(source)
    if inner == outer or inner.startswith(outer + os.sep):
        raise InvalidInput(f"DEST {target} lies inside the {kind} it would copy")
    previous = previous_fetch(target, job_id, kind)
    result = FetchResult(job_id, kind, str(source), str(target), replaced=previous is not None)
    started = ctx.now()
    with recorded_fetch(ctx.paths.fetches_dir, target):  # found by doctor if killed
        tmp: Path | None = None
        try:
            root_fd = _open_source(ctx, spec, kind)
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                sweep_fetch_staging(target)  # what a killed fetch to this DEST left behind
                tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.vq-fetch-", dir=target.parent))
                _copy_tree(root_fd, tmp, result)
                crash_point("fetch_after_copy")
            finally:
                os.close(root_fd)
        except BaseException as exc:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
            if not isinstance(exc, VqError | OSError):
                raise
            error = exc if isinstance(exc, VqError) else VqError(f"copying {source} failed: {exc}")
            if previous is not None:
                previous["stale"] = True
                previous["refresh_error"] = error.message
                previous["refresh_attempted_at"] = started.isoformat()
                with contextlib.suppress(OSError):
                    atomic_write_json(target / META_DIR / MANIFEST_NAME, previous)
                kept = f"{target} keeps the previous snapshot, marked stale"
                error.hint = f"{kept}; {error.hint}" if error.hint else kept
            raise error from None
        try:
            with _reported(f"publishing the snapshot at {target}"):
                result.manifest = write_sidecars(
                    tmp, spec, kind, result.source_path, result.skipped, started
                )
                if previous is not None:
                    previous_fetch(target, job_id, kind)  # still ours, right before the swap
                publish(tmp, target, replace=previous is not None)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    if stamp and kind == "workspace" and spec.is_terminal:
        result.last_fetched_at = _iso(stamp_fetched(ctx, spec))
    return result


def stamp_fetched(ctx: ServiceContext, initial: JobSpec) -> datetime | None:
    """Record ``last_fetched_at`` if the spec still is the one that was fetched (§6.1)."""
    when = ctx.now()

    def mutate(spec: JobSpec) -> JobSpec | None:
        if spec.submitted_at != initial.submitted_at or spec.state is not initial.state:
            return None
        spec.last_fetched_at = when
        return spec

    return when if ctx.store.update(initial.id, mutate).changed else None


def fetch_artifact(
    ctx: ServiceContext,
    job_id: str,
    name: str,
    dest: Path | None = None,
    *,
    kind: SourceKind = "workspace",
    cwd: Path | None = None,
) -> FetchResult:
    """Copy the one regular file ``name`` of the job's workspace (or workdir); no sidecars.

    ``dest`` is a file path or an existing directory (default: ``cwd``).
    """
    parts = relative_parts(name)
    spec = ctx.read_owned(job_id)
    root_fd = _open_source(ctx, spec, kind)
    try:
        with _reported(f"reading {name!r}"):
            file_fd = open_file_below(root_fd, parts, f"the {kind} of job {job_id}")
    finally:
        os.close(root_fd)
    with os.fdopen(file_fd, "rb") as reader, _reported(f"writing {name!r}"):
        target = dest if dest is not None else (cwd or Path.cwd())
        target = Path(os.path.abspath(target / parts[-1] if target.is_dir() else target))
        if target.is_dir():
            raise Conflict(f"{target} is a directory", hint="name a file path or a directory")
        target.parent.mkdir(parents=True, exist_ok=True)
        sweep_fetch_staging(target)
        tmp = target.with_name(f".{target.name}.vq-fetch-{secrets.token_hex(4)}")
        with recorded_fetch(ctx.paths.fetches_dir, target):
            try:
                size = _copy_file(reader, tmp, os.fstat(reader.fileno()))
                os.replace(tmp, target)
            except BaseException:
                with contextlib.suppress(OSError):
                    tmp.unlink()
                raise
    source = _source(ctx, job_id, kind) / "/".join(parts)
    return FetchResult(job_id, kind, str(source), str(target), name, files=1, bytes=size)
