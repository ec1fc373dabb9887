"""Idempotent submission (§4.8): ``--idempotency-key KEY`` binds a key to one intent.

* The same key with the same canonical intent returns the original job (exit 0), even
  after that job was deleted — deleting a job never frees its key.
* The same key with a different intent is a hard :class:`~vq.errors.Conflict`.
* Under a per-key ``flock``, the spec is published first (carrying the key hash and the
  intent digest) and the immutable claim ``<state-root>/idempotency/<key-hash>.json``
  second. A crash between the two is repaired on the next try by a bounded, no-follow
  scan of the queue for a spec carrying the key hash.

The canonical intent covers the command, working directory, resources, admission fields,
name, tags, dependencies, retry/rerun/cleanup policy and a digest of the payload's
*content* (not its path). A relative ``--not-before 1h`` enters the intent as asked (the
delay), not as the time it resolved to, so repeating the command repeats the intent.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, cast

from vq._fs import (
    NotRegularFile,
    atomic_write_json,
    open_regular_path,
    read_bytes_limited,
    read_json_regular,
)
from vq.domain.spec import JobSpec, SpecFields, load_spec
from vq.errors import Conflict, CorruptSpec, InvalidInput, PermissionDenied
from vq.protocol.messages import SubmitParams
from vq.services.context import ServiceContext

__all__ = [
    "CONTENT_DIGEST_LABELS",
    "KeyedSubmit",
    "intent_digest",
    "key_hash",
    "source_digest",
    "submit_keyed",
]

#: ``source_label`` of sources whose digest covers the tar's *contents* (names, kinds, link
#: targets, bytes), not its bytes: a workspace packed again on another host (``vq submit
#: HOST``, whose remote side labels it so) carries fresh member times, the same intent.
CONTENT_DIGEST_LABELS = frozenset({"ssh: source tar on stdin"})

_MAX_SCANNED_SPEC = 4 * 1024 * 1024


@dataclass(frozen=True)
class KeyedSubmit:
    job_id: str
    spec: JobSpec | None  # None when the original job has since been deleted
    replayed: bool


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _file_digest(path: Path, into: Any, *, follow: bool = False) -> None:
    """Hash a regular file's bytes. A FIFO, device or socket is refused at once (opened
    without blocking, never read): it has no content to hash and may never end."""
    try:
        fd = open_regular_path(path, follow=follow)
    except NotRegularFile as exc:
        raise InvalidInput(
            f"source entry {str(path)!r} {exc.strerror}",
            hint="remove special files (FIFOs, devices, sockets) from the source",
        ) from None
    with os.fdopen(fd, "rb") as handle:
        while chunk := handle.read(1 << 20):
            into.update(chunk)


def source_digest(source: str | None) -> str | None:
    """sha256 of the payload's content: a file's bytes, or a directory tree's names,
    kinds and bytes (symlinks by their target text). None without a source."""
    if source is None:
        return None
    root = Path(source)
    digest = hashlib.sha256()
    if not root.is_dir():
        _file_digest(root, digest, follow=True)
        return digest.hexdigest()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames + [d for d in dirnames if (Path(dirpath) / d).is_symlink()]):
            path = Path(dirpath) / name
            digest.update(str(path.relative_to(root)).encode() + b"\0")
            if path.is_symlink():
                digest.update(b"L" + os.readlink(path).encode())
            else:
                digest.update(b"F")
                _file_digest(path, digest)
    return digest.hexdigest()


def _tar_content_digest(source: str) -> str:
    import tarfile

    digest = hashlib.sha256()
    with tarfile.open(source, "r:*") as tar:
        for info in sorted(tar.getmembers(), key=lambda m: m.name):
            digest.update(info.name.removeprefix("./").encode() + b"\0")
            if info.issym() or info.islnk():
                digest.update(b"L" + info.linkname.encode())
            elif info.isfile():
                digest.update(b"F")
                reader = tar.extractfile(info)
                while reader is not None and (block := reader.read(1 << 20)):
                    digest.update(block)
            else:
                digest.update(b"D" if info.isdir() else b"O")
    return digest.hexdigest()


def intent_digest(params: SubmitParams) -> str:
    canonical = params.model_dump(
        mode="json",
        exclude={
            "idempotency_key",
            "source",
            "source_label",
            "not_before_requested",
            "environment",
            "submitter",
        },
        exclude_none=False,
    )
    if not params.recover_on_reboot:  # the default: keeps the digests of older claims
        canonical.pop("recover_on_reboot", None)
    if params.scheduler_target is None:  # absent: keeps the digests of older claims
        canonical.pop("scheduler_target", None)
    for name in ("runtime_root", "runtime_artifact"):
        if getattr(params, name) is None:  # absent: keeps the digests of older claims
            canonical.pop(name, None)
    if params.scheduler_pack is None:  # absent: keeps the digests of older claims
        canonical.pop("scheduler_pack", None)
    if params.expected_sha is None:  # absent: keeps the digests of older claims
        canonical.pop("expected_sha", None)
    else:
        canonical["expected_sha"] = params.expected_sha.lower()
    if params.not_before_requested is not None:  # what the user asked for: the delay
        canonical["not_before"] = {"delay": params.not_before_requested}
    canonical["depends_on"] = sorted(set(params.depends_on))
    canonical["depends_on_any"] = sorted(set(params.depends_on_any))
    if params.source and params.source_label in CONTENT_DIGEST_LABELS:
        canonical["source_digest"] = _tar_content_digest(params.source)
    else:
        canonical["source_digest"] = source_digest(params.source)
    blob = json.dumps(canonical, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


def _ensure_claims_dir(ctx: ServiceContext) -> None:
    """Create ``idempotency/`` if missing. A multi-user owner cannot create it in the
    root-owned ``users/<uid>`` (``vq admin user add`` provisions it): PermissionDenied
    naming that command, never an internal error."""
    directory = ctx.paths.idempotency_dir
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except PermissionError:
        multi_user = ctx.paths.owner_dir is not None
        raise PermissionDenied(
            f"cannot create {directory}, where keyed submits keep their claims: permission denied",
            hint="ask an administrator to run `vq admin user add USER` (it provisions it)"
            if multi_user
            else f"check the permissions of {directory.parent}",
        ) from None


def _read_claim(path: Path) -> IdempotencyClaim | None:
    """The claim at ``path``; None when there is none. Anything else that is not a claim
    (a FIFO, odd bytes, JSON too deep, an object without a job id) is a CorruptSpec:
    never treated as absent, so the key is never claimed a second time."""
    try:
        claim = read_json_regular(path, 65536)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise CorruptSpec(
            f"idempotency claim {path} is unreadable: {exc}",
            hint="inspect the file; vq never rewrites an existing claim",
        ) from exc
    if not isinstance(claim, dict) or not isinstance(claim.get("job_id"), str):
        raise CorruptSpec(
            f"idempotency claim {path} is not a claim (no job id)",
            hint="inspect the file; vq never rewrites an existing claim",
        )
    return cast(IdempotencyClaim, claim)


def _find_published(ctx: ServiceContext, hashed: str) -> JobSpec | None:
    """The spec carrying ``hashed`` (crash repair). Bounded, no-follow, substring first."""
    needle = f'"idempotency_key_hash": "{hashed}"'.encode()
    for job_id in ctx.store.list_ids():
        path = ctx.paths.spec(job_id)
        try:
            data = read_bytes_limited(path, _MAX_SCANNED_SPEC)
        except OSError:
            continue
        if needle in data:
            try:
                return load_spec(data, source=f"spec {path}")
            except CorruptSpec:
                continue
    return None


def submit_keyed(
    ctx: ServiceContext, params: SubmitParams, create: Callable[[SpecFields], JobSpec]
) -> KeyedSubmit:
    """Create the job once per key (see module contract). ``create`` gets the extra spec
    fields to store and must write the spec durably before returning it."""
    assert params.idempotency_key is not None
    hashed = key_hash(params.idempotency_key)
    digest = intent_digest(params)
    _ensure_claims_dir(ctx)
    claim_path = ctx.paths.idempotency_claim(hashed)
    lock_fd = os.open(
        ctx.paths.idempotency_lock(hashed), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600
    )
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        claim: Mapping[str, Any] | None = _read_claim(claim_path)  # raw: as the file says
        if claim is None:
            published = _find_published(ctx, hashed)
            if published is not None:  # the spec landed but the claim did not: repair
                claim = _claim(published.id, published.idempotency_intent_digest, hashed)
                atomic_write_json(claim_path, claim)
        if claim is not None:
            if claim.get("intent_digest") != digest:
                raise Conflict(
                    f"idempotency key already used for a different submission "
                    f"(job {claim.get('job_id')})",
                    hint="use a new key for a new intent; the same key only repeats "
                    "the exact same submit",
                    reference="idempotency-conflict",
                )
            job_id = str(claim["job_id"])
            spec = ctx.store.read(job_id) if ctx.store.exists(job_id) else None
            return KeyedSubmit(job_id, spec, replayed=True)
        spec = create({"idempotency_key_hash": hashed, "idempotency_intent_digest": digest})
        atomic_write_json(claim_path, _claim(spec.id, digest, hashed))
        return KeyedSubmit(spec.id, spec, replayed=False)
    finally:
        os.close(lock_fd)


class IdempotencyClaim(TypedDict):
    """The claim file of an idempotency key: its hash, the intent digest, the job."""

    schema: str
    key_hash: str
    intent_digest: str | None
    job_id: str


def _claim(job_id: str, digest: str | None, hashed: str) -> IdempotencyClaim:
    return {
        "schema": "vq.idempotency-claim.v1",
        "key_hash": hashed,
        "intent_digest": digest,
        "job_id": job_id,
    }
