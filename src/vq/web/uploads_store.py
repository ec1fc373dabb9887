"""Upload tokens and inline inputs of the submission API (§10.2), on disk.

Layout: ``<state root>/uploads/`` (mode 0700), one flat directory:

* ``.incoming-<random>.part`` — a body being received (removed on any failure);
* ``<token>.tar.gz`` — a validated upload nobody has used yet;
* ``<token>.<key-hash>.claimed.tar.gz`` — an upload bound to the idempotency key of the
  first submit that named it (renamed atomically: exactly one key ever wins);
* ``.inline-<random>/`` — the private staging tree of one inline submit (removed after it).

Contracts:

* A body over ``upload_max_bytes`` is refused with 413 and its partial file removed; a
  tar whose members break the ``vq submit`` archive rules (:mod:`vq.domain.archive_rules`:
  absolute paths, ``..``, links leaving the tree, devices, FIFOs, a top-level ``_vq``)
  or that is not a readable tar is refused with 400 naming the member; nothing is kept.
* An archive that would unpack to more than ``upload_max_unpacked_bytes`` or holds more
  than ``upload_max_members`` entries is refused with 413 naming the cap; nothing is
  kept. The count is what extraction writes, not what headers claim: regular files by
  their size as tarfile (the extractor of ``vq submit``) reads them, hard links at their
  target's full size (a copy of the workspace copies each link), and sparse members are
  refused (400) because their map can make extraction write more than the size shown.
  The checked file is private and is not changed before the submit extracts it.
* Tokens are 32 random URL-safe characters; a malformed token never reaches the disk.
* A token expires ``upload_ttl_seconds`` after its upload (410 once expired). Expired
  files, claimed or not, and partial or staging files untouched for an hour (or the TTL,
  if longer: a short TTL never removes work in progress) are swept on every upload and
  every inline submit.
* Single use: only submits carrying the idempotency key that first claimed a token may
  use it again (retries of that same submit); any other key gets 409.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import re
import secrets
import shutil
import tarfile
import time
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TypedDict

from vq._tar import tar_member
from vq.domain.archive_rules import Member, check_members, normalize_name
from vq.errors import UnsafeArchive
from vq.web.errors import ApiError

__all__ = ["TOKEN_RE", "StoredUpload", "UnpackLimits", "UploadStore", "check_tar", "decode_inline"]

TOKEN_RE = re.compile(r"^[A-Za-z0-9_-]{32}$")
_READY = ".tar.gz"
_CLAIMED = ".claimed.tar.gz"
#: Partial bodies and staging trees younger than this are never swept (work in progress).
STALE_WORK_SECONDS = 3600
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class StoredUploadJSON(TypedDict):
    """``POST /api/v1/uploads`` (201)."""

    upload_token: str
    size_bytes: int
    expires_at: str


@dataclass(frozen=True)
class StoredUpload:
    token: str
    size_bytes: int
    expires_at: str

    def as_dict(self) -> StoredUploadJSON:
        return {
            "upload_token": self.token,
            "size_bytes": self.size_bytes,
            "expires_at": self.expires_at,
        }


@dataclass(frozen=True)
class UnpackLimits:
    """What one upload may unpack to (``[web] upload_max_unpacked_bytes`` and
    ``upload_max_members``)."""

    max_bytes: int
    max_members: int


def _unreadable(exc: BaseException) -> ApiError:
    return ApiError(
        400,
        "invalid-archive",
        f"the upload is not a readable tar archive ({type(exc).__name__})",
        hint="send a complete .tar.gz (e.g. made with `tar -czf inputs.tar.gz -C dir .`)",
    )


def _over(what: str, cap: int, key: str) -> ApiError:
    return ApiError(
        413,
        "too-large",
        f"the upload {what} {cap} (web.{key})",
        hint=f"split the inputs or ask the operator to raise web.{key}",
    )


def _key(name: str) -> str:
    """The normal form ``check_members`` keys entries by (a malformed name is kept as it
    is: ``check_members`` refuses it after the measuring)."""
    try:
        return normalize_name(name)
    except UnsafeArchive:
        return name


def _measure(tar: tarfile.TarFile, limits: UnpackLimits) -> list[Member]:
    """The members, with both caps enforced while reading (see the module contract)."""
    members: list[Member] = []
    sizes: dict[str, int] = {}
    total = 0
    for info in tar:
        if len(members) >= limits.max_members:
            raise _over("has more entries than", limits.max_members, "upload_max_members")
        member = tar_member(info)
        members.append(member)
        if info.sparse is not None:
            raise ApiError(
                400,
                "unsafe-archive",
                f"archive entry {info.name[:200]!r} is a sparse file",
                hint="re-create the archive without --sparse (plain `tar -czf`)",
            )
        if info.isfile():
            sizes[_key(info.name)] = info.size
            total += info.size
        elif info.islnk():
            total += sizes.get(_key(info.linkname), 0)  # each link at its target's size
        if total > limits.max_bytes:
            raise _over("unpacks to more bytes than", limits.max_bytes, "upload_max_unpacked_bytes")
    return members


def check_tar(path: Path, limits: UnpackLimits) -> None:
    """Refuse an archive ``vq submit`` would refuse (400) or that unpacks beyond ``limits``
    (413); reads it once, front to back."""
    try:
        with tarfile.open(path, "r:*") as tar:
            members = _measure(tar, limits)
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise _unreadable(exc) from None
    try:
        check_members(members)
    except UnsafeArchive as exc:
        raise ApiError(400, "unsafe-archive", exc.message, hint=exc.hint) from None


def decode_inline(files: dict[str, str], cap: int) -> tuple[dict[str, bytes], list[str]]:
    """Decoded inline files and the names whose base64 is invalid; 413 over ``cap``.

    The size is estimated from the base64 text first, so an oversized body is refused
    before anything is decoded.
    """
    estimate = sum(len(text) * 3 // 4 for text in files.values())
    if estimate > cap + 3 * len(files):
        raise _too_large_inline(estimate, cap)
    decoded: dict[str, bytes] = {}
    bad: list[str] = []
    for name, text in files.items():
        try:
            decoded[name] = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            bad.append(name)
    total = sum(len(data) for data in decoded.values())
    if total > cap:
        raise _too_large_inline(total, cap)
    return decoded, bad


def _too_large_inline(size: int, cap: int) -> ApiError:
    return ApiError(
        413,
        "too-large",
        f"inline files total about {size} bytes, over the {cap}-byte cap (web.inline_max_bytes)",
        hint="upload a tar.gz with POST /api/v1/uploads and submit with inputs.upload_token",
    )


class UploadStore:
    """The uploads directory of one state root (see the module contract)."""

    def __init__(self, directory: Path, ttl_seconds: int) -> None:
        """``directory``: the state root's ``uploads_dir`` (created on first use)."""
        self.dir = directory
        self.ttl = ttl_seconds

    def ensure(self) -> Path:
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)
        return self.dir

    # --- receiving --------------------------------------------------------------------
    def open_incoming(self) -> tuple[Path, IO[bytes]]:
        """A new private ``.part`` file to stream a body into."""
        self.ensure()
        self.sweep()
        path = self.dir / f".incoming-{secrets.token_hex(8)}.part"
        return path, os.fdopen(os.open(path, _CREATE, 0o600), "wb")

    def too_large(self, part: Path, cap: int) -> ApiError:
        """Remove a partial body and say why (413)."""
        with contextlib.suppress(OSError):
            part.unlink()
        return ApiError(
            413,
            "too-large",
            f"the upload exceeds the {cap}-byte cap (web.upload_max_bytes)",
            hint="split the inputs or ask the operator to raise web.upload_max_bytes",
        )

    def publish(self, part: Path, limits: UnpackLimits) -> StoredUpload:
        """Validate a received body and give it a token; on refusal nothing is kept."""
        try:
            check_tar(part, limits)
            size = part.stat().st_size
            token = secrets.token_urlsafe(24)
            os.rename(part, self.dir / f"{token}{_READY}")
        except BaseException:
            with contextlib.suppress(OSError):
                part.unlink()
            raise
        expires = datetime.fromtimestamp(time.time() + self.ttl, UTC)
        return StoredUpload(token, size, expires.isoformat(timespec="seconds"))

    # --- using ------------------------------------------------------------------------
    def _expired(self, path: Path) -> bool:
        try:
            return path.stat().st_mtime + self.ttl <= time.time()
        except FileNotFoundError:
            return True

    def _gone(self) -> ApiError:
        return ApiError(
            410,
            "upload-expired",
            f"the upload token expired ({self.ttl} s after its upload)",
            hint="upload the archive again with POST /api/v1/uploads",
        )

    def _ready(self, token: str) -> Path:
        if not TOKEN_RE.fullmatch(token):
            raise ApiError(404, "upload-not-found", "no such upload token")
        return self.dir / f"{token}{_READY}"

    def _claimed(self, token: str, key_hash: str) -> Path:
        return self.dir / f"{token}.{key_hash[:32]}{_CLAIMED}"

    def peek(self, token: str, key_hash: str) -> None:
        """Raise (404/409/410) unless :meth:`claim` would succeed now."""
        ready = self._ready(token)
        for path in (ready, self._claimed(token, key_hash)):
            if path.exists():
                if self._expired(path):
                    raise self._gone()
                return
        self._refuse_unavailable(token)

    def claim(self, token: str, key_hash: str) -> Path:
        """Bind the upload to ``key_hash`` (atomic rename) and return the archive's path."""
        ready, claimed = self._ready(token), self._claimed(token, key_hash)
        if ready.exists() and self._expired(ready):
            raise self._gone()
        try:
            os.rename(ready, claimed)
        except FileNotFoundError:
            if not claimed.exists():
                self._refuse_unavailable(token)
            if self._expired(claimed):
                raise self._gone() from None
        return claimed

    def _refuse_unavailable(self, token: str) -> None:
        if any(self.dir.glob(f"{token}.*{_CLAIMED}")):
            raise ApiError(
                409,
                "upload-token-used",
                "the upload token was already used by a submit with another idempotency key",
                hint="upload tokens are single-use; upload the archive again",
            )
        raise ApiError(
            404,
            "upload-not-found",
            "no such upload token (never issued, or expired and swept)",
            hint="upload the archive with POST /api/v1/uploads",
        )

    # --- inline inputs ----------------------------------------------------------------
    def stage_inline(self, files: dict[str, bytes]) -> Path:
        """A private directory holding ``files`` (names already checked by the caller)."""
        self.ensure()
        self.sweep()  # staging left by a killed server goes even when nobody uploads
        staging = self.dir / f".inline-{secrets.token_hex(8)}"
        staging.mkdir(mode=0o700)
        try:
            for name, data in files.items():
                target = staging / name
                target.parent.mkdir(parents=True, exist_ok=True)
                with os.fdopen(os.open(target, _CREATE, 0o644), "wb") as out:
                    out.write(data)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return staging

    # --- housekeeping -----------------------------------------------------------------
    def sweep(self) -> int:
        """Remove expired uploads and stale partial or staging files; how many."""
        removed = 0
        try:
            entries = list(os.scandir(self.dir))
        except FileNotFoundError:
            return 0
        now = time.time()
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            in_use = entry.name.startswith((".inline-", ".incoming-"))
            if info.st_mtime > now - (max(self.ttl, STALE_WORK_SECONDS) if in_use else self.ttl):
                continue
            if entry.name.startswith(".inline-") and entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
            removed += 1
        return removed
