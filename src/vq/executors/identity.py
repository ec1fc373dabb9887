"""Is a recorded process group still *this job's* group? (PID-reuse safety.)

A group is accepted as the job's when its leader (the collector, pid == pgid) is alive
with the recorded start-time fingerprint, or — the leader being gone — when a live
member's environment carries ``VQ_JOB_ID=<id>`` (the collector exports it to the
command). Zombies never count as alive (PID 1 here reaps orphans slowly).
"""

from __future__ import annotations

import os

from vq.executors import procs

__all__ = ["find_job_processes", "group_is_job", "job_env_marker", "job_processes"]


def job_env_marker(job_id: str) -> bytes:
    return f"VQ_JOB_ID={job_id}".encode()


def _environ_has(pid: int, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return marker in handle.read().split(b"\0")
    except OSError:
        return False


def group_is_job(job_id: str, pgid: int | None, start_ticks: int | None) -> bool:
    """Whether live processes of ``pgid`` belong to ``job_id`` (see module contract)."""
    if pgid is None or pgid <= 1:
        return False
    leader = procs.read_stat(pgid)
    if leader is not None and leader.state not in ("Z", "X"):
        # A different start time means the pid was reused by an unrelated process.
        return start_ticks is None or leader.start_ticks == start_ticks
    marker = job_env_marker(job_id)
    return any(_environ_has(pid, marker) for pid in procs.live_group_members(pgid))


def find_job_processes(job_id: str) -> list[int]:
    """Live pids whose environment names ``job_id`` (recovery of an unrecorded launch)."""
    marker = job_env_marker(job_id)
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and procs.is_alive(int(entry)) and _environ_has(int(entry), marker):
            found.append(int(entry))
    return found


def job_processes() -> dict[str, list[int]]:
    """One scan of ``/proc``: live pids by the ``VQ_JOB_ID`` in their environment."""
    found: dict[str, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or not procs.is_alive(int(entry)):
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:
            continue
        for item in environ.split(b"\0"):
            if item.startswith(b"VQ_JOB_ID="):  # the variable itself, not a suffix of another
                found.setdefault(item[10:].decode(errors="replace"), []).append(int(entry))
                break
    return found
