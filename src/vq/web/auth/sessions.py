"""Signed browser sessions and CSRF tokens (§7.2).

Contracts:

* The key is 32 random bytes in ``<config-root>/web-session-key`` (0600), created on
  first use (create-if-absent, so two processes agree on one key). Deleting the file
  ends every session.
* Cookie ``vq_session`` = ``base64url(json{"u","r","exp","sid"[, "tf"]})`` + ``.`` +
  ``base64url(HMAC-SHA256(key, first part))`` (unpadded). :func:`verify` returns None
  for anything malformed, tampered or expired (``exp`` is a UTC epoch second) — the
  caller treats that as "not signed in". The role in a cookie is only a hint: the guard
  re-reads the account's current role on every request.
* ``tf`` marks a session opened with the admin web token: a fingerprint of that token,
  so rotating the token (``vq web init-token --force``) ends those sessions.
* CSRF token = hex HMAC-SHA256(key, ``"csrf:" + sid``): stable for one session, useless
  without the key, compared in constant time.

Pure except :func:`load_key` (stdlib only).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from vq.errors import ConfigError
from vq.web.auth._files import create_private, read_private
from vq.web.auth.principal import ROLES, Role

__all__ = [
    "COOKIE_NAME",
    "KEY_FILE",
    "MAX_AGE",
    "SessionClaims",
    "csrf_for",
    "csrf_matches",
    "load_key",
    "new_session",
    "sign",
    "token_fingerprint",
    "verify",
]

COOKIE_NAME = "vq_session"
KEY_FILE = "web-session-key"
KEY_BYTES = 32
#: Twelve hours (§7.2).
MAX_AGE = 12 * 3600
#: Far larger than any cookie this module writes; bigger values are refused unparsed.
_MAX_COOKIE = 2048


@dataclass(frozen=True)
class SessionClaims:
    user: str
    role: Role
    #: Expiry, UTC epoch seconds.
    exp: int
    sid: str
    #: Admin-token sessions only: fingerprint of the token that opened them.
    token_fingerprint: str | None = None


def load_key(config_root: Path) -> bytes:
    """The session key, created (0600) on first use."""
    path = config_root / KEY_FILE
    key = read_private(path, "session key")
    if key is None:
        create_private(path, secrets.token_bytes(KEY_BYTES))
        key = read_private(path, "session key")
    if key is None or len(key) != KEY_BYTES:
        raise ConfigError(
            f"the session key file ({KEY_FILE}) is damaged",
            hint=f"delete {KEY_FILE} in the vq config root (every session ends)",
        )
    return key


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hashlib.sha256).digest()


def new_session(
    user: str, role: Role, now: float, *, token_fingerprint: str | None = None
) -> SessionClaims:
    return SessionClaims(
        user, role, int(now) + MAX_AGE, secrets.token_urlsafe(16), token_fingerprint
    )


def sign(key: bytes, claims: SessionClaims) -> str:
    """The cookie value for ``claims``."""
    body: dict[str, object] = {"u": claims.user, "r": claims.role, "exp": claims.exp}
    body["sid"] = claims.sid
    if claims.token_fingerprint is not None:
        body["tf"] = claims.token_fingerprint
    payload = _b64encode(json.dumps(body, separators=(",", ":")).encode())
    return f"{payload}.{_b64encode(_mac(key, payload.encode()))}"


def verify(key: bytes, cookie: str | None, now: float) -> SessionClaims | None:
    """The claims of a genuine, unexpired cookie; None otherwise."""
    if not cookie or len(cookie) > _MAX_COOKIE or cookie.count(".") != 1:
        return None
    payload, _, signature = cookie.partition(".")
    try:
        presented = _b64decode(signature)
    except (binascii.Error, ValueError):
        return None
    if not hmac.compare_digest(presented, _mac(key, payload.encode("ascii", "replace"))):
        return None
    try:
        body = json.loads(_b64decode(payload))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(body, dict):
        return None
    user, role, exp, sid = body.get("u"), body.get("r"), body.get("exp"), body.get("sid")
    fingerprint = body.get("tf")
    if not (isinstance(user, str) and isinstance(sid, str) and role in ROLES):
        return None
    if not isinstance(exp, int) or isinstance(exp, bool) or exp <= now:
        return None
    if fingerprint is not None and not isinstance(fingerprint, str):
        return None
    return SessionClaims(user, cast(Role, role), exp, sid, fingerprint)


def csrf_for(key: bytes, sid: str) -> str:
    """The CSRF token of session ``sid`` (hex)."""
    return hmac.new(key, f"csrf:{sid}".encode(), hashlib.sha256).hexdigest()


def csrf_matches(key: bytes, sid: str, submitted: str | None) -> bool:
    if not submitted:
        return False
    return hmac.compare_digest(submitted.encode("utf-8", "replace"), csrf_for(key, sid).encode())


def token_fingerprint(key: bytes, admin_token: str) -> str:
    """A short keyed fingerprint of the admin token (reveals nothing about it)."""
    return hmac.new(key, f"admin-token:{admin_token}".encode(), hashlib.sha256).hexdigest()[:32]
