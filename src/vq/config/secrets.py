"""Secret references (§7.4): secrets never live in ``config.toml``, references do.

A configuration value that holds a secret may be a reference instead of the value:

* ``env:NAME`` — the variable ``NAME`` of the reading process's environment (for the
  daemon: its environment at start);
* ``file:/absolute/path`` — a regular file that group and others cannot access (mode
  0600 or stricter); vq refuses to read it otherwise;
* ``credential:NAME`` — the file ``NAME`` in ``$CREDENTIALS_DIRECTORY``, where systemd
  puts a service's ``LoadCredential=`` secrets (the same permission rule applies).

The value is the stripped content. Contract: nothing here ever puts a secret value in an
error message, a log line or an audit finding; messages name the reference only.
:func:`audit` checks that a reference exists, has safe permissions and resolves, without
returning the value.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from vq.errors import ConfigError

__all__ = [
    "CREDENTIALS_ENV",
    "Finding",
    "SecretRef",
    "audit",
    "parse_reference",
    "read_secret",
]

#: The variable systemd sets to the directory holding ``LoadCredential=`` files.
CREDENTIALS_ENV = "CREDENTIALS_DIRECTORY"
#: Longest secret read, in bytes (a URL or a token, never a payload).
MAX_SECRET_BYTES = 65536

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CREDENTIAL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}")


@dataclass(frozen=True)
class SecretRef:
    """A parsed reference: ``kind`` is ``env``, ``file`` or ``credential``."""

    kind: str
    target: str  # the variable name, the absolute path or the credential name

    @property
    def text(self) -> str:
        return f"{self.kind}:{self.target}"


def parse_reference(value: str) -> SecretRef | None:
    """The reference ``value`` spells, None for a literal; ConfigError for a malformed one."""
    kind, sep, target = value.partition(":")
    if not sep or kind not in ("env", "file", "credential"):
        return None
    if kind == "env" and not _ENV_NAME.fullmatch(target):
        raise ConfigError("env: must be followed by an environment variable name")
    if kind == "file" and not target.startswith("/"):
        raise ConfigError("file: must be followed by an absolute path")
    if kind == "credential" and (not _CREDENTIAL_NAME.fullmatch(target) or target in (".", "..")):
        raise ConfigError("credential: must be followed by a credential name (no '/')")
    return SecretRef(kind, target)


def credential_path(name: str, env: Mapping[str, str]) -> Path:
    """``$CREDENTIALS_DIRECTORY/NAME``; ConfigError when the variable is unset."""
    directory = env.get(CREDENTIALS_ENV, "")
    if not directory:
        raise ConfigError(
            f"credential:{name}: ${CREDENTIALS_ENV} is not set (not started by systemd "
            "with LoadCredential=)",
            hint=f"add `LoadCredential={name}:/path/to/secret` to the service unit, or use "
            "env:NAME or file:/path (mode 0600)",
        )
    return Path(directory) / name


def _read_protected(path: Path, ref: str) -> str:
    """The stripped content of a regular file only its owner can access."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise ConfigError(
            f"{ref}: cannot read the secret file {path}: {exc.strerror}",
            hint=f"put the secret in {path} and run: chmod 600 {path}",
        ) from exc
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"{ref}: the secret file {path} is not a regular file")
        mode = stat.S_IMODE(info.st_mode)
        if mode & 0o077:
            raise ConfigError(
                f"{ref}: the secret file {path} has mode {mode:04o}; vq refuses to read a "
                f"secret that group or others can access (run: chmod 600 {path})",
                hint=f"chmod 600 {path}",
            )
        data = handle.read(MAX_SECRET_BYTES)
    value = data.decode("utf-8", errors="replace").strip()
    if not value:
        raise ConfigError(f"{ref}: the secret file {path} is empty")
    return value


def read_secret(ref: SecretRef, env: Mapping[str, str]) -> str:
    """The secret behind ``ref``; ConfigError (naming the reference only) otherwise."""
    if ref.kind == "env":
        value = env.get(ref.target, "").strip()
        if not value:
            raise ConfigError(
                f"{ref.text}: environment variable {ref.target} is not set in the "
                "reading process's environment",
                hint=f"export {ref.target} before `vq daemon start`, or use file:/path "
                "(mode 0600) or credential:NAME",
            )
        return value
    path = Path(ref.target) if ref.kind == "file" else credential_path(ref.target, env)
    return _read_protected(path, ref.text)


class FindingJSON(TypedDict):
    """A :class:`Finding` in ``vq config audit --json``'s ``secrets``."""

    key: str
    reference: str | None
    ok: bool
    problem: str | None
    hint: str | None


@dataclass(frozen=True)
class Finding:
    """One audited secret setting; never holds the value."""

    key: str
    reference: str | None  # None: an inline value (shown nowhere)
    ok: bool
    problem: str | None = None
    hint: str | None = None

    def as_dict(self) -> FindingJSON:
        return {
            "key": self.key,
            "reference": self.reference,
            "ok": self.ok,
            "problem": self.problem,
            "hint": self.hint,
        }


def audit(
    key: str,
    value: str,
    env: Mapping[str, str],
    check: Callable[[str], str | None] | None = None,
) -> Finding | None:
    """Audit one secret setting; None when it is unset (nothing to check).

    A reference must exist, have safe permissions and resolve; ``check`` (value →
    problem or None) then validates what it resolved to, e.g. that a webhook is a URL.
    An inline value is reported as not ok: the secret lives in the config file.
    """
    if not value:
        return None
    try:
        ref = parse_reference(value)
    except ConfigError as exc:
        return Finding(key, value, False, exc.message)
    if ref is None:
        return Finding(
            key,
            None,
            False,
            "the secret is written inline in the configuration",
            hint="move it to env:NAME, file:/path (mode 0600) or credential:NAME",
        )
    try:
        resolved = read_secret(ref, env)
    except ConfigError as exc:
        return Finding(key, ref.text, False, exc.message, exc.hint)
    problem = check(resolved) if check is not None else None
    if problem is not None:
        return Finding(key, ref.text, False, f"{ref.text}: {problem}")
    return Finding(key, ref.text, True)
