"""``vq fetch``: copy a job's workspace, workdir or one artifact out of the state root (§4.6).

Contracts:

* Disk only: works with or without a daemon. The spec lock is taken once, briefly, to
  stamp ``last_fetched_at`` (§6.1) — never across the copy.
* Nothing outside the source tree is ever read. :func:`walk_tree` is descriptor-relative
  and never follows a symlink. A symlink is recreated as a symlink only when the
  :mod:`vq.domain.archive_rules` link rule proves it stays inside the tree; otherwise it
  is skipped, like special files, and listed in the manifest's ``skipped``.
* Tree fetches (workspace or workdir) are built in a hidden temp directory next to DEST,
  given ``_vq/fetch-manifest.json`` (``vq.fetch-manifest.v1``) and
  ``_vq/terminal-diagnosis.json`` (``vq.terminal-diagnosis.v1``), then published by one
  rename (first fetch) or an atomic exchange (refetch), so DEST is always one whole
  snapshot. Directories get owner ``rwx`` added so a snapshot can always be replaced.
* A DEST that exists and is not a previous fetch of the same job *and* source kind is
  refused with :class:`~vq.errors.Conflict`; nothing is written.
* A refetch that cannot refresh (source gone, copy failure) raises and stamps
  ``stale: true``, ``refresh_error`` and ``refresh_attempted_at`` onto the existing
  manifest; the previous snapshot is otherwise untouched.
* ``last_fetched_at`` is written after a published *workspace* fetch of a job that was
  terminal when the fetch began, and only while the spec keeps that identity
  (``submitted_at`` and state).
* Artifact fetches (``--name``) copy one regular file reached without passing through a
  symlink and write no sidecars. Absolute names and ``..`` raise UnsafeArchive.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import errno
import json
import os
import secrets
import shutil
import socket
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any, Literal

from vq._fs import atomic_write_json, fsync_dir, read_bytes_limited
from vq.domain.archive_rules import META_DIR, MemberKind, check_member
from vq.domain.lifecycle import signal_name
from vq.domain.spec import JobSpec
from vq.domain.states import JobState
from vq.errors import Conflict, InvalidInput, NotFound, UnsafeArchive, VqError
from vq.services.context import ServiceContext

__all__ = [
    "FetchResult",
    "TreeEntry",
    "default_dest_name",
    "diagnose",
    "fetch_artifact",
    "fetch_tree",
    "link_stays_inside",
    "open_regular",
    "open_source",
    "terminal_diagnosis",
    "walk_tree",
]

SourceKind = Literal["workspace", "workdir"]
MANIFEST_SCHEMA = "vq.fetch-manifest.v1"
DIAGNOSIS_SCHEMA = "vq.terminal-diagnosis.v1"
MANIFEST_NAME = "fetch-manifest.json"
DIAGNOSIS_NAME = "terminal-diagnosis.json"
#: Deeper directories are skipped (each level holds one open descriptor while walked).
MAX_DEPTH = 128
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


# --- walking a tree without following links ----------------------------------------------
@dataclass(frozen=True)
class TreeEntry:
    """One entry below a walked root. ``dir_fd`` (its parent) is valid during iteration only."""

    rel: str
    name: str
    dir_fd: int
    info: os.stat_result  # lstat


def open_source(root: Path, what: str) -> int:
    """A descriptor of the real directory ``root``; NotFound if missing, UnsafeArchive if
    it is a symlink or not a directory."""
    try:
        info = os.lstat(root)
    except (FileNotFoundError, NotADirectoryError):
        raise NotFound(f"the {what} {root} does not exist") from None
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeArchive(f"the {what} {root} is not a real directory; refusing to read it")
    fd = os.open(root, _DIR_FLAGS)
    if (os.fstat(fd).st_dev, os.fstat(fd).st_ino) != (info.st_dev, info.st_ino):
        os.close(fd)
        raise UnsafeArchive(f"the {what} {root} changed while being opened")
    return fd


def walk_tree(root_fd: int, skipped: list[dict[str, str]]) -> Iterator[TreeEntry]:
    """Every entry below ``root_fd``, parents first, names sorted, no symlink followed.

    A directory is entered only after its entry was yielded (so a copier can create it
    first) and only if it is still the directory that was listed. Entries that vanish or
    cannot be read are appended to ``skipped`` as ``{"path", "reason"}``.
    """
    yield from _walk(root_fd, "", 0, skipped)


def _walk(fd: int, prefix: str, depth: int, skipped: list[dict[str, str]]) -> Iterator[TreeEntry]:
    try:
        names = sorted(os.listdir(fd))
    except OSError as exc:
        skipped.append({"path": prefix.rstrip("/") or ".", "reason": f"unreadable: {exc.strerror}"})
        return
    for name in names:
        rel = prefix + name
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            continue  # vanished between listing and stat (a running job)
        yield TreeEntry(rel, name, fd, info)
        if not stat.S_ISDIR(info.st_mode):
            continue
        if depth + 1 >= MAX_DEPTH:
            skipped.append({"path": rel, "reason": f"nested deeper than {MAX_DEPTH} levels"})
            continue
        try:
            child = os.open(name, _DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            skipped.append({"path": rel, "reason": f"cannot enter: {exc.strerror}"})
            continue
        try:
            now = os.fstat(child)
            if (now.st_dev, now.st_ino) == (info.st_dev, info.st_ino):
                yield from _walk(child, rel + "/", depth + 1, skipped)
            else:
                skipped.append({"path": rel, "reason": "replaced while being read"})
        finally:
            os.close(child)


def open_regular(entry: TreeEntry) -> int:
    """Open the regular file ``entry`` without following a link; refuse a swapped entry."""
    fd = os.open(entry.name, _FILE_FLAGS, dir_fd=entry.dir_fd)
    now = os.fstat(fd)
    if not stat.S_ISREG(now.st_mode) or now.st_ino != entry.info.st_ino:
        os.close(fd)
        raise UnsafeArchive(f"{entry.rel!r} changed while being read")
    return fd


def _probe(rel: str) -> str:
    """``rel`` with a top-level ``_vq`` renamed (same depth): the reserved-name rule
    protects writes of submitted sources, not reads of a workspace."""
    head, sep, rest = rel.partition("/")
    return f"x{head}{sep}{rest}" if head == META_DIR else rel


def link_stays_inside(rel: str, target: str) -> bool:
    """Whether a symlink at ``rel`` with ``target`` provably resolves inside the tree."""
    try:
        check_member(_probe(rel), MemberKind.SYMLINK, target)
    except UnsafeArchive:
        return False
    return True


def artifact_parts(name: str) -> list[str]:
    """The components of a ``--name`` path; UnsafeArchive unless plainly relative."""
    try:
        check_member(_probe(name), MemberKind.FILE)
    except UnsafeArchive as exc:
        reason = exc.message.removeprefix(f"entry {_probe(name)!r} ")
        raise UnsafeArchive(
            f"--name {name!r} is refused: it {reason}",
            hint="give a path relative to the workspace, such as results/out.log",
        ) from None
    return [part for part in name.split("/") if part not in ("", ".")]


# --- what the sidecars say ---------------------------------------------------------------
def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


_FIXED = {
    JobState.PENDING: ("pending", "waiting to run"),
    JobState.KILLED: ("killed", "killed"),
    JobState.OOM_KILLED: ("oom", "killed for exceeding its memory limit"),
    JobState.TIME_EXCEEDED: ("time_limit", "killed at its wall-time limit"),
    JobState.STARVED: ("starved", "starved"),
    JobState.FAILED: ("unknown", "failed; the exit code is unknown"),
}


def _outcome(spec: JobSpec) -> tuple[str, str]:
    code = spec.exit_code
    if spec.state is JobState.RUNNING:
        return "running", f"running since {_iso(spec.started_at)}"
    if spec.state is JobState.SUSPENDED:
        return "running", f"suspended (paused) since {_iso(spec.paused_at)}"
    if spec.state is JobState.COMPLETED:
        return "completed", f"completed with exit code {code or 0}"
    if spec.state is JobState.FAILED and code is not None:
        if 128 < code < 160:
            return "signal", f"killed by {signal_name(code - 128)} (exit code {code})"
        return "nonzero_exit", f"exited with code {code}"
    category, default = _FIXED.get(spec.state, ("aborted", "aborted; the outcome is unknown"))
    return category, spec.failure_reason or default


def diagnose(spec: JobSpec) -> dict[str, Any]:
    """The structured diagnosis: ``category``, one-line ``summary``, ``signal``, ``hint``."""
    category, text = _outcome(spec)
    code = spec.exit_code
    tail_lines = [line.strip() for line in (spec.failure_tail or "").splitlines() if line.strip()]
    return {
        "category": category,
        "summary": f"{spec.state.value}: {text}",
        "signal": signal_name(code - 128) if code is not None and 128 < code < 160 else None,
        "hint": tail_lines[-1] if tail_lines else None,
    }


def terminal_diagnosis(spec: JobSpec) -> dict[str, Any]:
    """The ``vq.terminal-diagnosis.v1`` document of ``spec``."""
    return {
        "schema": DIAGNOSIS_SCHEMA,
        "job_id": spec.id,
        "job_name": spec.job_name,
        "state": spec.state.value,
        "exit_code": spec.exit_code,
        "failure_reason": spec.failure_reason,
        "failure_tail": spec.failure_tail,
        "scheduler_state": spec.scheduler_state,
        "scheduler_target": spec.scheduler_target,
        "scheduler_job_id": spec.scheduler_job_id,
        "submitted_at": _iso(spec.submitted_at),
        "started_at": _iso(spec.started_at),
        "finished_at": _iso(spec.finished_at),
        "diagnosis": diagnose(spec),
    }


def default_dest_name(spec: JobSpec) -> str:
    """``<job_name>-<id>`` when named, else ``<id>`` (also the archive's stem, §2.4)."""
    if not spec.job_name:
        return spec.id
    return "".join("_" if ch in "/\0" else ch for ch in spec.job_name) + "-" + spec.id


# --- results ------------------------------------------------------------------------------
@dataclass
class FetchResult:
    """What one fetch did (the ``vq fetch --json`` document)."""

    job_id: str
    source_kind: SourceKind
    source_path: str
    dest: str
    artifact: str | None = None
    files: int = 0
    bytes: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)
    replaced: bool = False
    manifest: dict[str, Any] | None = None
    last_fetched_at: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _source_path(ctx: ServiceContext, job_id: str, kind: SourceKind) -> Path:
    return ctx.paths.workspace(job_id) if kind == "workspace" else ctx.paths.workdir(job_id)


