"""Finishing what a killed ``vq cleanup`` or ``vq fetch`` left half done (§2.4).

An archive is a sequence of durable steps: temp file written and fsync'd → renamed to
``<archive_dir>/NAME-ID.tar.bz2`` → ``archived_at``/``archive_path`` recorded → workspace
and workdir removed. A crash between steps leaves one of two traces, both repaired here:

* a job recorded as archived whose workspace or workdir is still on disk: the archive
  exists (it was durable before the record), so :func:`finish_archives` removes them. If
  the archive file is gone, nothing is removed and the job is reported;
* an orphan temp file ``.NAME-ID.tar.bz2.*.tmp`` in the archive directory (or a spec
  write's ``.ID.json.*.tmp`` in ``queue/``): :func:`sweep_stale_temps` removes it once it
  has not been modified for ``min_age_seconds``, so a temp file being written now is
  never touched.

``vq fetch`` stages into ``.DEST.vq-fetch-*`` next to DEST; :func:`sweep_fetch_staging`
removes stale ones (same age rule) before the next fetch to that DEST, and
:func:`sweep_interrupted_fetches` removes those of a fetch whose process is gone, found
through the record it held (``fetches/``), wherever DEST is.

:func:`recover` runs these repairs; ``vq cleanup --execute`` calls it first and
the daemon may call it at start. :func:`find_leftovers` only reads (``vq doctor``).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from vq.cleanup.files import remove_job_trees
from vq.errors import VqError
from vq.fetch.records import interrupted_fetches, staging_entries
from vq.services.context import ServiceContext

__all__ = [
    "STALE_SECONDS",
    "Leftover",
    "find_leftovers",
    "finish_archives",
    "recover",
    "sweep_fetch_staging",
    "sweep_interrupted_fetches",
    "sweep_stale_temps",
]

#: A temp file or staging directory untouched this long belongs to a dead process.
STALE_SECONDS = 3600
_ARCHIVE_TEMP = re.compile(r"\..+\.tar\.bz2\.[^.]+\.tmp")
_SPEC_TEMP = re.compile(r"\.[0-9a-f]{12}\.json\.[^.]+\.tmp")


class LeftoverJSON(TypedDict):
    """A :class:`Leftover` in ``vq cleanup --json``'s ``recovered``."""

    kind: str
    path: str
    action: str
    job_id: str | None
    reason: str | None


@dataclass(frozen=True)
class Leftover:
    """One trace of an interrupted operation, and what was (or would be) done."""

    kind: str  # "archived-workspace" | "missing-archive" | "temp-file" | "fetch-staging"
    path: str
    action: str  # "removed" | "kept" | "would remove"
    job_id: str | None = None
    reason: str | None = None

    def as_dict(self) -> LeftoverJSON:
        return {
            "kind": self.kind,
            "path": self.path,
            "action": self.action,
            "job_id": self.job_id,
            "reason": self.reason,
        }


def _age(path: Path, now: float) -> float | None:
    try:
        return now - os.lstat(path).st_mtime
    except OSError:
        return None


def finish_archives(
    ctx: ServiceContext, *, execute: bool = True, job_ids: Iterable[str] | None = None
) -> list[Leftover]:
    """Remove the workspace and workdir of every job recorded as archived whose archive
    file exists; report (never remove) those whose archive is missing.

    ``job_ids``: look only at these jobs (a caller that already knows which specs record
    an archive, as the daemon's start does), each read afresh; None: every spec.
    """
    found: list[Leftover] = []
    scan = ctx.store.scan(None if job_ids is None else sorted(job_ids))
    for spec in scan.specs.values():
        if spec.archived_at is None:
            continue
        trees = [
            p for p in (ctx.paths.workspace(spec.id), ctx.paths.workdir(spec.id)) if p.exists()
        ]
        if not trees:
            continue
        archive = Path(spec.archive_path) if spec.archive_path else None
        durable = archive is not None and _is_regular(archive)
        if not durable:
            for tree in trees:
                found.append(
                    Leftover(
                        "missing-archive",
                        str(tree),
                        "kept",
                        spec.id,
                        f"recorded as archived to {archive}, which does not exist",
                    )
                )
            continue
        if not execute:
            found += [
                Leftover("archived-workspace", str(t), "would remove", spec.id) for t in trees
            ]
            continue
        try:
            remove_job_trees(ctx, spec.id)
        except (OSError, VqError) as exc:
            reason = exc.message if isinstance(exc, VqError) else str(exc)
            found += [
                Leftover("archived-workspace", str(t), "kept", spec.id, reason) for t in trees
            ]
            continue
        found += [Leftover("archived-workspace", str(t), "removed", spec.id) for t in trees]
    return found


