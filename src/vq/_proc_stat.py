"""Process liveness from ``/proc/<pid>/stat``, under the zombie rule.

A process that has exited but has not been reaped yet is a zombie (state ``Z``, or ``X``
while it is being torn down): it still has a pid, still appears in ``/proc`` and
``kill(pid, 0)`` still succeeds on it. On a host whose PID 1 reaps orphans slowly, zombies
linger, so liveness is read from the process's state here, never from ``kill(pid, 0)``.

The one owner of this reading for every layer: the executors' process introspection
(:mod:`vq.executors.procs`, which adds identity and process groups) builds on it, and the
CLI (``vq daemon stop`` waiting for the daemon to exit) and ``vq doctor`` use
:func:`is_alive` without reaching into the executors. Linux-only; reads ``/proc`` without
caching and never raises for a process that vanishes mid-read (that reads as "not there").
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GONE_STATES", "ProcStat", "is_alive", "read_stat"]

#: Process states that mean "exited" even though the pid still shows in /proc.
GONE_STATES = frozenset({"Z", "X", "x"})


@dataclass(frozen=True)
class ProcStat:
    """The fields of ``/proc/<pid>/stat`` that vq needs."""

    pid: int
    state: str
    ppid: int
    pgid: int
    start_ticks: int

    @property
    def alive(self) -> bool:
        """True unless the process is a zombie or dead (see the module's zombie rule)."""
        return self.state not in GONE_STATES


def _parse_stat(pid: int, raw: bytes) -> ProcStat | None:
    # "pid (comm) state ppid pgrp session tty_nr tpgid flags ... starttime(22) ..."
    # comm may contain spaces and ')' itself, so split at the *last* ')'.
    try:
        fields = raw[raw.rindex(b")") + 1 :].split()
        return ProcStat(
            pid=pid,
            state=fields[0].decode("ascii"),
            ppid=int(fields[1]),
            pgid=int(fields[2]),
            start_ticks=int(fields[19]),
        )
    except (ValueError, IndexError, UnicodeDecodeError):
        return None


def read_stat(pid: int) -> ProcStat | None:
    """Parse ``/proc/<pid>/stat``; None if there is no such process (or it vanished).

    A zombie is still returned (with ``state == "Z"``): use :func:`is_alive` to decide
    liveness.
    """
    if pid <= 0:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:  # ENOENT, or ESRCH while the process is being torn down
        return None
    return _parse_stat(pid, raw)


def is_alive(pid: int) -> bool:
    """True if ``pid`` exists and is neither a zombie nor dead (state not ``Z``/``X``)."""
    stat = read_stat(pid)
    return stat is not None and stat.alive
