"""Resource samples of whole process groups, from one pass over ``/proc``.

One scan reads every process once and attributes it to its process group, so sampling
fifty jobs costs about what sampling one does. Per group it reports the resident memory
summed over live members (pages shared between members are counted once per member, as
``ps`` would) and the CPU seconds of live members including their reaped children
(utime + stime + cutime + cstime). Zombies are skipped (they hold no memory).

The local executor uses this walk when no cgroup of the job can be read (no job scope,
§5.2, and the recorded process shares the daemon's cgroup): samples then record
``cgroup_lookup = "process-group"`` (or ``"process"`` for :func:`sample_process`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["GroupUsage", "host_memory_used_percent", "sample_groups", "sample_process"]

_PAGE = os.sysconf("SC_PAGE_SIZE")
_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class GroupUsage:
    """One job's usage. ``cgroup_lookup`` says where it was read: ``scope`` (the named
    ``vq-job-<id>.scope``), ``process-cgroup`` (the recorded process's own cgroup),
    ``process-group`` (a ``/proc`` walk of the group) or ``process`` (one process);
    ``cpu_time_source`` which counter gave the CPU time."""

    pgid: int
    rss_bytes: int = 0
    cpu_seconds: float = 0.0
    pids: list[int] = field(default_factory=list)
    cgroup_lookup: str = "process-group"
    cpu_time_source: str = "proc-stat-process-group"
    cgroup_path: str | None = None
    tasks: int | None = None  # pids.current of a cgroup; else the live members counted

    @property
    def rss_mb(self) -> float:
        return self.rss_bytes / (1024 * 1024)


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return None


def sample_groups(pgids: Iterable[int]) -> dict[int, GroupUsage]:
    """Usage of each requested group that still has live members (others are absent)."""
    wanted = set(pgids)
    usage: dict[int, GroupUsage] = {}
    if not wanted:
        return usage
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        raw = _read(f"/proc/{entry}/stat")
        if raw is None:
            continue
        try:
            fields = raw[raw.rindex(b")") + 1 :].split()
            pgid = int(fields[2])
        except (ValueError, IndexError):
            continue
        if pgid not in wanted or fields[0] in (b"Z", b"X", b"x"):
            continue
        statm = _read(f"/proc/{entry}/statm")
        resident = int(statm.split()[1]) * _PAGE if statm else 0
        ticks = sum(int(value) for value in fields[11:15])
        group = usage.setdefault(pgid, GroupUsage(pgid))
        group.rss_bytes += resident
        group.cpu_seconds += ticks / _TICKS
        group.pids.append(int(entry))
    return usage


def sample_process(pid: int) -> GroupUsage | None:
    """One live process alone (the last fallback, when no group can be walked)."""
    raw = _read(f"/proc/{pid}/stat")
    if raw is None:
        return None
    try:
        fields = raw[raw.rindex(b")") + 1 :].split()
        if fields[0] in (b"Z", b"X", b"x"):
            return None
        ticks = sum(int(value) for value in fields[11:15])
    except (ValueError, IndexError):
        return None
    statm = _read(f"/proc/{pid}/statm")
    resident = int(statm.split()[1]) * _PAGE if statm else 0
    return GroupUsage(
        pid,
        resident,
        ticks / _TICKS,
        [pid],
        cgroup_lookup="process",
        cpu_time_source="proc-stat-process",
    )


def host_memory_used_percent() -> float | None:
    """Used memory as a percentage of total (1 - MemAvailable/MemTotal), or None."""
    raw = _read("/proc/meminfo")
    if raw is None:
        return None
    values: dict[bytes, int] = {}
    for line in raw.splitlines():
        name, _, rest = line.partition(b":")
        parts = rest.split()
        if parts:
            values[name] = int(parts[0])
    total = values.get(b"MemTotal")
    available = values.get(b"MemAvailable")
    if not total or available is None:
        return None
    return 100.0 * (1.0 - available / total)
