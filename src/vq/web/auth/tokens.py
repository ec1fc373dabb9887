"""The shared admin bearer token: ``<config-root>/web-token`` (§7.2).

Contracts:

* :func:`init_token` writes a fresh random 256-bit value (``secrets.token_urlsafe(32)``)
  atomically with mode 0600. Without ``force`` an existing token is kept and
  :class:`~vq.errors.Conflict` is raised (exit 6); with ``force`` the old value stops
  working at once (manual rotation).
* :func:`read_admin_token` refuses a file with group/other permission bits
  (:class:`~vq.web.auth._files.UnsafeFile`, exit 9); the error never carries the token.
* :func:`matches_admin_token` compares in constant time (``hmac.compare_digest``).

Stdlib only (no FastAPI): the CLI imports this module.
"""

from __future__ import annotations

import hmac
import secrets
from pathlib import Path

from vq.errors import Conflict
from vq.web.auth._files import create_private, read_private, write_private

__all__ = ["TOKEN_FILE", "init_token", "matches_admin_token", "read_admin_token", "token_path"]

TOKEN_FILE = "web-token"  # noqa: S105 - a file name, not a secret


def token_path(config_root: Path) -> Path:
    return config_root / TOKEN_FILE


def init_token(config_root: Path, *, force: bool = False) -> str:
    """Create (or with ``force`` replace) the admin token and return it."""
    path = token_path(config_root)
    token = secrets.token_urlsafe(32)
    data = (token + "\n").encode()
    if force:
        write_private(path, data)
        return token
    if not create_private(path, data):
        raise Conflict(
            "a web token already exists; it was kept",
            hint="pass --force to replace it (the old token stops working at once)",
            reference="token-exists",
        )
    return token


def read_admin_token(config_root: Path) -> str | None:
    """The admin token, or None when none was created (or the file is empty)."""
    data = read_private(token_path(config_root), "admin web token")
    if data is None:
        return None
    return data.decode("utf-8", errors="replace").strip() or None


def matches_admin_token(config_root: Path, presented: str) -> bool:
    """Whether ``presented`` is the admin token (constant time; False when none exists)."""
    expected = read_admin_token(config_root)
    if expected is None:
        return False
    return hmac.compare_digest(presented.encode(), expected.encode())