def _open_job_source(ctx: ServiceContext, spec: JobSpec, kind: SourceKind) -> int:
    try:
        return open_source(_source_path(ctx, spec.id, kind), kind)
    except NotFound as exc:
        if spec.archive_path:
            raise NotFound(
                f"the {kind} of job {spec.id} is gone: archived to {spec.archive_path}"
                f" at {_iso(spec.archived_at)}",
                hint=f"extract it: tar -xjf {spec.archive_path}",
            ) from None
        if kind == "workdir" and spec.workdir_swept_at:
            raise NotFound(
                f"the workdir of job {spec.id} was swept at {_iso(spec.workdir_swept_at)}",
                hint="the workspace is still there: `vq fetch ID` without --workdir",
            ) from None
        hint = "a job gets a workdir when it is dispatched" if kind == "workdir" else None
        raise NotFound(f"job {spec.id}: {exc.message}", hint=hint) from None


def _copy_file(reader: IO[bytes], target: Path, info: os.stat_result) -> int:
    out_fd = os.open(target, _CREATE, 0o600)
    with os.fdopen(out_fd, "wb") as out:
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
            except (FileNotFoundError, UnsafeArchive):
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
            result.skipped.append({"path": entry.rel, "reason": "special file (not copied)"})
    for path, info in reversed(directories):
        os.chmod(path, stat.S_IMODE(info.st_mode) | stat.S_IRWXU)
        os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))


