"""Console accounts in ``<config-root>/web-users.json`` (mode 0600), roles viewer/operator/admin.

Contracts:

* Passwords are stored only as salted scrypt hashes (``hashlib.scrypt``, n=2**14, r=8,
  p=1, 16-byte random salt, 32-byte key); the password itself is never written or logged.
* Usernames match ``^[A-Za-z0-9._-]{1,64}$`` (:func:`validate_username`, InvalidInput).
* Every read-modify-write holds the file's flock; writes are atomic with mode 0600.
  A file with group/other permission bits is refused (ConfigError, exit 9).
* :func:`authenticate` spends one scrypt whether or not the user exists, so its timing
  does not reveal which usernames exist.

File format::

    {"version": 1, "users": {"alice": {"role": "operator", "created_at": "...",
      "password": {"alg": "scrypt", "n": 16384, "r": 8, "p": 1, "salt": b64, "hash": b64}}}}

Stdlib only (no FastAPI): the CLI imports this module.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict, cast

from vq.errors import ConfigError, Conflict, InvalidInput, NotFound
from vq.web.auth._files import locked, read_json_private, write_json_private
from vq.web.auth.principal import ROLES, Role

__all__ = [
    "USERS_FILE",
    "Account",
    "add_account",
    "any_accounts",
    "authenticate",
    "current_role",
    "hash_password",
    "list_accounts",
    "remove_account",
    "validate_password",
    "validate_role",
    "validate_username",
    "verify_password",
]

USERS_FILE = "web-users.json"
USERNAME_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
SCRYPT_N, SCRYPT_R, SCRYPT_P, SCRYPT_DKLEN, SALT_BYTES = 2**14, 8, 1, 32, 16
MIN_PASSWORD, MAX_PASSWORD = 8, 1024
_WHAT = "console accounts"


@dataclass(frozen=True)
class Account:
    username: str
    role: Role
    created_at: str

    def public(self) -> dict[str, str]:
        return {"username": self.username, "role": self.role, "created_at": self.created_at}


def validate_username(name: str) -> str:
    if not USERNAME_RE.fullmatch(name):
        raise InvalidInput(
            f"invalid username {name[:80]!r}",
            hint="use 1-64 characters from A-Z a-z 0-9 . _ -",
        )
    return name


def validate_role(role: str) -> Role:
    if role not in ROLES:
        raise InvalidInput(f"unknown role {role!r}", hint="use viewer, operator or admin")
    return role


def validate_password(password: str) -> str:
    if not MIN_PASSWORD <= len(password) <= MAX_PASSWORD:
        raise InvalidInput(
            f"a console password needs {MIN_PASSWORD} to {MAX_PASSWORD} characters",
            hint="choose a longer password (a passphrase works well)",
        )
    return password


class PasswordHash(TypedDict):
    """The stored form of a password (:func:`hash_password`): scrypt, its parameters, the
    salt and the derived key (base64)."""

    alg: str
    n: int
    r: int
    p: int
    salt: str
    hash: str


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int, dklen: int) -> bytes:
    return hashlib.scrypt(
        password.encode("utf-8"), salt=salt, n=n, r=r, p=p, dklen=dklen, maxmem=64 * 1024 * 1024
    )


def hash_password(password: str, salt: bytes | None = None) -> PasswordHash:
    """The stored form of ``password``: scrypt parameters, salt and derived key."""
    salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
    derived = _scrypt(password, salt, SCRYPT_N, SCRYPT_R, SCRYPT_P, SCRYPT_DKLEN)
    return {
        "alg": "scrypt",
        "n": SCRYPT_N,
        "r": SCRYPT_R,
        "p": SCRYPT_P,
        "salt": _b64(salt),
        "hash": _b64(derived),
    }


def verify_password(password: str, stored: Any) -> bool:
    """Whether ``password`` matches a :func:`hash_password` record (constant-time compare)."""
    try:
        if stored["alg"] != "scrypt":
            return False
        salt = base64.b64decode(stored["salt"], validate=True)
        expected = base64.b64decode(stored["hash"], validate=True)
        n, r, p = int(stored["n"]), int(stored["r"]), int(stored["p"])
        if not (2 <= n <= 2**20 and 1 <= r <= 32 and 1 <= p <= 16 and 16 <= len(expected) <= 64):
            return False
        derived = _scrypt(password, salt, n, r, p, len(expected))
    except (KeyError, TypeError, ValueError):
        return False
    return hmac.compare_digest(derived, expected)


@functools.cache
def _dummy() -> PasswordHash:
    """Verified against when the username is unknown, so a miss costs one scrypt too."""
    return hash_password(secrets.token_urlsafe(16))


def _path(config_root: Path) -> Path:
    return config_root / USERS_FILE


class AccountRecord(TypedDict, total=False):
    """One account of the users file as vq writes it (the file may have been edited:
    :func:`_account` checks the role, :func:`authenticate` the password hash)."""

    role: str
    created_at: str
    password: PasswordHash


def _load(config_root: Path) -> dict[str, AccountRecord]:
    data = read_json_private(_path(config_root), _WHAT)
    if data is None:
        return {}
    users = data.get("users") if isinstance(data, dict) else None
    if not isinstance(users, dict):
        raise ConfigError(
            f"the {_WHAT} file ({USERS_FILE}) has no 'users' object",
            hint=f"repair or remove {USERS_FILE} in the vq config root",
        )
    return {str(k): cast(AccountRecord, v) for k, v in users.items() if isinstance(v, dict)}


def _save(config_root: Path, users: dict[str, AccountRecord]) -> None:
    write_json_private(_path(config_root), {"version": 1, "users": users})


def _account(name: str, record: AccountRecord) -> Account | None:
    role = record.get("role")
    if role not in ROLES:
        return None
    return Account(name, role, str(record.get("created_at", "")))


def any_accounts(config_root: Path) -> bool:
    """Whether at least one console account exists (this closes anonymous reads)."""
    return bool(_load(config_root))


def list_accounts(config_root: Path) -> list[Account]:
    accounts = (_account(name, record) for name, record in sorted(_load(config_root).items()))
    return [account for account in accounts if account is not None]


def current_role(config_root: Path, username: str) -> Role | None:
    """The account's role now, or None if it no longer exists (checked every request)."""
    record = _load(config_root).get(username)
    account = _account(username, record) if record is not None else None
    return None if account is None else account.role


