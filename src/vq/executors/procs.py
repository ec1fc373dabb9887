"""Process introspection from ``/proc``: liveness, identity and process groups.

The zombie rule: a process that has exited but has not been reaped yet is a zombie
(state ``Z``, or ``X`` while it is being torn down). It still has a pid, still appears in
``/proc``, ``kill(pid, 0)`` still succeeds on it and ``killpg`` still "reaches" its group.
On this machine PID 1 reaps orphans only every ~2 s, so zombies linger. Every liveness
check here therefore reads the state from ``/proc/<pid>/stat`` and treats ``Z`` and ``X``
as gone; never use ``os.kill(pid, 0)`` to decide whether a process is alive.

Identity: a pid can be reused once its process is reaped. ``start_ticks`` (field 22 of
``/proc/<pid>/stat``, clock ticks since boot) together with the pid identifies one
process for the life of the machine; :func:`matches_identity` compares both.

The ``/proc/<pid>/stat`` reading itself (:class:`ProcStat`, :func:`read_stat`,
:func:`is_alive`) lives in :mod:`vq._proc_stat`, where the CLI may use it too; it is
re-exported here.

Everything here is Linux-only, reads ``/proc`` without caching, and never raises for a
process that vanishes mid-read (that reads as "not there").
"""

from __future__ import annotations

import os

from vq._proc_stat import GONE_STATES, ProcStat, is_alive, read_stat

__all__ = [
    "GONE_STATES",
    "ProcStat",
    "group_alive",
    "is_alive",
    "live_group_members",
    "live_groups",
    "matches_identity",
    "read_stat",
    "signal_group",
    "start_ticks",
]


def start_ticks(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot (zombies included); None if absent."""
    stat = read_stat(pid)
    return None if stat is None else stat.start_ticks


def matches_identity(pid: int, expected_start_ticks: int | None) -> bool:
    """True if ``pid`` is alive (not a zombie) and, when given, started at the expected tick.

    ``expected_start_ticks=None`` checks liveness only (pid reuse is then not detected).
    """
    stat = read_stat(pid)
    if stat is None or not stat.alive:
        return False
    return expected_start_ticks is None or stat.start_ticks == expected_start_ticks


def live_group_members(pgid: int) -> list[int]:
    """Pids (sorted) of every live process whose process group is ``pgid``.

    Zombies and dead processes are excluded (the zombie rule). Scans all of ``/proc``:
    O(number of processes), fine for polling a handful of groups once in a while.
    """
    if pgid <= 0:
        return []
    members: list[int] = []
    try:
        with os.scandir("/proc") as scan:
            names = [entry.name for entry in scan]
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        stat = read_stat(int(name))
        if stat is not None and stat.pgid == pgid and stat.alive:
            members.append(stat.pid)
    members.sort()
    return members


def live_groups() -> dict[int, list[int]]:
    """One scan of ``/proc``: every process group with its live (non-zombie) members.

    For passes that ask about many groups at once (startup recovery), instead of one
    full scan per group.
    """
    groups: dict[int, list[int]] = {}
    try:
        with os.scandir("/proc") as scan:
            names = [entry.name for entry in scan]
    except OSError:
        return groups
    for name in names:
        if name.isdigit():
            stat = read_stat(int(name))
            if stat is not None and stat.alive:
                groups.setdefault(stat.pgid, []).append(stat.pid)
    return groups


def group_alive(pgid: int) -> bool:
    """True if at least one live (non-zombie) process is in process group ``pgid``.

    The group leader is checked first (cheap); the full ``/proc`` scan runs only when the
    leader is gone, since members can outlive it.
    """
    leader = read_stat(pgid)
    if leader is not None and leader.alive and leader.pgid == pgid:
        return True
    return bool(live_group_members(pgid))


def signal_group(pgid: int, sig: int) -> bool:
    """``killpg(pgid, sig)``; False if the group does not exist (``ProcessLookupError``).

    True means the kernel found the group, which may consist only of zombies: follow up
    with :func:`group_alive` rather than trusting the return value as liveness.
    ``PermissionError`` and other errors propagate. ``pgid`` must be > 1: 0 would mean
    the caller's own group and 1 init's.
    """
    if pgid <= 1:
        raise ValueError(f"refusing to signal process group {pgid}")
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    return True
