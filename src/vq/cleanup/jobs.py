"""``vq cleanup``: archive or sweep old terminal jobs (§2.4, §5.3).

Contracts:

* Only terminal jobs are ever candidates — never PENDING, RUNNING or SUSPENDED — and
  only those whose ``finished_at`` is at least ``older_than`` ago (``--state`` narrows
  among terminal states). A candidate is still *blocked* (reported with an ``error``,
  never touched) while its executor says its attempt provably still runs
  (``JobControl.still_running``: locally, a live member of its recorded process group that
  is the job's, never a reused pgid), or, for archiving, while
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

import io
import os
import re
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Literal, TypedDict

from vq._fault_points import crash_point
from vq.cleanup.files import add_tree, atomic_file, remove_job_trees, remove_tree
from vq.cleanup.recovery import LeftoverJSON, find_leftovers, recover
from vq.domain.durations import parse_duration
from vq.domain.spec import JobSpec
from vq.domain.states import TERMINAL, JobState
from vq.errors import Conflict, InvalidInput, UnsafeArchive, VqError
from vq.executors.base import JobControl, JobHandle, NoExecutor
from vq.executors.registry import ExecutorRegistry, local_only
from vq.fetch.local import default_dest_name
from vq.paths import StatePaths
from vq.services.context import ServiceContext
from vq.store.specs import encode_spec

__all__ = [
    "CleanupItem",
    "CleanupPolicy",
    "CleanupReport",
    "archive_job",
    "archive_path_for",
    "plan_cleanup",
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


class CleanupItemJSON(TypedDict):
    """A :class:`CleanupItem` in ``vq cleanup --json``'s ``jobs``."""

    id: str
    state: str
    finished_at: str | None
    action: Action
    archive_path: str | None
    done: bool
    error: str | None


class CleanupReportJSON(TypedDict):
    """``vq cleanup --json``."""

    dry_run: bool
    jobs: list[CleanupItemJSON]
    recovered: list[LeftoverJSON]


@dataclass
class CleanupReport:
    dry_run: bool
    jobs: list[CleanupItem] = field(default_factory=list)
    #: What an interrupted earlier run left, and what was done about it
    #: (:mod:`vq.cleanup.recovery`).
    recovered: list[LeftoverJSON] = field(default_factory=list)

    @property
    def failed(self) -> list[CleanupItem]:
        return [item for item in self.jobs if item.error is not None]

    def as_dict(self) -> CleanupReportJSON:
        return {
            "dry_run": self.dry_run,
            "jobs": [
                {
                    "id": item.id,
                    "state": item.state,
                    "finished_at": item.finished_at,
                    "action": item.action,
                    "archive_path": item.archive_path,
                    "done": item.done,
                    "error": item.error,
                }
                for item in self.jobs
            ],
            "recovered": self.recovered,
        }


def archive_path_for(paths: StatePaths, spec: JobSpec) -> Path:
    """``<archive_dir>/<job_name>-<id>.tar.bz2`` (``<id>.tar.bz2`` when unnamed)."""
    return paths.archive_dir / f"{default_dest_name(spec)}.tar.bz2"


# --- selection ------------------------------------------------------------------------------
def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _blocker(
    spec: JobSpec, paths: StatePaths, users: dict[str, str], running: set[str], archive: bool
) -> str | None:
    """Why ``spec`` must not be touched now, or None (``running``: ids of jobs whose
    attempt provably still runs)."""
    if spec.id in running:
        if spec.pgid is not None:
            return f"its process group {spec.pgid} is still alive"
        return "its attempt is still running"
    if archive:
        workspace = os.path.realpath(paths.workspace(spec.id))
        for cwd, user in users.items():
            if _inside(cwd, workspace):
                return f"its workspace is the working directory of {user}"
    return None


def _still_running(specs: Iterable[JobSpec], executors: ExecutorRegistry) -> set[str]:
    """The ids of ``specs`` whose attempt provably still runs, each asked of its own
    executor (one ``still_running`` call per executor). A spec no executor of this
    process runs (a scheduler lane it does not drive) has no process here to wait for."""
    asked: dict[str, tuple[JobControl, list[JobHandle]]] = {}
    for spec in specs:
        try:
            executor = executors.select(spec)
        except NoExecutor:
            continue
        asked.setdefault(executor.name, (executor, []))[1].append(JobHandle.of(spec))
    running: set[str] = set()
    for executor, handles in asked.values():
        running |= executor.still_running(handles)
    return running


