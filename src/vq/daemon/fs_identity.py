"""Acting on the filesystem as a job's owner, on one thread only (Linux fsuid and fsgid).

The multi-user daemon writes a job a user hands it over their submit socket
(:mod:`vq.daemon.owner_submit`) *as that user*: :func:`acting_as` sets the calling
thread's filesystem uid and gid (``setfsuid``/``setfsgid``, which are per thread) and
its supplementary groups (the raw ``setgroups`` system call, also per thread; the libc
wrapper would change every thread) to the owner's. The kernel then checks every open,
mkdir and rename of that thread with the owner's permissions and without root's
filesystem capabilities, and owns what it creates by the owner, so a link the owner
planted in their tree gives them nothing they did not have. Every other thread of the
daemon stays root.

Contract: the switch is verified in ``/proc/thread-self/status`` before the body runs
and undone (and verified again) when it ends, even by an exception; a switch that does
not take raises :class:`IdentityError` and the body never runs. An undo that does not
take ends the process (``os._exit``): a daemon thread left with a user's identity must
never serve anything else.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform
import pwd
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["FsIdentity", "IdentityError", "acting_as", "supported"]

log = logging.getLogger("vq.daemon")

#: ``setgroups`` (the 32-bit gid form) by machine; elsewhere :func:`acting_as` refuses.
_SYS_SETGROUPS = {"x86_64": 116, "aarch64": 159}

_libc = ctypes.CDLL(None, use_errno=True)


class IdentityError(Exception):
    """The thread's filesystem identity could not be switched (nothing ran)."""


@dataclass(frozen=True)
class FsIdentity:
    """A user's filesystem identity: uid, primary gid and supplementary groups."""

    uid: int
    gid: int
    groups: tuple[int, ...]

    @classmethod
    def of_uid(cls, uid: int) -> FsIdentity:
        """From the passwd and group databases (KeyError when the uid has no entry)."""
        entry = pwd.getpwuid(uid)
        groups = os.getgrouplist(entry.pw_name, entry.pw_gid)
        return cls(uid, entry.pw_gid, tuple(sorted(set(groups))))


def supported() -> bool:
    """Whether this machine's per-thread ``setgroups`` is known (else nothing is served)."""
    return platform.machine() in _SYS_SETGROUPS and os.path.exists("/proc/thread-self/status")


def _set_groups(groups: tuple[int, ...]) -> None:
    number = _SYS_SETGROUPS.get(platform.machine())
    if number is None:
        raise IdentityError(f"per-thread setgroups is not known on {platform.machine()}")
    array = (ctypes.c_uint * max(len(groups), 1))(*groups)
    if _libc.syscall(ctypes.c_long(number), ctypes.c_size_t(len(groups)), array) != 0:
        raise IdentityError(f"setgroups: {os.strerror(ctypes.get_errno())}")


def _thread_ids() -> tuple[int, int, tuple[int, ...]]:
    """This thread's filesystem uid, filesystem gid and groups, as the kernel reports them."""
    fsuid = fsgid = -1
    groups: tuple[int, ...] = ()
    with open("/proc/thread-self/status", encoding="ascii") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key == "Uid":
                fsuid = int(value.split()[3])
            elif key == "Gid":
                fsgid = int(value.split()[3])
            elif key == "Groups":
                groups = tuple(sorted({int(g) for g in value.split()}))
    return fsuid, fsgid, groups


def _switch(uid: int, gid: int, groups: tuple[int, ...]) -> None:
    """Groups, then gid, then uid (the order that keeps the capabilities each step needs)."""
    _set_groups(groups)
    _libc.setfsgid(ctypes.c_uint(gid))
    _libc.setfsuid(ctypes.c_uint(uid))


@contextmanager
def acting_as(who: FsIdentity) -> Iterator[None]:
    """Run the body with this thread's filesystem identity switched to ``who``."""
    if who.uid == 0:
        raise IdentityError("refusing to act as uid 0 on behalf of a user")
    saved = tuple(sorted(set(os.getgroups())))
    saved_ids = _thread_ids()
    wanted = tuple(sorted(set(who.groups)))
    try:
        _switch(who.uid, who.gid, wanted)
        if _thread_ids() != (who.uid, who.gid, wanted):
            raise IdentityError(
                f"the thread's identity did not switch to {who.uid}:{who.gid} "
                f"(it is {_thread_ids()})"
            )
        yield
    finally:
        try:
            _libc.setfsuid(ctypes.c_uint(saved_ids[0]))
            _libc.setfsgid(ctypes.c_uint(saved_ids[1]))
            _set_groups(saved)
            restored = _thread_ids() == saved_ids
        except (IdentityError, OSError, ValueError):
            restored = False
        if not restored:
            log.critical("a thread could not take back root's identity; exiting")
            os._exit(70)
