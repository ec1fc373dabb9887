"""The local executor's view of job scopes (§4.4, §4.3, §4.7): usage read from a job's
cgroup, leaked scopes before a launch, and a scope's MainPID at reattach.

Everything systemd is asked goes through ``systemctl --user show`` (bounded, see
:mod:`vq.executors.cgroups`); the counters come from the cgroup files
(:mod:`vq.executors.cgroup_usage`).
"""

from __future__ import annotations

import os
import time

from vq.transport.runner import Runner

from . import procs
from .cgroup_usage import cgroup_paths_of, read_cgroup
from .cgroups import scope_info, scope_name, stop_scope
from .launch import LaunchError
from .sampling import GroupUsage

__all__ = ["SCOPE_RETRY_SECONDS", "JobScopes"]

#: Seconds before a scope whose cgroup systemd did not name (yet: the first scan can
#: come before systemd-run made it) is asked about again.
SCOPE_RETRY_SECONDS = 1.0


class JobScopes:
    """Per-job scope lookups, with the scope's cgroup path cached per attempt."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        #: job id -> (its scope's cgroup path or None, monotonic time of the lookup)
        self._paths: dict[str, tuple[str | None, float]] = {}
        self._own_cgroup = cgroup_paths_of(os.getpid()) or {}

    def forget(self, job_id: str) -> None:
        """The attempt ended: its scope's path is not to be reused."""
        self._paths.pop(job_id, None)

    def clear_leak(self, job_id: str) -> None:
        """A scope of this job's name still active (a leak of an earlier attempt) is
        stopped before the launch; one that will not stop refuses the launch."""
        info = scope_info(self.runner, job_id)
        if info is None or not info.active:
            return
        stop_scope(self.runner, job_id)
        again = scope_info(self.runner, job_id)
        if again is not None and again.active:
            raise LaunchError(
                f"a leftover cgroup scope {scope_name(job_id)} (main pid {again.main_pid}) "
                "is still active and could not be stopped",
                hint=f"`systemctl --user stop {scope_name(job_id)}`, then resubmit the job",
            )

    def conflict(self, job_id: str, pgid: int) -> int | None:
        """The scope's MainPID when it names a process outside the job's group (the
        scope is not this attempt's: no reattach), else None."""
        info = scope_info(self.runner, job_id)
        if info is None or not info.main_pid:
            return None
        stat = procs.read_stat(info.main_pid)
        return None if stat is not None and stat.pgid == pgid else info.main_pid

    def _path(self, job_id: str) -> str | None:
        cached = self._paths.get(job_id)
        now = time.monotonic()
        if cached is not None and (cached[0] is not None or now - cached[1] < SCOPE_RETRY_SECONDS):
            return cached[0]
        info = scope_info(self.runner, job_id)
        path = info.control_group if info is not None else None
        self._paths[job_id] = (path, now)
        return path

    def usage(self, job_id: str, pgid: int, *, scoped: bool) -> GroupUsage | None:
        """The job's usage from a cgroup: its named scope, else its process's own."""
        tries: list[tuple[str, dict[str, str]]] = []
        if scoped:
            path = self._path(job_id)
            if path:
                tries.append(("scope", {"memory": path, "cpu": path, "pids": path}))
        own = cgroup_paths_of(pgid)
        if own and any(
            own.get(name) not in (None, "/", self._own_cgroup.get(name))
            for name in ("memory", "cpu")
        ):
            tries.append(("process-cgroup", own))
        for lookup, paths in tries:
            reading = read_cgroup(paths)
            if reading is None or reading.cpu_seconds is None:
                continue
            return GroupUsage(
                pgid,
                reading.rss_bytes or 0,
                reading.cpu_seconds,
                [],
                cgroup_lookup=lookup,
                cpu_time_source=reading.cpu_time_source or "unavailable",
                cgroup_path=reading.path,
                tasks=reading.pids_current,
            )
        return None