def plan_cleanup(
    ctx: ServiceContext, policy: CleanupPolicy, executors: ExecutorRegistry | None = None
) -> list[tuple[JobSpec, CleanupItem]]:
    """The candidates, oldest finish first. Reads only. ``executors``: who answers
    whether a candidate's attempt still runs (default: this process's local executor)."""
    specs = ctx.store.scan().specs.values()
    cutoff = ctx.now() - timedelta(seconds=policy.older_than_seconds)
    users = {
        os.path.realpath(spec.cwd): f"{spec.state.value} job {spec.id}"
        for spec in specs
        if not spec.is_terminal and spec.cwd
    }
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
        plan.append((spec, CleanupItem(spec.id, spec.state.value, finished, action, archive)))
    running = _still_running((spec for spec, _ in plan), executors or local_only(ctx.paths))
    for spec, item in plan:
        item.error = _blocker(spec, ctx.paths, users, running, policy.archive)
    return plan


def run_cleanup(
    ctx: ServiceContext,
    policy: CleanupPolicy,
    *,
    execute: bool,
    executors: ExecutorRegistry | None = None,
) -> CleanupReport:
    """Plan, and with ``execute`` act on every unblocked candidate (errors are per job)."""
    report = CleanupReport(dry_run=not execute)
    report.recovered = [
        leftover.as_dict() for leftover in (recover(ctx) if execute else find_leftovers(ctx))
    ]
    for spec, item in plan_cleanup(ctx, policy, executors):
        report.jobs.append(item)
        if not execute or item.error is not None:
            continue
        try:
            if item.action == "archive":
                item.archive_path = archive_job(ctx, spec, executors=executors).archive_path
            else:
                sweep_workdir(ctx, spec, executors=executors)
            item.done = True
        except VqError as exc:
            item.error = exc.message
        except OSError as exc:
            item.error = f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": ")
    return report


def _fresh_terminal(
    ctx: ServiceContext, spec: JobSpec, executors: ExecutorRegistry | None
) -> JobSpec:
    current = ctx.store.read(spec.id)
    if current.submitted_at != spec.submitted_at:
        raise Conflict(f"job {spec.id} was replaced while being cleaned up")
    if not current.is_terminal:
        raise Conflict(f"job {spec.id} is {current.state.value}; only ended jobs are cleaned up")
    if _still_running([current], executors or local_only(ctx.paths)):
        raise Conflict(f"job {spec.id}'s process group {current.pgid} is still alive")
    return current


def sweep_workdir(
    ctx: ServiceContext, spec: JobSpec, *, executors: ExecutorRegistry | None = None
) -> JobSpec:
    """Remove the terminal job's managed ``workdirs/<id>/`` and record ``workdir_swept_at``.

    Returns the spec now on disk (unchanged when there was no workdir). Raises Conflict
    for a job that is not terminal or whose processes live on, UnsafeArchive for a
    symlink, a non-directory or a recorded workdir other than the managed one.
    """
    current = _fresh_terminal(ctx, spec, executors)
    managed = ctx.paths.workdir(current.id)
    recorded = current.workdir
    if recorded is not None and os.path.realpath(recorded) != os.path.realpath(managed):
        raise UnsafeArchive(
            f"job {current.id} records workdir {recorded}, not the managed {managed}; "
            "not deleting it"
        )
    if not remove_tree(ctx.paths.tree_of(current.id), managed, "workdir"):
        return current
    when = ctx.now()

    def mutate(fresh: JobSpec) -> JobSpec | None:
        if fresh.submitted_at != current.submitted_at:
            return None
        fresh.workdir_swept_at = when
        return fresh

    return ctx.store.update(current.id, mutate).spec


# --- archiving --------------------------------------------------------------------------------
def archive_job(
    ctx: ServiceContext, spec: JobSpec, *, executors: ExecutorRegistry | None = None
) -> JobSpec:
    """Archive one terminal job (see the module contract); returns the spec now on disk."""
    current = _fresh_terminal(ctx, spec, executors)
    if current.archived_at is not None:
        raise Conflict(f"job {current.id} is already archived to {current.archive_path}")
    target = archive_path_for(ctx.paths, current)
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with atomic_file(target) as handle, tarfile.open(fileobj=handle, mode="w:bz2") as tar:
        data = encode_spec(current)
        header = tarfile.TarInfo("spec.json")
        header.size, header.mode, header.mtime = len(data), 0o644, int(ctx.now().timestamp())
        tar.addfile(header, io.BytesIO(data))
        add_tree(tar, ctx.paths.workspace(current.id), "workspace", "workspace")
        crash_point("archive_while_writing")
        add_tree(tar, ctx.paths.workdir(current.id), "workdir", "workdir")
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
