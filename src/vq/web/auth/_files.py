"""Private files of the config root: owner-only reads, atomic 0600 writes, locks.

Contracts (stdlib + :mod:`vq._fs` only, so the CLI can use them without FastAPI):

* :func:`read_private` refuses a file that is not a regular file or that has any
  group/other permission bit (:class:`UnsafeFile`, a ConfigError, exit 9). Its message
  names the file by its base name and the ``chmod 600`` fix, never a full path and never
  the file's content.
* :func:`write_private` replaces a file atomically with mode 0600, creating the config
  root (mode 0700) first. :func:`create_private` creates it only if absent (a hard link
  of a fully written temp file, so a racing reader never sees a partial secret).
* :func:`locked` holds the ``<file>.lock`` flock across a read-modify-write.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from vq._fs import atomic_write_bytes, fsync_dir, spec_lock
from vq.errors import ConfigError

__all__ = [
    "UnsafeFile",
    "create_private",
    "ensure_config_root",
    "locked",
    "read_json_private",
    "read_private",
    "write_json_private",
    "write_private",
]

#: No credential file of the console is anywhere near this big.
MAX_BYTES = 4 * 1024 * 1024


class UnsafeFile(ConfigError):
    """A credential file with group/other permission bits (or not a regular file)."""

    default_reference = "unsafe-permissions"


def ensure_config_root(root: Path) -> None:
    """Create the config root (mode 0700) if it does not exist yet."""
    root.mkdir(mode=0o700, parents=True, exist_ok=True)


def read_private(path: Path, what: str) -> bytes | None:
    """The bytes of an owner-only file, or None when it does not exist.

    Raises :class:`UnsafeFile` when the file may be read or written by anyone but its
    owner (the content is never read in that case).
    """
    try:
        # O_NONBLOCK: a FIFO in place of the file is refused below, never waited on.
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UnsafeFile(
            f"the {what} file ({path.name} in the vq config root) cannot be opened "
            f"({exc.strerror or 'error'})",
            hint=f"make {path.name} a regular file owned by you with `chmod 600`",
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeFile(
                f"the {what} file ({path.name} in the vq config root) is not a regular file",
                hint=f"replace {path.name} with a regular file (mode 0600)",
            )
        if info.st_mode & 0o077:
            raise UnsafeFile(
                f"the {what} file ({path.name} in the vq config root) has group or other "
                f"permission bits (mode {stat.S_IMODE(info.st_mode):04o}); vq refuses to use it",
                hint=f"run `chmod 600` on {path.name} in the vq config root "
                "(VQ_CONFIG_DIR, else $XDG_CONFIG_HOME/vq or ~/.config/vq)",
            )
        chunks = []
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
            if sum(len(c) for c in chunks) > MAX_BYTES:
                raise UnsafeFile(f"the {what} file ({path.name}) is implausibly large")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_json_private(path: Path, what: str) -> Any | None:
    """:func:`read_private` parsed as JSON (None when absent)."""
    data = read_private(path, what)
    if data is None:
        return None
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise ConfigError(
            f"the {what} file ({path.name} in the vq config root) is not valid JSON",
            hint=f"repair or remove {path.name}",
        ) from None


def write_private(path: Path, data: bytes) -> None:
    """Atomically replace ``path`` with ``data``, mode 0600 (config root made 0700)."""
    ensure_config_root(path.parent)
    atomic_write_bytes(path, data, mode=0o600)


def write_json_private(path: Path, payload: Any) -> None:
    write_private(path, json.dumps(payload, indent=1).encode() + b"\n")


def create_private(path: Path, data: bytes) -> bool:
    """Create ``path`` (0600) holding ``data`` unless it exists; True if this call made it."""
    ensure_config_root(path.parent)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_name, 0o600)
        try:
            os.link(tmp_name, path)
        except FileExistsError:
            return False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
    fsync_dir(path.parent)
    return True


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the exclusive flock of ``<path>.lock`` (config root created if needed)."""
    ensure_config_root(path.parent)
    with spec_lock(path):
        yield
