"""Scoped agent tokens (§10.4): hashed records, their limits and daily quotas.

A token reads ``vqt_<id>_<secret>``: ``id`` (12 hex digits) finds the record without
scanning, ``secret`` (256 random bits) is checked against the stored
``sha256(secret)`` in constant time. ``<config-root>/web-tokens.json`` (0600) holds only
that hash and the metadata (name, id, scopes, profiles, programs, max_jobs_per_day,
created_at, expires_at, revoked_at) — never the token. Expired or revoked tokens are
refused (:class:`TokenRejected`, which the guard answers with 401).

Scopes are ``read``, ``submit`` and ``control``; no scoped token ever has ``admin``.

What a token may submit and how much per day is :mod:`vq.web.auth.quota`.

The token store is stdlib only (the CLI imports it).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Required, TypedDict, cast

from vq.errors import ConfigError, Conflict, InvalidInput, NotFound
from vq.web.auth._files import locked, read_json_private, write_json_private
from vq.web.auth.principal import Principal

__all__ = [
    "SCOPES",
    "TOKENS_FILE",
    "ScopedToken",
    "TokenRejected",
    "authenticate_token",
    "create_token",
    "list_tokens",
    "parse_token",
    "revoke_token",
]

TOKENS_FILE = "web-tokens.json"
PREFIX = "vqt"
SCOPES: tuple[str, ...] = ("read", "submit", "control")
NAME_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_ID_RE = re.compile(r"^[0-9a-f]{12}$")
_SECRET_RE = re.compile(r"^[A-Za-z0-9_-]{43}$")
_WHAT = "agent tokens"


class TokenRejected(Exception):
    """A scoped token that is unknown, wrong, expired or revoked (message is safe to show)."""


class TokenView(TypedDict):
    """An agent token as ``vq web token list --json`` shows it: everything but the hash."""

    id: str
    name: str
    scopes: list[str]
    profiles: list[str]
    programs: list[str]
    max_jobs_per_day: int | None
    max_upload_bytes_per_day: int | None
    created_at: str
    expires_at: str | None
    revoked_at: str | None
    state: str


@dataclass(frozen=True)
class ScopedToken:
    id: str
    name: str
    scopes: tuple[str, ...]
    profiles: tuple[str, ...]
    programs: tuple[str, ...]
    max_jobs_per_day: int | None
    created_at: str
    expires_at: str | None
    revoked_at: str | None
    #: Bytes of ``POST /api/v1/uploads`` bodies accepted per UTC day (None: no quota).
    max_upload_bytes_per_day: int | None = None

    def state(self, now: datetime) -> str:
        """``active``, ``expired`` or ``revoked``."""
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and datetime.fromisoformat(self.expires_at) <= now:
            return "expired"
        return "active"

    def public(self, now: datetime) -> TokenView:
        """Everything but the hash (what ``vq web token list --json`` shows)."""
        return {
            "id": self.id,
            "name": self.name,
            "scopes": list(self.scopes),
            "profiles": list(self.profiles),
            "programs": list(self.programs),
            "max_jobs_per_day": self.max_jobs_per_day,
            "max_upload_bytes_per_day": self.max_upload_bytes_per_day,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "revoked_at": self.revoked_at,
            "state": self.state(now),
        }

    def principal(self) -> Principal:
        return Principal(
            "scoped_token",
            self.name,
            scopes=frozenset(self.scopes),
            token_id=self.id,
            profiles=frozenset(self.profiles),
            programs=frozenset(self.programs),
        )


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds")


def _utc(now: datetime) -> datetime:
    return now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def parse_token(text: str) -> tuple[str, str] | None:
    """``(id, secret)`` of a well-formed ``vqt_<id>_<secret>``, else None."""
    prefix, sep, rest = text.partition("_")
    token_id, sep2, secret = rest.partition("_")
    if prefix != PREFIX or not sep or not sep2:
        return None
    if not _ID_RE.fullmatch(token_id) or not _SECRET_RE.fullmatch(secret):
        return None
    return token_id, secret


def _path(config_root: Path) -> Path:
    return config_root / TOKENS_FILE


class TokenRecord(TypedDict, total=False):
    """One token of the tokens file as vq writes it. The file may have been edited, so
    :func:`_token` checks each value's type; a record is kept only with a string ``id``."""

    id: Required[str]
    name: str
    secret_sha256: str
    scopes: list[str]
    profiles: list[str]
    programs: list[str]
    max_jobs_per_day: int | None
    max_upload_bytes_per_day: int | None
    created_at: str
    expires_at: str | None
    revoked_at: str | None


def _load(config_root: Path) -> list[TokenRecord]:
    data = read_json_private(_path(config_root), _WHAT)
    if data is None:
        return []
    records = data.get("tokens") if isinstance(data, dict) else None
    if not isinstance(records, list):
        raise ConfigError(
            f"the {_WHAT} file ({TOKENS_FILE}) has no 'tokens' list",
            hint=f"repair or remove {TOKENS_FILE} in the vq config root",
        )
    return [
        cast(TokenRecord, r)
        for r in records
        if isinstance(r, dict) and isinstance(r.get("id"), str)
    ]


