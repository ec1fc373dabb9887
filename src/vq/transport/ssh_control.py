"""Where SshRunner keeps its ControlMaster sockets, and the checks on that directory.

``$XDG_RUNTIME_DIR/vq`` when that directory exists, else ``<tmp>/vq-ssh-<uid>``. The
directory is created 0700; an existing one is accepted only when it is a real directory
(not a symlink) owned by the caller, and tightened to 0700 when looser.

One socket per connection shape (:func:`control_path`): ``cm-<40 hex>``, a SHA-1 of
everything vq gives ssh that shapes the connection (the ssh program, the destination as
written, the host key policy, every ``ssh_options`` word: a ProxyCommand, ``-p``, ``-l``,
``-i``, ``-J``, ``-F``…) and of the identity of the ssh configuration files read (path,
inode, size, mtime). ssh's own ``%C`` hashes only the resolved user, host and port: two
host entries for one machine, one through a ProxyCommand and one direct, would share one
master, and a stalled proxy would make both unreachable. Identical shapes share a master,
as before (the daemon's and the CLI's calls to one host). ssh first binds
``<path>.<17 random characters>``, which must fit a unix socket's 107-byte path (104 on
the BSDs, hence the short fixed-length name): a directory too deep for that is refused up
front rather than failing later inside ssh.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pwd
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path

from vq.errors import TransportError

__all__ = [
    "MAX_CONTROL_PATH",
    "check_socket_room",
    "config_files",
    "control_path",
    "default_control_dir",
    "ensure_control_dir",
]

#: sun_path holds 107 bytes; ssh binds ``<ControlPath>.<17 random chars>`` first.
MAX_CONTROL_PATH = 107 - 18
#: The length of a socket's key: a SHA-1 in hex, as long as ssh's own ``%C``.
_KEY_HEX = 40
#: ssh's options that take an argument (``ssh(1)``): their next word is not an option.
_WITH_ARGUMENT = frozenset("BbcDEeFIiJLlmOoPpQRSWw")
#: The system-wide configuration, read when no ``-F`` names another file.
_SYSTEM_CONFIG = "/etc/ssh/ssh_config"


def control_path(
    control_dir: Path,
    *,
    ssh_program: str,
    destination: str,
    host_key_policy: str,
    ssh_options: Sequence[str],
) -> Path:
    """The ControlPath of the master for one connection shape (see the module docstring).

    The same arguments (and unchanged configuration files) give the same path, in any
    process; any difference in them gives another path, so another master.
    """
    files = [[path, _file_identity(path)] for path in config_files(ssh_options)]
    shape = [ssh_program, destination, host_key_policy, list(ssh_options), files]
    key = hashlib.sha1(json.dumps(shape).encode(), usedforsecurity=False).hexdigest()
    return control_dir / f"cm-{key[:_KEY_HEX]}"


def config_files(ssh_options: Sequence[str]) -> list[str]:
    """The ssh configuration files that ``ssh [ssh_options…] DEST`` reads: the last
    ``-F FILE`` (``-F none``: none), else the user's ``~/.ssh/config`` and the system's."""
    named: str | None = None
    words = iter(ssh_options)
    for word in words:
        if not word.startswith("-") or word == "--":
            break  # the destination or the end of the options: ssh reads no further
        for at, letter in enumerate(word[1:], start=1):
            if letter not in _WITH_ARGUMENT:
                continue
            value = word[at + 1 :] or next(words, "")
            if letter == "F":
                named = value
            break
    if named is not None:
        return [] if named == "none" else [named]
    return [str(_home() / ".ssh" / "config"), _SYSTEM_CONFIG]


def _home() -> Path:
    """The home directory ssh expands ``~`` to: the password database's, not ``$HOME``."""
    try:
        return Path(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:
        return Path.home()


def _file_identity(path: str) -> list[int] | None:
    """(device, inode, size, mtime in ns) of ``path``, None when it cannot be read: an
    edited configuration gets masters of its own, the old ones left to expire."""
    try:
        info = os.stat(os.path.expanduser(path))
    except (OSError, ValueError):
        return None
    return [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns]


def default_control_dir() -> Path:
    """``$XDG_RUNTIME_DIR/vq`` when that directory exists, else a per-uid temp dir."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        return Path(runtime) / "vq"
    return Path(tempfile.gettempdir()) / f"vq-ssh-{os.geteuid()}"


def check_socket_room(path: Path) -> None:
    """Refuse a directory whose ``cm-<key>`` sockets would not fit a unix socket path."""
    socket_len = len(os.fsencode(path)) + len("/cm-") + _KEY_HEX
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
