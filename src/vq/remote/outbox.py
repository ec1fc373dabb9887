"""The delegated-submit outbox: ``<state-root>/outbox/<time>-<host>-<hex>/`` (§4.8).

Contract:

- :func:`stage` writes an entry before anything is sent: ``request.json`` (host, the
  remote argv, ``idempotency_key``, source, ``created_at``) and ``source.tar`` when a
  SOURCE was packed. The caller removes it (:func:`discard`) once the host answered or
  the call provably never reached it; an entry that stays is a submit whose outcome is
  unknown.
- While its call runs, an entry is *in flight*: :func:`stage` takes an exclusive lock
  on its ``in-flight.lock`` before ``request.json`` exists, and the caller holds it
  (:meth:`Staged.release`) until the call ended. The kernel drops the lock with its
  process, so an entry left by a killed ``vq`` is no longer in flight.
- :func:`resolve` is the reconciliation: once a submit with idempotency key K was
  answered by host H, every kept entry for (H, K) is settled — the key binds one intent
  on the host, so the answer is also the outcome of those earlier attempts — and removed.
  An entry still in flight is left to its own call, which settles it when it ends.
  Entries without a key are never settled here: only a person can tell whether such a
  job landed (``vq queue HOST``).
- :func:`unresolved` lists the kept entries per host that are not in flight, for
  ``vq hosts``.

Entries are private (0700) and written without fsync: they are a record for the person
who reruns, not an acknowledgement.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TypedDict

from vq.paths import StateLayout

__all__ = ["Entry", "Staged", "discard", "outbox_dir", "resolve", "stage", "unresolved"]

_REQUEST = "request.json"
_LOCK = "in-flight.lock"


def outbox_dir(state_root: Path) -> Path:
    return StateLayout(state_root).outbox_dir


@dataclass(frozen=True)
class Entry:
    """One kept delegated submit."""

    path: Path
    host: str
    idempotency_key: str | None
    created_at: str | None


@dataclass
class Staged:
    """A staged entry whose call is in flight: ``path`` and the lock that says so."""

    path: Path
    _lock_fd: int | None

    def release(self) -> None:
        """The call ended (the entry stays or was discarded): no longer in flight."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None


class OutboxRequest(TypedDict):
    """An outbox entry's ``request.json``: the delegated submit, as it was sent."""

    host: str
    argv: list[str]
    idempotency_key: str | None
    source: str | None
    created_at: str


def stage(state_root: Path, host: str, request: OutboxRequest, tar: bytes | None) -> Staged:
    """A new entry for ``request`` (and its packed SOURCE), in flight until released."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    entry = outbox_dir(state_root) / f"{stamp}-{host}-{secrets.token_hex(4)}"
    entry.mkdir(mode=0o700, parents=True)
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    lock_fd = os.open(entry / _LOCK, flags, 0o600)
    staged = Staged(entry, lock_fd)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        if tar is not None:
            (entry / "source.tar").write_bytes(tar)
        (entry / _REQUEST).write_text(json.dumps(request, indent=1) + "\n")
    except BaseException:
        staged.release()
        discard(entry)
        raise
    return staged


def discard(entry: Path) -> None:
    shutil.rmtree(entry, ignore_errors=True)


def _in_flight(path: Path) -> bool:
    """Whether another call still holds ``path``'s in-flight lock."""
    try:
        fd = os.open(path / _LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False  # an entry from before the lock, or a removed one
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
    return False


def _read(path: Path) -> Entry | None:
    try:
        request = json.loads((path / _REQUEST).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(request, dict) or not isinstance(request.get("host"), str):
        return None
    key = request.get("idempotency_key")
    created = request.get("created_at")
    return Entry(
        path,
        request["host"],
        key if isinstance(key, str) else None,
        created if isinstance(created, str) else None,
    )


def _entries(state_root: Path) -> list[Entry]:
    try:
        children = sorted(outbox_dir(state_root).iterdir())
    except OSError:
        return []
    return [entry for child in children if (entry := _read(child)) is not None]


def unresolved(state_root: Path) -> dict[str, list[Entry]]:
    """Kept entries (submits whose outcome is unknown, not in flight), by host."""
    out: dict[str, list[Entry]] = {}
    for entry in _entries(state_root):
        if not _in_flight(entry.path):
            out.setdefault(entry.host, []).append(entry)
    return out


def resolve(state_root: Path, host: str, idempotency_key: str, *, keep: Path) -> list[Entry]:
    """Settle the kept entries of (``host``, ``idempotency_key``) other than ``keep``
    (the call just answered) and other than those still in flight; returns the entries
    removed."""
    settled = [
        entry
        for entry in _entries(state_root)
        if entry.host == host
        and entry.idempotency_key == idempotency_key
        and entry.path != keep
        and not _in_flight(entry.path)
    ]
    for entry in settled:
        discard(entry.path)
    return settled