def _save(config_root: Path, records: list[TokenRecord]) -> None:
    write_json_private(_path(config_root), {"version": 1, "tokens": records})


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _token(record: TokenRecord) -> ScopedToken:
    limit = record.get("max_jobs_per_day")
    return ScopedToken(
        id=str(record["id"]),
        name=str(record.get("name", "")),
        scopes=tuple(s for s in record.get("scopes", ()) if s in SCOPES),
        profiles=tuple(str(p) for p in record.get("profiles", ())),
        programs=tuple(str(p) for p in record.get("programs", ())),
        max_jobs_per_day=limit if isinstance(limit, int) and not isinstance(limit, bool) else None,
        created_at=str(record.get("created_at", "")),
        expires_at=record.get("expires_at"),
        revoked_at=record.get("revoked_at"),
        max_upload_bytes_per_day=_count(record.get("max_upload_bytes_per_day")),
    )


def _clean(values: Iterable[str], what: str) -> tuple[str, ...]:
    cleaned = tuple(dict.fromkeys(v.strip() for v in values if v.strip()))
    for value in cleaned:
        if not NAME_RE.fullmatch(value):
            raise InvalidInput(f"invalid {what} name {value[:80]!r}")
    return cleaned


def create_token(
    config_root: Path,
    name: str,
    scopes: Iterable[str],
    *,
    now: datetime,
    profiles: Iterable[str] = (),
    programs: Iterable[str] = (),
    max_jobs_per_day: int | None = None,
    expires_in: timedelta | None = None,
    max_upload_bytes_per_day: int | None = None,
) -> tuple[str, ScopedToken]:
    """Store a new token's hash and metadata; return ``(token, record)`` (shown once)."""
    if not NAME_RE.fullmatch(name):
        raise InvalidInput(
            f"invalid token name {name[:80]!r}", hint="use 1-64 characters from A-Z a-z 0-9 . _ -"
        )
    wanted = tuple(dict.fromkeys(s.strip() for s in scopes if s.strip()))
    unknown = [s for s in wanted if s not in SCOPES]
    if unknown or not wanted:
        raise InvalidInput(
            f"unknown scope {unknown[0]!r}" if unknown else "a token needs at least one scope",
            hint="use --scope with read, submit and/or control (comma-separated)",
        )
    if max_jobs_per_day is not None and max_jobs_per_day < 1:
        raise InvalidInput("--max-jobs-per-day must be at least 1")
    if max_upload_bytes_per_day is not None and max_upload_bytes_per_day < 1:
        raise InvalidInput("--max-upload-bytes-per-day must be at least 1")
    now = _utc(now)
    record: TokenRecord = {
        "id": "",
        "name": name,
        "secret_sha256": "",
        "scopes": list(wanted),
        "profiles": list(_clean(profiles, "profile")),
        "programs": list(_clean(programs, "program")),
        "max_jobs_per_day": max_jobs_per_day,
        "max_upload_bytes_per_day": max_upload_bytes_per_day,
        "created_at": _iso(now),
        "expires_at": _iso(now + expires_in) if expires_in is not None else None,
        "revoked_at": None,
    }
    secret = secrets.token_urlsafe(32)
    record["secret_sha256"] = _digest(secret)
    with locked(_path(config_root)):
        records = _load(config_root)
        if any(r.get("name") == name and _token(r).state(now) == "active" for r in records):
            raise Conflict(
                f"an active agent token named {name!r} already exists",
                hint="revoke it first (`vq web token revoke NAME`) or choose another name",
                reference="token-exists",
            )
        taken = {r["id"] for r in records}
        token_id = secrets.token_hex(6)
        while token_id in taken:
            token_id = secrets.token_hex(6)
        record["id"] = token_id
        records.append(record)
        _save(config_root, records)
    return f"{PREFIX}_{token_id}_{secret}", _token(record)


def list_tokens(config_root: Path) -> list[ScopedToken]:
    return [_token(r) for r in _load(config_root)]


def revoke_token(config_root: Path, name_or_id: str, *, now: datetime) -> tuple[ScopedToken, bool]:
    """Revoke by id, or by the name of the active token; ``(token, was_already_revoked)``."""
    now = _utc(now)
    with locked(_path(config_root)):
        records = _load(config_root)
        matches = [r for r in records if r["id"] == name_or_id]
        if not matches:
            named = [r for r in records if r.get("name") == name_or_id]
            active = [r for r in named if _token(r).state(now) != "revoked"]
            matches = active or named[-1:]
        if not matches:
            raise NotFound(f"no agent token {name_or_id!r}", hint="see `vq web token list`")
        record = matches[0]
        if record.get("revoked_at") is not None:
            return _token(record), True
        record["revoked_at"] = _iso(now)
        _save(config_root, records)
        return _token(record), False


def authenticate_token(config_root: Path, presented: str, now: datetime) -> ScopedToken:
    """The active token ``presented`` names, or :class:`TokenRejected`."""
    parsed = parse_token(presented)
    if parsed is None:
        raise TokenRejected("the bearer token is not valid")
    token_id, secret = parsed
    record = next((r for r in _load(config_root) if r["id"] == token_id), None)
    expected = str(record.get("secret_sha256", "")) if record is not None else "0" * 64
    if not hmac.compare_digest(_digest(secret), expected) or record is None:
        raise TokenRejected("the bearer token is not valid")
    token = _token(record)
    state = token.state(_utc(now))
    if state != "active":
        raise TokenRejected(f"agent token {token.name!r} is {state}")
    return token


# --- quotas and limits (called by POST /api/v1/jobs) ----------------------------------