def _clear(path: Path) -> bool:
    """Remove whatever is at ``path`` (never following a link); whether anything was."""
    if not os.path.lexists(path):
        return False
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
    return True


# --- previous snapshots -------------------------------------------------------------------
def _read_manifest(dest: Path) -> dict[str, Any] | None:
    try:
        if not stat.S_ISDIR(os.lstat(dest / META_DIR).st_mode):
            return None
        raw = json.loads(read_bytes_limited(dest / META_DIR / MANIFEST_NAME, 1 << 22))
    except (OSError, ValueError):
        return None
    return raw if isinstance(raw, dict) and raw.get("schema") == MANIFEST_SCHEMA else None


def _previous_fetch(dest: Path, job_id: str, kind: SourceKind) -> dict[str, Any] | None:
    """The manifest of an earlier fetch of this job and kind at ``dest``; None if ``dest``
    does not exist; Conflict if it is anything else."""
    try:
        info = os.lstat(dest)
    except FileNotFoundError:
        return None
    manifest = _read_manifest(dest) if stat.S_ISDIR(info.st_mode) else None
    if manifest is None or manifest.get("job_id") != job_id:
        raise Conflict(
            f"{dest} already exists and is not a fetch of job {job_id}",
            hint="name a DEST that does not exist yet (vq creates it), or remove that one",
        )
    if manifest.get("source_kind") != kind:
        raise Conflict(
            f"{dest} holds a fetch of job {job_id}'s {manifest.get('source_kind')}, not its {kind}",
            hint=f"fetch the {kind} into another DEST",
        )
    return manifest


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux ``renameat2(RENAME_EXCHANGE)``); False if unsupported."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint,
    ]
    renameat2.restype = ctypes.c_int
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _publish(tmp: Path, dest: Path, replace: bool) -> None:
    """Move the finished snapshot ``tmp`` to ``dest`` (swapping out an earlier one)."""
    if not replace:
        try:
            os.rename(tmp, dest)
        except OSError as exc:
            raise Conflict(f"{dest} appeared while the fetch was being built") from exc
    elif not _exchange(tmp, dest):  # fallback: two renames, DEST briefly absent
        old = dest.with_name(f".{dest.name}.vq-old-{secrets.token_hex(4)}")
        os.rename(dest, old)
        try:
            os.rename(tmp, dest)
        except OSError:
            os.rename(old, dest)
            raise
        tmp = old
    if replace:
        shutil.rmtree(tmp, ignore_errors=True)
    fsync_dir(dest.parent)


