"""Snapshots of a ``vq fetch`` tree copy (§4.6): sidecars, earlier fetches, publishing.

The tree copy itself is :mod:`vq.fetch.local`; this module holds what surrounds it:

* :func:`fetch_manifest` — the ``vq.fetch-manifest.v1`` document (also written into
  ``outputs.tar.gz`` by :mod:`vq.services.outputs`); :func:`write_sidecars` writes it and
  ``_vq/terminal-diagnosis.json`` into a finished snapshot, replacing same-named files.
* :func:`read_sidecar` — the one read of a snapshot's ``_vq`` sidecars (no link followed,
  no FIFO opened blocking, at most :data:`SIDECAR_MAX_BYTES`).
* :func:`previous_fetch` — recognises DEST as an earlier fetch of the same job and source
  kind (its manifest), None when DEST is absent, :class:`~vq.errors.Conflict` otherwise.
* :func:`publish` — moves a snapshot to DEST by one rename (first fetch) or an atomic
  exchange (refetch; two renames where the kernel has no ``RENAME_EXCHANGE``), so DEST
  always holds one whole snapshot.
"""

from __future__ import annotations

import ctypes
import errno
import os
import secrets
import shutil
import socket
import stat
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, TypedDict, cast

from vq._fs import atomic_write_json, fsync_dir, read_json_regular
from vq.domain.archive_rules import META_DIR
from vq.domain.diagnosis import terminal_diagnosis
from vq.domain.spec import JobSpec
from vq.errors import Conflict

__all__ = [
    "DIAGNOSIS_NAME",
    "MANIFEST_NAME",
    "MANIFEST_SCHEMA",
    "SourceKind",
    "clear",
    "fetch_manifest",
    "previous_fetch",
    "publish",
    "read_sidecar",
    "write_sidecars",
]

SourceKind = Literal["workspace", "workdir"]


class FetchManifest(TypedDict):
    """A ``vq.fetch-manifest.v1`` document (``_vq/fetch-manifest.json`` of a snapshot)."""

    schema: str
    job_id: str
    fetched_at: str
    refresh_attempted_at: str
    source_host: str
    source_kind: SourceKind
    source_path: str
    transport: str
    stale: bool
    refresh_error: str | None
    skipped: list[dict[str, str]]


MANIFEST_SCHEMA = "vq.fetch-manifest.v1"
MANIFEST_NAME = "fetch-manifest.json"
DIAGNOSIS_NAME = "terminal-diagnosis.json"
#: The largest sidecar read back; a larger file is not one of ours.
SIDECAR_MAX_BYTES = 1 << 22


def clear(path: Path) -> None:
    """Remove whatever is at ``path``, never following a link."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()


def read_sidecar(snapshot: Path, name: str) -> dict[str, Any] | None:
    """The JSON object in ``snapshot/_vq/name``, or None when ``_vq`` is not a real
    directory or the sidecar is not a regular file of at most :data:`SIDECAR_MAX_BYTES`
    holding an object. Read through :func:`vq._fs.read_json_regular`: a link is never
    followed, a FIFO never blocks, and nothing found is changed."""
    try:
        if not stat.S_ISDIR(os.lstat(snapshot / META_DIR).st_mode):
            return None
        raw = read_json_regular(snapshot / META_DIR / name, SIDECAR_MAX_BYTES)
    except (OSError, ValueError):
        return None
    return raw if isinstance(raw, dict) else None


def read_manifest(dest: Path) -> FetchManifest | None:
    """The fetch manifest of the snapshot at ``dest`` (see :func:`read_sidecar`), or None
    when there is none of schema :data:`MANIFEST_SCHEMA` (one vq wrote)."""
    raw = read_sidecar(dest, MANIFEST_NAME)
    if raw is None or raw.get("schema") != MANIFEST_SCHEMA:
        return None
    return cast(FetchManifest, raw)


def previous_fetch(dest: Path, job_id: str, kind: SourceKind) -> FetchManifest | None:
    """The manifest of an earlier fetch of this job and kind at ``dest``; None when
    ``dest`` does not exist; Conflict when it is anything else."""
    try:
        info = os.lstat(dest)
    except FileNotFoundError:
        return None
    manifest = read_manifest(dest) if stat.S_ISDIR(info.st_mode) else None
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


def exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (``renameat2(RENAME_EXCHANGE)``); False if unsupported."""
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
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def publish(tmp: Path, dest: Path, replace: bool) -> None:
    """Move the finished snapshot ``tmp`` to ``dest``, swapping out an earlier one."""
    if not replace:
        try:
            os.rename(tmp, dest)
        except OSError as exc:
            raise Conflict(f"{dest} appeared while the fetch was being built") from exc
    elif not exchange(tmp, dest):
        old = dest.with_name(f".{dest.name}.vq-old-{secrets.token_hex(4)}")
        os.rename(dest, old)
        try:
            os.rename(tmp, dest)
        except OSError:
            os.rename(old, dest)
            raise
        tmp = old
    if replace:
        shutil.rmtree(tmp, ignore_errors=True)  # tmp now holds the old snapshot
    fsync_dir(dest.parent)


def fetch_manifest(
    job_id: str,
    kind: SourceKind,
    source_path: str,
    skipped: list[dict[str, str]],
    started: datetime,
    transport: str = "local",
) -> FetchManifest:
    """The ``vq.fetch-manifest.v1`` document (also in ``outputs.tar.gz``, §10.3)."""
    return {
        "schema": MANIFEST_SCHEMA,
        "job_id": job_id,
        "fetched_at": started.isoformat(),
        "refresh_attempted_at": started.isoformat(),
        "source_host": socket.gethostname(),
        "source_kind": kind,
        "source_path": source_path,
        "transport": transport,
        "stale": False,
        "refresh_error": None,
        "skipped": skipped,
    }


def write_sidecars(
    tmp: Path,
    spec: JobSpec,
    kind: SourceKind,
    source_path: str,
    skipped: list[dict[str, str]],
    started: datetime,
) -> FetchManifest:
    """Write both sidecars into the snapshot ``tmp`` (replacing same-named workspace files,
    and a ``_vq`` that is not a directory); the manifest written."""
    meta = tmp / META_DIR
    if os.path.lexists(meta) and (meta.is_symlink() or not meta.is_dir()):
        clear(meta)
        skipped.append({"path": META_DIR, "reason": "not a directory; replaced"})
    meta.mkdir(exist_ok=True)
    for name in (MANIFEST_NAME, DIAGNOSIS_NAME):
        clear(meta / name)
    manifest = fetch_manifest(spec.id, kind, source_path, skipped, started)
    atomic_write_json(meta / MANIFEST_NAME, manifest)
    atomic_write_json(meta / DIAGNOSIS_NAME, terminal_diagnosis(spec))
    return manifest
