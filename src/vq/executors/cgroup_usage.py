"""Usage of a job read from its cgroup files (§4.4): the named scope, or a process's cgroup.

A cgroup path (``/user.slice/…/vq-job-<id>.scope``, as systemd's ``ControlGroup`` or
``/proc/<pid>/cgroup`` names it) is looked up under the unified (v2) hierarchy and under
each v1 controller's mount, so hosts with cgroup v2, v1 or both are read alike:

* resident memory: ``memory.stat`` ``anon`` (v2) or ``total_rss`` (v1) — anonymous
  memory, the part of the cgroup's charge that RSS sampling also sees (page cache is
  left out, so a job that reads big files is not judged by its cache);
* CPU time: ``cpu.stat`` ``usage_usec`` (v2) or ``cpuacct.usage`` (v1, nanoseconds);
* tasks: ``pids.current`` and ``pids.peak`` where the pids controller has them.

Reads are bounded, never raise, and answer None for what is not there.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["CGROUP_ROOT", "CgroupReading", "cgroup_paths_of", "read_cgroup"]

CGROUP_ROOT = Path("/sys/fs/cgroup")
_MAX_READ = 64 * 1024


@dataclass(frozen=True)
class CgroupReading:
    """What one cgroup's files said; ``cpu_time_source`` names the file CPU came from."""

    path: str
    rss_bytes: int | None
    cpu_seconds: float | None
    cpu_time_source: str | None
    pids_current: int | None
    pids_peak: int | None


def _text(path: Path) -> str | None:
    try:
        with open(path, "rb") as handle:
            return handle.read(_MAX_READ).decode("ascii", "replace")
    except OSError:
        return None


def _stat_value(text: str | None, key: str) -> int | None:
    for line in (text or "").splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return None


def _int(text: str | None) -> int | None:
    value = (text or "").strip()
    return int(value) if value.isdigit() else None


def _dirs(path: str, controller: str, cgroup_fs: Path) -> list[Path]:
    """Where ``path`` lives for ``controller`` under the cgroup filesystem ``cgroup_fs``:
    v2 first, then the v1 mounts."""
    relative = path.lstrip("/")
    return [
        cgroup_fs / relative,
        cgroup_fs / "unified" / relative,
        *(cgroup_fs / mount / relative for mount in _V1_MOUNTS[controller]),
    ]


_V1_MOUNTS = {
    "memory": ("memory",),
    "cpu": ("cpuacct", "cpu,cpuacct", "cpuacct,cpu"),
    "pids": ("pids",),
}


def read_cgroup(paths: dict[str, str], root: Path = CGROUP_ROOT) -> CgroupReading | None:
    """Read a cgroup given its path per controller (``memory``/``cpu``/``pids``; a v2
    path is the same for all). None when neither memory nor CPU could be read."""
    rss = cpu = current = peak = None
    source = None
    for directory in _dirs(paths.get("memory", ""), "memory", root):
        stat = _text(directory / "memory.stat")
        rss = _stat_value(stat, "anon")
        if rss is None:
            rss = _stat_value(stat, "total_rss")
        if rss is not None:
            break
    for directory in _dirs(paths.get("cpu", ""), "cpu", root):
        usec = _stat_value(_text(directory / "cpu.stat"), "usage_usec")
        if usec is not None:
            cpu, source = usec / 1e6, "cgroup-cpu.stat"
            break
        nanos = _int(_text(directory / "cpuacct.usage"))
        if nanos is not None:
            cpu, source = nanos / 1e9, "cgroup-cpuacct.usage"
            break
    for directory in _dirs(paths.get("pids", ""), "pids", root):
        current = _int(_text(directory / "pids.current"))
        if current is not None:
            peak = _int(_text(directory / "pids.peak"))
            break
    if rss is None and cpu is None:
        return None
    shown = paths.get("memory") or paths.get("cpu") or ""
    return CgroupReading(shown, rss, cpu, source, current, peak)


def cgroup_paths_of(pid: int) -> dict[str, str] | None:
    """``/proc/<pid>/cgroup`` as controller → path (``memory``, ``cpu``, ``pids``; the
    v2 line fills those a v1 line does not name). None when unreadable."""
    text = _text(Path(f"/proc/{pid}/cgroup"))
    if text is None:
        return None
    v1: dict[str, str] = {}
    unified = None
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if not controllers:
            unified = path
            continue
        for name in controllers.split(","):
            if name in ("memory", "pids"):
                v1[name] = path
            elif name in ("cpuacct", "cpu") and "cpu" not in v1:
                v1["cpu"] = path
    for name in ("memory", "cpu", "pids"):
        if name not in v1 and unified is not None:
            v1[name] = unified
    return v1