# --- the use cases ------------------------------------------------------------------------
def fetch_tree(
    ctx: ServiceContext,
    job_id: str,
    dest: Path | None = None,
    *,
    kind: SourceKind = "workspace",
    cwd: Path | None = None,
) -> FetchResult:
    """Copy the job's workspace (or workdir) to ``dest`` with both sidecars (see module)."""
    spec = ctx.store.read(job_id)
    target = Path(os.path.abspath(dest or (cwd or Path.cwd()) / default_dest_name(spec)))
    previous = _previous_fetch(target, job_id, kind)
    source = _source_path(ctx, job_id, kind)
    result = FetchResult(job_id, kind, str(source), str(target), replaced=previous is not None)
    started = ctx.now()
    tmp: Path | None = None
    try:
        root_fd = _open_job_source(ctx, spec, kind)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.vq-fetch-", dir=target.parent))
            _copy_tree(root_fd, tmp, result)
        finally:
            os.close(root_fd)
    except (VqError, OSError) as exc:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        error = exc if isinstance(exc, VqError) else VqError(f"copying {source} failed: {exc}")
        if previous is not None:
            previous.update(
                stale=True, refresh_error=error.message, refresh_attempted_at=started.isoformat()
            )
            with contextlib.suppress(OSError):
                atomic_write_json(target / META_DIR / MANIFEST_NAME, previous)
            error.hint = f"{target} keeps the previous snapshot, now marked stale. " + (
                error.hint or ""
            )
        raise error from None
    try:
        meta = tmp / META_DIR
        if os.path.lexists(meta) and (meta.is_symlink() or not meta.is_dir()):
            _clear(meta)
            result.skipped.append({"path": META_DIR, "reason": "not a directory; replaced"})
        meta.mkdir(exist_ok=True)
        for name in (MANIFEST_NAME, DIAGNOSIS_NAME):
            _clear(meta / name)
        stamp = started.isoformat()
        result.manifest = {
            "schema": MANIFEST_SCHEMA,
            "job_id": job_id,
            "fetched_at": stamp,
            "refresh_attempted_at": stamp,
            "source_host": socket.gethostname(),
            "source_kind": kind,
            "source_path": str(source),
            "transport": "local",
            "stale": False,
            "refresh_error": None,
            "skipped": result.skipped,
        }
        atomic_write_json(meta / MANIFEST_NAME, result.manifest)
        atomic_write_json(meta / DIAGNOSIS_NAME, terminal_diagnosis(spec))
        if previous is not None:
            _previous_fetch(target, job_id, kind)  # still ours, right before the swap
        _publish(tmp, target, replace=previous is not None)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if kind == "workspace" and spec.is_terminal:
        result.last_fetched_at = _iso(_stamp_fetched(ctx, spec))
    return result