def add_account(
    config_root: Path, username: str, role: str, password: str, *, force: bool = False
) -> Account:
    """Create an account (or with ``force`` replace its password and role)."""
    validate_username(username)
    checked_role = validate_role(role)
    validate_password(password)
    stored = hash_password(password)  # slow: outside the lock
    with locked(_path(config_root)):
        users = _load(config_root)
        if username in users and not force:
            raise Conflict(
                f"console account {username!r} already exists",
                hint="pass --force to replace its password and role",
                reference="account-exists",
            )
        created = datetime.now(UTC).isoformat(timespec="seconds")
        users[username] = {"role": checked_role, "created_at": created, "password": stored}
        _save(config_root, users)
    return Account(username, checked_role, created)


def remove_account(config_root: Path, username: str) -> None:
    """Delete an account; its browser sessions stop working on their next request."""
    validate_username(username)
    with locked(_path(config_root)):
        users = _load(config_root)
        if username not in users:
            raise NotFound(f"no console account {username!r}", hint="see `vq web user list`")
        del users[username]
        _save(config_root, users)


def authenticate(config_root: Path, username: str, password: str) -> Account | None:
    """The account when ``username``/``password`` are right, else None (no enumeration)."""
    record = _load(config_root).get(username) if USERNAME_RE.fullmatch(username) else None
    if record is None or len(password) > MAX_PASSWORD:
        verify_password(password[:MAX_PASSWORD], _dummy())
        return None
    if not verify_password(password, record.get("password")):
        return None
    return _account(username, record)