def _is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def sweep_stale_temps(
    ctx: ServiceContext, *, min_age_seconds: float = STALE_SECONDS, execute: bool = True
) -> list[Leftover]:
    """Remove orphan archive and spec temp files not modified for ``min_age_seconds``."""
    found: list[Leftover] = []
    now = time.time()
    for directory, pattern in (
        (ctx.paths.archive_dir, _ARCHIVE_TEMP),
        (ctx.paths.queue_dir, _SPEC_TEMP),
    ):
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            if not pattern.fullmatch(name):
                continue  # the name first: the queue holds a spec and a lock file per job
            path = directory / name
            age = _age(path, now)
            if age is None or age < min_age_seconds:
                continue
            if not _is_regular(path):
                continue
            if not execute:
                found.append(Leftover("temp-file", str(path), "would remove"))
                continue
            try:
                path.unlink()
            except OSError as exc:
                found.append(Leftover("temp-file", str(path), "kept", reason=exc.strerror))
                continue
            found.append(Leftover("temp-file", str(path), "removed"))
    return found


def sweep_fetch_staging(target: Path, *, min_age_seconds: float = STALE_SECONDS) -> list[str]:
    """Remove stale ``.<target.name>.vq-fetch-*`` siblings of ``target`` (a fetch killed
    while staging); entries modified within ``min_age_seconds`` are left alone."""
    removed: list[str] = []
    now = time.time()
    for path in staging_entries(target):
        age = _age(path, now)
        if age is None or age < min_age_seconds:
            continue
        info = os.lstat(path)
        if stat.S_ISDIR(info.st_mode):
            shutil.rmtree(path, ignore_errors=True)
        elif stat.S_ISREG(info.st_mode):
            path.unlink(missing_ok=True)
        else:
            continue
        removed.append(str(path))
    return removed


def recover(
    ctx: ServiceContext,
    *,
    min_age_seconds: float = STALE_SECONDS,
    archived: Iterable[str] | None = None,
) -> list[Leftover]:
    """Finish interrupted archives and sweep stale temp files of this state root.
    ``archived``: the ids of the specs that record an archive, when the caller knows
    them (see :func:`finish_archives`)."""
    return (
        finish_archives(ctx, job_ids=archived)
        + sweep_stale_temps(ctx, min_age_seconds=min_age_seconds)
        + sweep_interrupted_fetches(ctx)
    )


def find_leftovers(
    ctx: ServiceContext, *, min_age_seconds: float = STALE_SECONDS
) -> list[Leftover]:
    """What :func:`recover` would do, changing nothing."""
    return (
        finish_archives(ctx, execute=False)
        + sweep_stale_temps(ctx, min_age_seconds=min_age_seconds, execute=False)
        + sweep_interrupted_fetches(ctx, execute=False)
    )


def sweep_interrupted_fetches(ctx: ServiceContext, *, execute: bool = True) -> list[Leftover]:
    """The staging entries of fetches killed mid-way, found through their records
    (:mod:`vq.fetch.records`), removed when ``execute``."""
    return [
        Leftover("fetch-staging", str(item.path), action)
        for item, action in interrupted_fetches(ctx.paths.fetches_dir, execute=execute)
    ]
