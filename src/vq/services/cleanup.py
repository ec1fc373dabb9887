"""``vq cleanup``: archive or sweep old terminal jobs (§2.4, §5.3).

Contracts:

* Only terminal jobs are ever candidates — never PENDING, RUNNING or SUSPENDED — and
  only those whose ``finished_at`` is at least ``older_than`` ago (``--state`` narrows
  among terminal states). A candidate is still *blocked* (reported with an ``error``,
  never touched) while its recorded process group is alive, or, for archiving, while
  its workspace is the working directory of a nonterminal job (chains, arrays and
  auto-resume siblings run in an earlier job's workspace).
* :func:`run_cleanup` without ``execute`` only reads: no file or lock is created.
* Archive (:func:`archive_job`): ``<archive_dir>/<job_name>-<id>.tar.bz2`` (``<id>``
  when unnamed; ``VQ_ARCHIVE_DIR`` moves the directory) holds ``spec.json``, the
  workspace under ``workspace/`` and the workdir (if any) under ``workdir/``. It is
  written to a temp file, fsync'd and renamed into place; then ``archived_at`` and
  ``archive_path`` are recorded under the spec lock; only then are the workspace and the
  workdir removed. The spec stays in ``queue/``. Symlinks are stored as links, never
  followed; special files are left out. An archived job is never a candidate again.
* Sweep (:func:`sweep_workdir`, also called by the daemon for
  ``clean_workdir_on_terminal`` jobs): removes exactly the managed ``workdirs/<id>/``
  with descriptor-relative, no-follow deletion, refusing a symlink, a non-directory or a
  recorded ``spec.workdir`` that is not the managed path, then records
  ``workdir_swept_at``.
* The spec lock is held only for the short read → stamp → write, never while tarring or
  deleting.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import stat
import tarfile
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, BinaryIO, Literal

from vq._fault_points import crash_point
from vq._fs import fsync_dir
from vq._safe_open import UnsafePath, open_dir_beneath
from vq.domain.durations import parse_duration
from vq.domain.spec import JobSpec
from vq.domain.states import TERMINAL, JobState
from vq.errors import Conflict, InvalidInput, NotFound, UnsafeArchive, VqError
from vq.executors.identity import group_is_job
from vq.executors.procs import live_groups
from vq.paths import StatePaths
from vq.services.context import ServiceContext
from vq.services.fetch import default_dest_name
from vq.store.specs import encode_spec
from vq.store.tree import open_regular, open_root, walk_tree

__all__ = [
    "CleanupItem",
    "CleanupPolicy",
    "CleanupReport",
    "archive_job",
    "archive_path_for",
    "plan_cleanup",
    "remove_job_trees",
    "run_cleanup",
    "sweep_workdir",
]

Action = Literal["archive", "sweep-workdir"]
DEFAULT_OLDER_THAN = "14d"


@dataclass(frozen=True)
class CleanupPolicy:
    """Which jobs to select and what to do with them."""

    older_than_seconds: int = 14 * 86400
    states: frozenset[JobState] = frozenset()
    archive: bool = False

    @classmethod
    def parse(cls, older_than: str, states: Iterable[str], archive: bool) -> CleanupPolicy:
        """From CLI text; InvalidInput for a bad duration or a non-terminal state."""
        chosen: set[JobState] = set()
        for text in states:
            try:
                state = JobState(text.upper())
            except ValueError:
                raise InvalidInput(
                    f"unknown state {text!r}",
                    hint="terminal states are " + ", ".join(sorted(s.value for s in TERMINAL)),
                ) from None
            if not state.is_terminal:
                raise InvalidInput(
                    f"cleanup never touches {state.value} jobs: only terminal ones",
                    hint="terminal states are " + ", ".join(sorted(s.value for s in TERMINAL)),
                )
            chosen.add(state)
        return cls(_age(older_than), frozenset(chosen), archive)


def _age(text: str) -> int:
    """``--older-than`` in seconds; a zero duration (``0``, ``0s``, ``0d``…) means any age."""
    if re.fullmatch(r"\s*0+[dhms]?\s*|\s*0+:0{1,2}:0{1,2}\s*", text.lower()):
        return 0
    return parse_duration(text)


@dataclass
class CleanupItem:
    """One candidate job and what happened to it (a row of ``vq cleanup --json``)."""

    id: str
    state: str
    finished_at: str | None
    action: Action
    archive_path: str | None
    done: bool = False
    error: str | None = None


@dataclass
class CleanupReport:
    dry_run: bool
    jobs: list[CleanupItem] = field(default_factory=list)
    #: What an interrupted earlier run left, and what was done about it
    #: (:mod:`vq.services.cleanup_recovery`).
    recovered: list[dict[str, Any]] = field(default_factory=list)

    @property
    def failed(self) -> list[CleanupItem]:
        return [item for item in self.jobs if item.error is not None]

    def as_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "jobs": [asdict(item) for item in self.jobs],
            "recovered": self.recovered,
        }


def archive_path_for(paths: StatePaths, spec: JobSpec) -> Path:
    """``<archive_dir>/<job_name>-<id>.tar.bz2`` (``<id>.tar.bz2`` when unnamed)."""
    return paths.archive_dir / f"{default_dest_name(spec)}.tar.bz2"


# --- selection ------------------------------------------------------------------------------
def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _blocker(
    spec: JobSpec, paths: StatePaths, users: dict[str, str], groups: set[int], archive: bool
) -> str | None:
    """Why ``spec`` must not be touched now, or None (``groups``: live process groups)."""
    if spec.pgid in groups and group_is_job(spec.id, spec.pgid, spec.pid_start_time):
        return f"its process group {spec.pgid} is still alive"
    if archive:
        workspace = os.path.realpath(paths.workspace(spec.id))
        for cwd, user in users.items():
            if _inside(cwd, workspace):
                return f"its workspace is the working directory of {user}"
    return None


def plan_cleanup(ctx: ServiceContext, policy: CleanupPolicy) -> list[tuple[JobSpec, CleanupItem]]:
    """The candidates, oldest finish first. Reads only."""
    specs = ctx.store.scan().specs.values()
    cutoff = ctx.now() - timedelta(seconds=policy.older_than_seconds)
    users = {
        os.path.realpath(spec.cwd): f"{spec.state.value} job {spec.id}"
        for spec in specs
        if not spec.is_terminal and spec.cwd
    }
    groups = set(live_groups())
    plan = []
    for spec in sorted(specs, key=lambda s: (s.finished_at or s.submitted_at, s.id)):
        if not spec.is_terminal or spec.finished_at is None or spec.finished_at > cutoff:
            continue
        if (policy.states and spec.state not in policy.states) or spec.archived_at is not None:
            continue
        if policy.archive:
            action: Action = "archive"
            archive: str | None = str(archive_path_for(ctx.paths, spec))
        elif os.path.lexists(ctx.paths.workdir(spec.id)):
            action, archive = "sweep-workdir", None
        else:
            continue  # nothing to sweep
        finished = spec.finished_at.isoformat()
        item = CleanupItem(spec.id, spec.state.value, finished, action, archive)
        item.error = _blocker(spec, ctx.paths, users, groups, policy.archive)
        plan.append((spec, item))
    return plan


def run_cleanup(ctx: ServiceContext, policy: CleanupPolicy, *, execute: bool) -> CleanupReport:
    """Plan, and with ``execute`` act on every unblocked candidate (errors are per job)."""
    report = CleanupReport(dry_run=not execute)
    from vq.services.cleanup_recovery import find_leftovers, recover

    report.recovered = [
        leftover.as_dict() for leftover in (recover(ctx) if execute else find_leftovers(ctx))
    ]
    for spec, item in plan_cleanup(ctx, policy):
        report.jobs.append(item)
        if not execute or item.error is not None:
            continue
        try:
            if item.action == "archive":
                item.archive_path = archive_job(ctx, spec).archive_path
            else:
                sweep_workdir(ctx, spec)
            item.done = True
        except VqError as exc:
            item.error = exc.message
        except OSError as exc:
            item.error = f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": ")
    return report


# --- deleting without following links -------------------------------------------------------
def _make_writable(root: Path) -> None:
    """Add owner rwx to every real directory below ``root`` (jobs leave read-only trees)."""
    for directory, subdirs, _ in os.walk(root):
        for name in subdirs:
            path = os.path.join(directory, name)
            info = os.lstat(path)
            if stat.S_ISDIR(info.st_mode):
                os.chmod(path, stat.S_IMODE(info.st_mode) | stat.S_IRWXU)


def _remove_tree(tree: Path, path: Path, what: str) -> bool:
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
            _make_writable(path)
            shutil.rmtree(path.name, dir_fd=parent_fd)
        os.fsync(parent_fd)
    finally:
        os.close(parent_fd)
    return True


def _fresh_terminal(ctx: ServiceContext, spec: JobSpec) -> JobSpec:
    current = ctx.store.read(spec.id)
    if current.submitted_at != spec.submitted_at:
        raise Conflict(f"job {spec.id} was replaced while being cleaned up")
    if not current.is_terminal:
        raise Conflict(f"job {spec.id} is {current.state.value}; only ended jobs are cleaned up")
    if group_is_job(current.id, current.pgid, current.pid_start_time):
        raise Conflict(f"job {spec.id}'s process group {current.pgid} is still alive")
    return current


def sweep_workdir(ctx: ServiceContext, spec: JobSpec) -> JobSpec:
    """Remove the terminal job's managed ``workdirs/<id>/`` and record ``workdir_swept_at``.

    Returns the spec now on disk (unchanged when there was no workdir). Raises Conflict
    for a job that is not terminal or whose processes live on, UnsafeArchive for a
    symlink, a non-directory or a recorded workdir other than the managed one.
    """
    current = _fresh_terminal(ctx, spec)
    managed = ctx.paths.workdir(current.id)
    recorded = current.workdir
    if recorded is not None and os.path.realpath(recorded) != os.path.realpath(managed):
        raise UnsafeArchive(
            f"job {current.id} records workdir {recorded}, not the managed {managed}; "
            "not deleting it"
        )
    if not _remove_tree(ctx.paths.tree_of(current.id), managed, "workdir"):
        return current
    when = ctx.now()

    def mutate(fresh: JobSpec) -> JobSpec | None:
        if fresh.submitted_at != current.submitted_at:
            return None
        fresh.workdir_swept_at = when
        return fresh

    return ctx.store.update(current.id, mutate).spec


# --- archiving --------------------------------------------------------------------------------
def _tar_header(name: str, info: os.stat_result, kind: bytes) -> tarfile.TarInfo:
    header = tarfile.TarInfo(name)
    header.type, header.mode = kind, stat.S_IMODE(info.st_mode)
    header.mtime, header.uid, header.gid = int(info.st_mtime), info.st_uid, info.st_gid
    return header


def _add_tree(tar: tarfile.TarFile, root: Path, prefix: str, what: str) -> None:
    """Add the real directory ``root`` under ``prefix``; nothing if it does not exist."""
    try:
        root_fd = open_root(root, what)
    except NotFound:
        return
    try:
        tar.addfile(_tar_header(prefix, os.fstat(root_fd), tarfile.DIRTYPE))
        skipped: list[dict[str, str]] = []
        for entry in walk_tree(root_fd, skipped):
            name, mode = f"{prefix}/{entry.rel}", entry.info.st_mode
            if stat.S_ISDIR(mode):
                tar.addfile(_tar_header(name, entry.info, tarfile.DIRTYPE))
            elif stat.S_ISLNK(mode):
                header = _tar_header(name, entry.info, tarfile.SYMTYPE)
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
def _atomic_file(target: Path) -> Iterator[BinaryIO]:
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
    _remove_tree(tree, ctx.paths.workdir(job_id), "workdir")
    _remove_tree(tree, ctx.paths.workspace(job_id), "workspace")


def archive_job(ctx: ServiceContext, spec: JobSpec) -> JobSpec:
    """Archive one terminal job (see the module contract); returns the spec now on disk."""
    current = _fresh_terminal(ctx, spec)
    if current.archived_at is not None:
        raise Conflict(f"job {current.id} is already archived to {current.archive_path}")
    target = archive_path_for(ctx.paths, current)
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with _atomic_file(target) as handle, tarfile.open(fileobj=handle, mode="w:bz2") as tar:
        data = encode_spec(current)
        header = tarfile.TarInfo("spec.json")
        header.size, header.mode, header.mtime = len(data), 0o644, int(ctx.now().timestamp())
        tar.addfile(header, io.BytesIO(data))
        _add_tree(tar, ctx.paths.workspace(current.id), "workspace", "workspace")
        crash_point("archive_while_writing")
        _add_tree(tar, ctx.paths.workdir(current.id), "workdir", "workdir")
    when = ctx.now()

    def mutate(fresh: JobSpec) -> JobSpec | None:
        if fresh.submitted_at != current.submitted_at or fresh.archived_at is not None:
            raise Conflict(f"job {current.id} changed while it was being archived")
        fresh.archived_at, fresh.archive_path = when, str(target)
        return fresh

    archived = ctx.store.update(current.id, mutate).spec
    crash_point("archive_after_record")
    try:
        remove_job_trees(ctx, current.id)
    except (OSError, VqError) as exc:
        reason = exc.message if isinstance(exc, VqError) else f"{exc.strerror}: {exc.filename}"
        raise VqError(
            f"archived to {target}, but removing the job's files failed: {reason}",
            hint="the archive is complete; remove what is left by hand",
        ) from exc
    return archived
