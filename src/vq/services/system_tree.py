"""The multi-user system root on disk (§2.4, §7.1): its modes, provisioning, startup checks.

Layout and the exact owners and modes this module establishes::

    <system-root>/        root:<admin group>  2775  (daemon.pid, daemon.log, daemon.sock, …)
      users/              root:root           0755  (never group or world writable)
        <uid>/            root:<primary gid>  0750
          queue/ jobs/ archive/ workdirs/     <uid>:<primary gid>  0750
          idempotency/ campaigns/             <uid>:<primary gid>  0750

The daemon-wide files that name jobs (``daemon.log``, ``web.log``, the audit logs, the
terminal index) are made ``root:<admin group>`` 0640 at start: only administrators learn
other users' job ids from them.

Every step works on directory descriptors opened with ``O_NOFOLLOW`` relative to their
parent, so a symlink planted anywhere in the managed part of the tree is refused, never
followed. Any tree vq cannot vouch for stops startup with a :class:`ConfigError` naming the
path: a symlink, a non-directory, a name that is not the canonical decimal uid (``01000``,
``alice``), a uid that is 0, below ``min_uid`` or unknown to the passwd database. A numeric
tree that merely has the wrong owners or modes is migrated to the ones above.
"""

from __future__ import annotations

import grp
import os
import pwd
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from vq._fs import LOG_MODE
from vq.config.multi_user import MultiUserSettings
from vq.errors import ConfigError, NotFound
from vq.paths import StateLayout

__all__ = [
    "ROOT_MODE",
    "USERS_MODE",
    "USER_DIRS",
    "USER_DIR_MODE",
    "USER_TREE_MODE",
    "Account",
    "account",
    "admin_gid",
    "check_system_tree",
    "ensure_system_root",
    "provision_user",
]

ROOT_MODE = 0o2775
USERS_MODE = 0o755
USER_TREE_MODE = 0o750
USER_DIR_MODE = 0o750
_LAYOUT = StateLayout(Path("/"))
_OWNER_LAYOUT = _LAYOUT.for_owner(0)
#: The directories of one user's tree, owned by that user (named by StateLayout): the
#: user's CLI writes below each of them and cannot create them itself in the root-owned
#: ``users/<uid>`` (``idempotency/`` holds a keyed submit's claims, which ``vq campaign``
#: and every ``--idempotency-key`` need; ``campaigns/`` the campaign registry).
USER_DIRS = tuple(
    path.name
    for path in (
        _OWNER_LAYOUT.queue_dir,
        _OWNER_LAYOUT.jobs_dir,
        _OWNER_LAYOUT.archive_dir,
        _OWNER_LAYOUT.workdirs_dir,
        _OWNER_LAYOUT.idempotency_dir,
        _OWNER_LAYOUT.campaigns_dir,
    )
)
_USERS = _LAYOUT.users_dir.name


def _users(root: Path) -> Path:
    return StateLayout(root).users_dir


def _tree(root: Path, uid: int | str) -> Path:
    return _users(root) / str(uid)


_CANONICAL_UID = re.compile(r"[1-9][0-9]{0,9}")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_HINT = "fix or move the path aside (docs/multi-user.md); the daemon will not start until then"


@dataclass(frozen=True)
class Account:
    """A submitter as the passwd database knows it."""

    uid: int
    gid: int
    name: str


def account(user: str | int) -> Account:
    """The passwd entry of a user name or uid (:class:`NotFound` when there is none)."""
    try:
        entry = pwd.getpwuid(user) if isinstance(user, int) else pwd.getpwnam(user)
    except KeyError:
        raise NotFound(
            f"no user {user!r} in the passwd database", hint="check the name with `getent passwd`"
        ) from None
    return Account(entry.pw_uid, entry.pw_gid, entry.pw_name)


def admin_gid(policy: MultiUserSettings) -> int:
    """The gid of ``policy.admin_group`` (:class:`ConfigError` when the group is missing)."""
    try:
        return grp.getgrnam(policy.admin_group).gr_gid
    except KeyError:
        raise ConfigError(
            f"multi_user.admin_group: there is no group {policy.admin_group!r}",
            hint=f"create it (`groupadd {policy.admin_group}`) or name another group",
        ) from None


def _refuse(path: Path, why: str) -> ConfigError:
    return ConfigError(f"{path}: {why}", hint=_HINT, reference="unsafe-system-tree")


@contextmanager
def _open_dir(path: Path, name: str, parent: int | None, *, create: int | None) -> Iterator[int]:
    """A descriptor of directory ``name`` in ``parent`` (no symlink followed).

    ``create`` is the mode to create it with when it is missing, else a missing directory
    is refused.
    """
    try:
        if create is not None:
            try:
                os.mkdir(name, create, dir_fd=parent)
            except FileExistsError:
                pass
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
    except OSError as exc:
        info = None
        try:
            info = os.lstat(name, dir_fd=parent)
        except OSError:
            pass
        if info is not None and stat.S_ISLNK(info.st_mode):
            raise _refuse(path, "is a symlink; vq manages only real directories here") from None
        if info is not None and not stat.S_ISDIR(info.st_mode):
            raise _refuse(path, "is not a directory") from None
        raise _refuse(path, f"cannot be opened: {exc.strerror}") from None
    try:
        yield fd
    finally:
        os.close(fd)


