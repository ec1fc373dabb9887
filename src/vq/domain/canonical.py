"""Canonical JSON and the digests computed from it (content, never formatting)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["canonical_bytes", "sha256_hex", "sha256_of"]


def canonical_bytes(payload: Any) -> bytes:
    """``payload`` as compact JSON with sorted keys (UTF-8, no insignificant whitespace)."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


def sha256_of(payload: Any) -> str:
    """The SHA-256 (hex) of the canonical JSON of ``payload``."""
    return hashlib.sha256(canonical_bytes(payload)).hexdigest()


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