def _stamp_fetched(ctx: ServiceContext, initial: JobSpec) -> datetime | None:
    """Record ``last_fetched_at`` if the spec still is the one that was fetched (§6.1)."""
    when = ctx.now()

    def mutate(spec: JobSpec) -> JobSpec | None:
        if spec.submitted_at != initial.submitted_at or spec.state is not initial.state:
            return None
        spec.last_fetched_at = when
        return spec

    return when if ctx.store.update(initial.id, mutate).last_fetched_at == when else None


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

    ``dest`` is a file path or an existing directory (default: the current directory).
    An existing file at the target is replaced atomically, like ``cp``.
    """
    parts = artifact_parts(name)
    spec = ctx.store.read(job_id)
    fds = [_open_job_source(ctx, spec, kind)]
    try:
        for index, part in enumerate(parts):
            here = "/".join(parts[: index + 1])
            try:
                info = os.stat(part, dir_fd=fds[-1], follow_symlinks=False)
            except (FileNotFoundError, NotADirectoryError):
                raise NotFound(
                    f"job {job_id} has no {here!r} in its {kind}",
                    hint=f"`vq fetch {job_id}` copies the whole {kind}",
                ) from None
            if stat.S_ISLNK(info.st_mode):
                raise UnsafeArchive(
                    f"{here!r} in the {kind} of job {job_id} is a symbolic link; not followed",
                    hint="--name fetches regular files only; name the file the link points to",
                )
            last = index == len(parts) - 1
            if last and not stat.S_ISREG(info.st_mode):
                raise InvalidInput(f"{here!r} is not a regular file", hint="name one file")
            if not last and not stat.S_ISDIR(info.st_mode):
                raise NotFound(f"{here!r} in the {kind} of job {job_id} is not a directory")
            entry = TreeEntry(here, part, fds[-1], info)
            fds.append(open_regular(entry) if last else os.open(part, _DIR_FLAGS, dir_fd=fds[-1]))
        file_fd = fds.pop()
    finally:
        for fd in fds:
            os.close(fd)
    with os.fdopen(file_fd, "rb") as reader:
        target = _artifact_target(dest, parts[-1], cwd or Path.cwd())
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.vq-fetch-{secrets.token_hex(4)}")
        try:
            size = _copy_file(reader, tmp, os.fstat(reader.fileno()))
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
    source = _source_path(ctx, job_id, kind) / "/".join(parts)
    return FetchResult(job_id, kind, str(source), str(target), name, files=1, bytes=size)


def _artifact_target(dest: Path | None, basename: str, cwd: Path) -> Path:
    if dest is None:
        target = cwd / basename
    elif dest.is_dir():
        target = dest / basename
    else:
        target = dest
    target = Path(os.path.abspath(target))
    if target.is_dir():
        raise Conflict(f"{target} is a directory", hint="name a file path or another directory")
    return target
