"""``vq fetch HOST ID [DEST] [--workdir]``: a remote snapshot, extracted here (§4.6, §6.1).

Contract:

- The owning host streams its snapshot (``vq fetch ID --tar-stream``: the workspace or
  workdir with both sidecars); it is extracted as it arrives into a hidden temp directory
  next to DEST, every member checked before it is written (no absolute names, no ``..``,
  no links leaving the tree, no devices or FIFOs), and counts only once the whole stream
  was read and the remote command ended with status 0
  (:func:`vq.remote.snapshot_stream.receive_snapshot`). A refused, truncated or failed
  stream leaves nothing visible: the temp directory is removed.
- The streamed sidecars (``_vq/fetch-manifest.json``, ``_vq/terminal-diagnosis.json``)
  are read only through :func:`vq.fetch.snapshot.read_sidecar`: a link is never
  followed, an oversized file is not read, and one that cannot be read counts as absent;
  a ``_vq`` that is a link or not a directory refuses the snapshot.
- ``_vq/fetch-manifest.json`` is rewritten by this receiving side: ``transport: "ssh"``,
  ``source_host`` = the configured host name, the remote ``source_path`` and ``skipped``.
- DEST is published as a local fetch publishes it (one rename, or an exchange with a
  previous fetch of the same job); a DEST that is not such a fetch is refused.
- Only after publishing, a workspace fetch of a terminal job is acknowledged remotely
  (``vq fetch ID --ack-fetched SUBMITTED_AT|STATE``, identity taken from the streamed
  ``terminal-diagnosis.json``); a failed or ambiguous acknowledgement makes the command
  exit non-zero but leaves the published tree as it is (not stale).
- A refresh that fails marks a previous snapshot ``stale`` with the error, as locally.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO, TypedDict

from vq._fs import atomic_write_json
from vq.domain.archive_rules import META_DIR
from vq.errors import UnsafeArchive, UsageError, VqError
from vq.fetch.local import default_dest_name
from vq.fetch.snapshot import (
    DIAGNOSIS_NAME,
    MANIFEST_NAME,
    FetchManifest,
    fetch_manifest,
    previous_fetch,
    publish,
    read_sidecar,
)
from vq.protocol.remote_answers import FetchAckAnswer, StatusAnswer
from vq.remote.host import RemoteHost, job_words
from vq.remote.snapshot_stream import receive_snapshot

__all__ = ["fetch_remote", "fetch_workspace_copy", "skipped_entries"]


def _manifest(tmp: Path, host: RemoteHost, job_id: str, kind: str) -> FetchManifest:
    """Rewrite the streamed snapshot's fetch manifest as this receiving side's.

    The remote's ``source_path`` and ``skipped`` are taken from its manifest when that is a
    readable regular file (:func:`read_sidecar`); a ``_vq`` that is a link or not a
    directory is refused (UnsafeArchive): the manifest is never written through a link."""
    meta = tmp / META_DIR
    if os.path.lexists(meta) and not stat.S_ISDIR(os.lstat(meta).st_mode):
        raise UnsafeArchive(f"the snapshot's {META_DIR} is a link or not a directory")
    remote = read_sidecar(tmp, MANIFEST_NAME) or {}
    manifest = fetch_manifest(
        job_id,
        "workdir" if kind == "workdir" else "workspace",
        _text(remote.get("source_path")),
        skipped_entries(remote),
        datetime.now(UTC),
        transport="ssh",
    )
    manifest["source_host"] = host.name
    meta.mkdir(exist_ok=True)
    atomic_write_json(meta / MANIFEST_NAME, manifest)
    return manifest


class RemoteFetchJSON(TypedDict):
    """``vq fetch HOST ID --json``."""

    id: str
    host: str
    kind: str
    dest: str
    replaced: bool
    manifest: FetchManifest
    last_fetched_at: str | None


def fetch_remote(host: RemoteHost, params: dict[str, Any], *, out: TextIO) -> int:
    """Fetch a remote job's workspace or workdir (see the module docstring)."""
    if params.get("name") is not None:
        raise UsageError(
            "vq fetch HOST ID --name is not supported yet",
            hint=f"fetch the workspace (vq fetch {host.name} ID), then take the file",
        )
    if params.get("group") is not None:
        raise UsageError(
            f"vq fetch {host.name} --group is not supported yet",
            hint=f"fetch each element: `vq list {host.name} --group G` shows their ids",
        )
    given = params.get("job_id")
    if given is None:
        raise UsageError("no job given", hint=f"vq fetch {host.name} ID [DEST]")
    from vq.domain.ids import is_id_or_prefix, resolve_prefix

    if not is_id_or_prefix(given):
        resolve_prefix(given, ())  # raises the usual "is not a job id" error
    job_id: str = given.strip().lower()
    kind = "workdir" if params.get("workdir") else "workspace"
    status = host.run_json(job_words(["status", "--json"], [job_id]), StatusAnswer)
    if not status["id"].startswith(job_id):
        raise host.bad_answer(["status"], f"it describes job {status['id']}, not {job_id}")
    job_id = status["id"]  # the full id the host resolved a prefix to
    dest = params.get("dest")
    if dest is None:
        from vq.domain.spec import load_spec

        dest = Path.cwd() / default_dest_name(load_spec(status, source=f"{host.name}:{job_id}"))
    target = Path(os.path.abspath(dest))
    previous = previous_fetch(target, job_id, kind)  # type: ignore[arg-type]
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.vq-fetch-", dir=target.parent))
    words = job_words(
        ["fetch", "--tar-stream", *(["--workdir"] if kind == "workdir" else [])], [job_id]
    )
    try:
        receive_snapshot(host, words, tmp)
        manifest = _manifest(tmp, host, job_id, kind)
        publish(tmp, target, replace=previous is not None)
    except VqError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if previous is not None:
            previous["stale"] = True
            previous["refresh_error"] = exc.message
            previous["refresh_attempted_at"] = datetime.now(UTC).isoformat()
            with contextlib.suppress(OSError):
                atomic_write_json(target / META_DIR / MANIFEST_NAME, previous)
        raise
    payload: RemoteFetchJSON = {
        "id": job_id,
        "host": host.name,
        "kind": kind,
        "dest": str(target),
        "replaced": previous is not None,
        "manifest": manifest,
        "last_fetched_at": None,
    }
    code = 0
    if kind == "workspace":
        code = _acknowledge(host, job_id, target, payload)
    if params.get("as_json"):
        out.write(json.dumps(payload, indent=2) + "\n")
    else:
        verb = "refreshed" if payload["replaced"] else "fetched"
        out.write(f"{verb} the {kind} of job {job_id} from {host.name} → {target}\n")
    out.flush()
    return code


