"""The multi-user control socket's write gate (§7.1, §7.2): the admin token.

In multi-user mode ``daemon.sock`` is ``root:<admin group>`` 0660: connecting is the right
to read. A state-changing method (``reload``, ``drain``, ``undrain``, ``throttle`` and any
``set_*``) also needs ``params["admin_token"]`` equal to the shared token in
``/etc/vq/web-token`` (``$VQ_CONFIG_DIR/web-token`` when that variable is set), compared in
constant time. The token file must be a regular file without group or other permission
bits; anything else refuses every write. The peer's uid (SO_PEERCRED) is audit data in
``rpc-audit.jsonl``, never authority.
"""

from __future__ import annotations

import hmac
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vq.errors import ConfigError, PermissionDenied

__all__ = [
    "TOKEN_PARAM",
    "WRITE_METHODS",
    "admin_token_path",
    "is_write_method",
    "load_admin_token",
    "require_admin_token",
]

TOKEN_PARAM = "admin_token"  # noqa: S105 - the parameter name, not a secret
WRITE_METHODS = frozenset({"reload", "drain", "undrain", "throttle"})
_MAX_TOKEN_BYTES = 4096


def admin_token_path(env: Mapping[str, str]) -> Path:
    """``$VQ_CONFIG_DIR/web-token`` when that variable is set, else ``/etc/vq/web-token``."""
    configured = env.get("VQ_CONFIG_DIR")
    base = Path(os.path.abspath(os.path.expanduser(configured))) if configured else None
    return (base or Path("/etc/vq")) / "web-token"


def is_write_method(method: str) -> bool:
    return method in WRITE_METHODS or method.startswith("set_")


def load_admin_token(path: Path) -> bytes:
    """The token (surrounding whitespace stripped); :class:`ConfigError` naming ``path``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise ConfigError(
            f"{path}: the admin token cannot be read: {exc.strerror}",
            hint="create it as root with mode 0600 (`vq web token` or any random secret)",
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"{path}: the admin token is not a regular file")
        if info.st_mode & 0o077:
            raise ConfigError(
                f"{path}: the admin token has group or other permissions "
                f"({stat.S_IMODE(info.st_mode):04o})",
                hint=f"chmod 600 {path}",
            )
        token = os.read(fd, _MAX_TOKEN_BYTES).strip()
    finally:
        os.close(fd)
    if not token:
        raise ConfigError(f"{path}: the admin token is empty")
    return token


def require_admin_token(method: str, params: dict[str, Any], path: Path) -> None:
    """For a write method: pop and check the caller's token, else raise.

    The token file is read on every write, so replacing or fixing it needs no restart.
    A missing, wrong or unusable token is :class:`PermissionDenied`; reads pass through
    untouched (a token sent with a read is dropped, never echoed).
    """
    given = params.pop(TOKEN_PARAM, None)
    if not is_write_method(method):
        return
    try:
        expected = load_admin_token(path)
    except ConfigError as exc:
        raise PermissionDenied(
            f"{method} needs the admin token, and it is unusable: {exc.message}",
            hint=exc.hint,
        ) from None
    if not isinstance(given, str) or not hmac.compare_digest(given.encode(), expected):
        raise PermissionDenied(
            f"{method} needs the admin token",
            hint=f"pass the token from {path} (readable by root only)",
        )
