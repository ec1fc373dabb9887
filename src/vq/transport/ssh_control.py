"""Where SshRunner keeps its ControlMaster sockets, and the checks on that directory.

``$XDG_RUNTIME_DIR/vq`` when that directory exists, else ``<tmp>/vq-ssh-<uid>``. The
directory is created 0700; an existing one is accepted only when it is a real directory
(not a symlink) owned by the caller, and tightened to 0700 when looser. Sockets are
``cm-%C`` (40 hex characters), and ssh first binds ``<path>.<17 random characters>``, which
must fit a unix socket's 107-byte path: a directory too deep for that is refused up front
rather than failing later inside ssh.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from vq.errors import TransportError

__all__ = ["MAX_CONTROL_PATH", "check_socket_room", "default_control_dir", "ensure_control_dir"]

#: sun_path holds 107 bytes; ssh binds ``<ControlPath>.<17 random chars>`` first.
MAX_CONTROL_PATH = 107 - 18


def default_control_dir() -> Path:
    """``$XDG_RUNTIME_DIR/vq`` when that directory exists, else a per-uid temp dir."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        return Path(runtime) / "vq"
    return Path(tempfile.gettempdir()) / f"vq-ssh-{os.geteuid()}"


def check_socket_room(path: Path) -> None:
    """Refuse a directory whose ``cm-%C`` sockets would not fit a unix socket path."""
    socket_len = len(os.fsencode(path)) + len("/cm-") + 40
    if socket_len > MAX_CONTROL_PATH:
        raise TransportError(
            f"SSH control socket path in {path} would be {socket_len} bytes "
            f"(at most {MAX_CONTROL_PATH} fit a unix socket with ssh's temporary suffix)",
            hint="set XDG_RUNTIME_DIR or TMPDIR to a shorter directory",
            reference="ssh-control-dir",
        )


def ensure_control_dir(path: Path) -> Path:
    """Create ``path`` 0700, or accept it when it is a real directory owned by us."""
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700, parents=False)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise TransportError(
            f"SSH control directory {path} is not a directory owned by uid {os.geteuid()}",
            hint="remove it, or point XDG_RUNTIME_DIR at a private directory",
            reference="ssh-control-dir",
        )
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(path, 0o700)
    return path