def fetch_workspace_copy(host: RemoteHost, job_id: str, dest: Path) -> list[dict[str, str]]:
    """Extract the job's workspace snapshot at ``dest`` (which must not exist) with one
    SSH call, every member checked as for ``vq fetch HOST ID``; the entries the host
    skipped (links, special files) as ``{"path", "reason"}``.

    For a caller that keeps its own record of what it fetched (the campaign controller):
    no status call, and, like an artifact (``--name``) fetch, no ``last_fetched_at``
    acknowledgement. ``dest`` appears whole or not at all.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.vq-fetch-", dir=dest.parent))
    try:
        receive_snapshot(host, job_words(["fetch", "--tar-stream"], [job_id]), tmp)
        remote = read_sidecar(tmp, MANIFEST_NAME) or {}
        os.rename(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return skipped_entries(remote)


def skipped_entries(remote: dict[str, Any]) -> list[dict[str, str]]:
    """The ``skipped`` list of a remote fetch manifest as ``{"path", "reason"}`` strings.

    The manifest comes from the remote host and is not trusted to be well formed: an
    entry that is not an object is dropped, and a ``skipped`` that is not a list (a
    string would otherwise become a list of its characters) reads as none."""
    skipped = remote.get("skipped")
    return [
        {"path": _text(item.get("path")), "reason": _text(item.get("reason"))}
        for item in (skipped if isinstance(skipped, list) else [])
        if isinstance(item, dict)
    ]


def _text(value: object) -> str:
    """A manifest field as text: a string as it is, anything else (absent, a number, a
    list) as empty, so a malformed remote manifest never reads as a made-up value."""
    return value if isinstance(value, str) else ""


def _acknowledge(host: RemoteHost, job_id: str, target: Path, payload: RemoteFetchJSON) -> int:
    """Stamp ``last_fetched_at`` remotely for the identity in the streamed diagnosis."""
    diagnosis = read_sidecar(target, DIAGNOSIS_NAME) or {}
    if "submitted_at" not in diagnosis or "state" not in diagnosis:
        return _ack_failed("the snapshot has no readable terminal diagnosis")
    submitted, state = diagnosis["submitted_at"], diagnosis["state"]
    if state in ("PENDING", "RUNNING", "SUSPENDED"):
        return 0  # not terminal: nothing to acknowledge
    if not submitted:
        return _ack_failed("the job has no recorded submitted_at; not acknowledged")
    try:
        words = job_words(["fetch", "--ack-fetched", f"{submitted}|{state}"], [job_id])
        answer = host.run_json(words, FetchAckAnswer)
    except VqError as exc:
        return _ack_failed(exc.message, exc.exit_code)
    payload["last_fetched_at"] = answer.get("last_fetched_at")
    return 0


def _ack_failed(why: str, code: int = 1) -> int:
    import sys

    sys.stderr.write(f"vq: error: fetched, but last_fetched_at was not recorded: {why}\n")
    return code
