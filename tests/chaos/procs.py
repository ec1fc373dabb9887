"""/proc helpers of the chaos harness: a zombie counts as gone (PID 1 reaps orphans
slowly on the test machines), and waits poll a condition against a deadline."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from vq._proc_stat import ProcStat, read_stat

__all__ = [
    "POLL_SECONDS",
    "ProcStat",
    "alive",
    "cmdline",
    "live_pids_with_env",
    "pids",
    "poll",
    "proc_stat",
]

POLL_SECONDS = 0.02


def proc_stat(pid: int) -> ProcStat | None:
    """``/proc/<pid>/stat`` through vq's own reader (a zombie is returned, see ``alive``)."""
    return read_stat(pid)


def alive(pid: int, start_ticks: int | None = None) -> bool:
    stat = proc_stat(pid)
    if stat is None or not stat.alive:
        return False
    return start_ticks is None or stat.start_ticks == start_ticks


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def live_pids_with_env(marker: str) -> list[int]:
    """Live pids whose environment contains ``marker`` (cf. conftest.processes_with_env)."""
    wanted = marker.encode()
    found = []
    for pid in pids():
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                if wanted not in handle.read().split(b"\0"):
                    continue
        except OSError:
            continue
        if alive(pid):
            found.append(pid)
    return found


def poll(predicate: Callable[[], Any], timeout: float) -> Any:
    """``predicate()``'s first truthy value, or None once ``timeout`` seconds passed."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(POLL_SECONDS)
