"""The delegated-submit outbox: ``<state-root>/outbox/<time>-<host>-<hex>/`` (§4.8).

Contract:

- :func:`stage` writes an entry before anything is sent: ``request.json`` (host, the
  remote argv, ``idempotency_key``, source, ``created_at``) and ``source.tar`` when a
  SOURCE was packed. The caller removes it (:func:`discard`) once the host answered or
  the call provably never reached it; an entry that stays is a submit whose outcome is
  unknown.
- :func:`resolve` is the reconciliation: once a submit with idempotency key K was
  answered by host H, every kept entry for (H, K) is settled — the key binds one intent
  on the host, so the answer is also the outcome of those earlier attempts — and removed.
  Entries without a key are never settled here: only a person can tell whether such a
  job landed (``vq queue HOST``).
- :func:`unresolved` lists the kept entries per host, for ``vq hosts``.

Entries are private (0700) and written without fsync: they are a record for the person
who reruns, not an acknowledgement.
"""

from __future__ import annotations

import json
import secrets
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vq.paths import StateLayout

__all__ = ["Entry", "discard", "outbox_dir", "resolve", "stage", "unresolved"]

_REQUEST = "request.json"


def outbox_dir(state_root: Path) -> Path:
    return StateLayout(state_root).outbox_dir


@dataclass(frozen=True)
class Entry:
    """One kept delegated submit."""

    path: Path
    host: str
    idempotency_key: str | None
    created_at: str | None


def stage(state_root: Path, host: str, request: dict[str, Any], tar: bytes | None) -> Path:
    """A new entry for ``request`` (and its packed SOURCE); its directory."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    entry = outbox_dir(state_root) / f"{stamp}-{host}-{secrets.token_hex(4)}"
    entry.mkdir(mode=0o700, parents=True)
    if tar is not None:
        (entry / "source.tar").write_bytes(tar)
    (entry / _REQUEST).write_text(json.dumps(request, indent=1) + "\n")
    return entry


def discard(entry: Path) -> None:
    shutil.rmtree(entry, ignore_errors=True)


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
    """Kept entries (submits whose outcome is unknown), by host."""
    out: dict[str, list[Entry]] = {}
    for entry in _entries(state_root):
        out.setdefault(entry.host, []).append(entry)
    return out


def resolve(state_root: Path, host: str, idempotency_key: str, *, keep: Path) -> list[Entry]:
    """Settle the kept entries of (``host``, ``idempotency_key``) other than ``keep``
    (the call just answered); returns the entries removed."""
    settled = [
        entry
        for entry in _entries(state_root)
        if entry.host == host and entry.idempotency_key == idempotency_key and entry.path != keep
    ]
    for entry in settled:
        discard(entry.path)
    return settled