def _set(fd: int, path: Path, uid: int, gid: int, mode: int) -> None:
    try:
        os.fchown(fd, uid, gid)
        os.fchmod(fd, mode)
    except OSError as exc:
        raise _refuse(path, f"cannot set owner {uid}:{gid} mode {mode:o}: {exc.strerror}") from None


def _restrict_logs(root: Path, top: int, gid: int) -> None:
    """Each daemon-wide file that names jobs (``daemon.log``, the audit logs, …) becomes
    ``root:<admin group>`` 0640: users must not learn other users' job ids from it. One
    that is a symlink or not a regular file is refused, never followed."""
    for path in StateLayout(root).job_naming_files:
        try:
            info = os.lstat(path.name, dir_fd=top)
        except FileNotFoundError:
            continue  # created 0640 by its writer (vq._fs.LOG_MODE), in the admin group
        except OSError as exc:
            raise _refuse(path, f"cannot be examined: {exc.strerror}") from None
        if not stat.S_ISREG(info.st_mode):
            raise _refuse(path, "is not a regular file (a symlink, a FIFO, …)")
        try:
            fd = os.open(path.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=top)
        except OSError as exc:
            raise _refuse(path, f"cannot be opened: {exc.strerror}") from None
        try:
            _set(fd, path, 0, gid, LOG_MODE)
        finally:
            os.close(fd)


def ensure_system_root(root: Path, policy: MultiUserSettings) -> None:
    """Create or repair ``root`` (root:admin 2775) and ``root/users`` (root:root 0755)."""
    gid = admin_gid(policy)
    root.parent.mkdir(parents=True, exist_ok=True)
    with _open_dir(root, str(root), None, create=ROOT_MODE) as top:
        _set(top, root, 0, gid, ROOT_MODE)
        with _open_dir(_users(root), _USERS, top, create=USERS_MODE) as users:
            _set(users, _users(root), 0, 0, USERS_MODE)


def _uid_of(path: Path, name: str, policy: MultiUserSettings) -> Account:
    if not _CANONICAL_UID.fullmatch(name):
        raise _refuse(path, "is not a canonical decimal uid (users/<uid>, e.g. users/1001)")
    uid = int(name)
    if uid < policy.min_uid:
        raise _refuse(path, f"uid {uid} is below multi_user.min_uid = {policy.min_uid}")
    try:
        return account(uid)
    except NotFound:
        raise _refuse(path, f"its owner cannot be established: no user has uid {uid}") from None


def _provision(root: Path, users: int, who: Account) -> None:
    tree = _tree(root, who.uid)
    with _open_dir(tree, str(who.uid), users, create=USER_TREE_MODE) as top:
        _set(top, tree, 0, who.gid, USER_TREE_MODE)
        for name in USER_DIRS:
            with _open_dir(tree / name, name, top, create=USER_DIR_MODE) as sub:
                _set(sub, tree / name, who.uid, who.gid, USER_DIR_MODE)


def provision_user(root: Path, policy: MultiUserSettings, who: Account) -> Path:
    """Create or repair ``users/<uid>`` for ``who`` (idempotent); its path."""
    path = _tree(root, who.uid)
    _uid_of(path, str(who.uid), policy)
    ensure_system_root(root, policy)
    with (
        _open_dir(root, str(root), None, create=None) as top,
        _open_dir(_users(root), _USERS, top, create=None) as users,
    ):
        _provision(root, users, who)
    return path


def check_system_tree(root: Path, policy: MultiUserSettings) -> list[Account]:
    """Startup: repair the system root and its logs, refuse any unsafe user tree, migrate
    the rest.

    Returns the provisioned accounts. The system root and ``users/`` are repaired first;
    no user tree is changed unless every one passes, so a refusal leaves them as they were.
    """
    ensure_system_root(root, policy)
    with (
        _open_dir(root, str(root), None, create=None) as top,
        _open_dir(_users(root), _USERS, top, create=None) as users,
    ):
        _restrict_logs(root, top, admin_gid(policy))
        accounts = []
        for name in sorted(os.listdir(users)):
            path = _tree(root, name)
            who = _uid_of(path, name, policy)
            info = os.lstat(name, dir_fd=users)
            if stat.S_ISLNK(info.st_mode):
                raise _refuse(path, "is a symlink; vq manages only real directories here")
            if not stat.S_ISDIR(info.st_mode):
                raise _refuse(path, "is not a directory")
            for sub in USER_DIRS:
                try:
                    inner = os.lstat(f"{name}/{sub}", dir_fd=users)
                except FileNotFoundError:
                    continue
                if not stat.S_ISDIR(inner.st_mode):  # a symlink is not S_ISDIR under lstat
                    raise _refuse(path / sub, "is not a real directory (a symlink or a file)")
            accounts.append(who)
        for who in accounts:
            _provision(root, users, who)
    return accounts
