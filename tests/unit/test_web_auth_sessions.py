"""Session cookies and CSRF tokens: sign, verify, tamper, expiry (pure functions)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import stat
from pathlib import Path

import pytest

from vq.errors import ConfigError
from vq.web.auth import sessions
from vq.web.auth.sessions import SessionClaims, csrf_for, csrf_matches, new_session, sign, verify

KEY = b"k" * 32
NOW = 1_800_000_000.0


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def test_signed_cookie_round_trips() -> None:
    claims = new_session("alice", "operator", NOW)
    assert claims.exp == int(NOW) + 12 * 3600
    assert verify(KEY, sign(KEY, claims), NOW) == claims


def test_cookie_carries_the_documented_fields() -> None:
    cookie = sign(KEY, SessionClaims("alice", "viewer", 123, "sid1"))
    payload = cookie.split(".")[0]
    body = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert body == {"u": "alice", "r": "viewer", "exp": 123, "sid": "sid1"}


def test_tampered_payload_is_refused() -> None:
    cookie = sign(KEY, new_session("alice", "viewer", NOW))
    _, signature = cookie.split(".")
    forged = _b64(
        json.dumps({"u": "alice", "r": "admin", "exp": int(NOW) + 99, "sid": "x"}).encode()
    )
    assert verify(KEY, f"{forged}.{signature}", NOW) is None


def test_wrong_key_and_garbage_are_refused() -> None:
    cookie = sign(KEY, new_session("alice", "viewer", NOW))
    assert verify(b"x" * 32, cookie, NOW) is None
    for junk in ("", "abc", "a.b.c", "!!!.???", cookie + "x", "." + cookie.split(".")[1]):
        assert verify(KEY, junk, NOW) is None, junk


def test_expired_cookie_is_refused() -> None:
    claims = new_session("alice", "viewer", NOW)
    cookie = sign(KEY, claims)
    assert verify(KEY, cookie, claims.exp - 1) is not None
    assert verify(KEY, cookie, claims.exp) is None


def test_a_validly_signed_cookie_with_a_bad_role_is_refused() -> None:
    payload = _b64(json.dumps({"u": "a", "r": "root", "exp": int(NOW) + 60, "sid": "s"}).encode())
    mac = _b64(hmac.new(KEY, payload.encode(), hashlib.sha256).digest())
    assert verify(KEY, f"{payload}.{mac}", NOW) is None


def test_csrf_token_is_bound_to_the_session() -> None:
    token = csrf_for(KEY, "sid-a")
    assert len(token) == 64 and int(token, 16) >= 0
    assert csrf_matches(KEY, "sid-a", token)
    assert not csrf_matches(KEY, "sid-b", token)
    assert not csrf_matches(KEY, "sid-a", None)
    assert not csrf_matches(KEY, "sid-a", "")
    assert not csrf_matches(b"z" * 32, "sid-a", token)


def test_session_key_is_created_once_with_mode_0600(tmp_path: Path) -> None:
    root = tmp_path / "config"
    key = sessions.load_key(root)
    assert len(key) == 32
    assert stat.S_IMODE(os.stat(root / "web-session-key").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(root).st_mode) == 0o700
    assert sessions.load_key(root) == key


def test_session_key_with_open_permissions_is_refused(tmp_path: Path) -> None:
    sessions.load_key(tmp_path)
    os.chmod(tmp_path / "web-session-key", 0o640)
    with pytest.raises(ConfigError, match="permission bits"):
        sessions.load_key(tmp_path)
