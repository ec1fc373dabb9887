"""The values exchanged with the fork server: launch requests, answers and exits.

Shared by :mod:`vq.executors.forkserver_client` (which owns the server process) and the
daemon's supervisor and dispatcher. Plain data; no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vq.errors import VqError

__all__ = [
    "COLLECTOR_NOT_STARTED",
    "SERVER_EXITED",
    "CollectorExit",
    "LaunchCallback",
    "LaunchError",
    "LaunchRequest",
    "Launched",
]


#: The error of launches that were in flight when the server died: the collector may or
#: may not have been forked.
SERVER_EXITED = "the fork server exited"


#: The collector's exit status when it did not start the command because it could not
#: create the attempt's start record (already there: recovery fenced the attempt; or a
#: write error such as a full disk). Nothing of the command ran. Mirrors
#: ``_collector.NOT_STARTED``.
COLLECTOR_NOT_STARTED = 3


class LaunchError(VqError):
    """A job could not be launched (or its launch was not confirmed in time)."""

    default_reference = "launch-failed"


@dataclass(frozen=True)
class LaunchRequest:
    """One job to launch. Every path must be absolute; ``argv`` must not be empty.

    ``argv[0]`` is looked up on ``env["PATH"]`` (not the daemon's PATH) unless it contains
    a slash. ``stdout``/``stderr`` are opened in append mode (created 0644 if missing).
    ``thread_defaults`` are set in the command's final environment only where it does
    not set them; ``cpu_affinity`` (None: not pinned) is applied by the collector with
    ``sched_setaffinity`` before the command starts, so the whole group inherits it.
    """

    job_id: str
    argv: list[str]
    cwd: Path
    env: dict[str, str]
    stdout: Path
    stderr: Path
    exit_code_path: Path
    usage_path: Path
    thread_defaults: dict[str, str] = field(default_factory=dict)
    cpu_affinity: list[int] | None = None
    #: Created exclusively (and fsync'd) by the collector before it starts the command;
    #: None for a launch without the never-started proof.
    start_record: Path | None = None
    #: Multi-user mode: the collector drops the command to this owner inside its own
    #: cgroup (:mod:`vq.executors._privdrop`): ``uid``, ``cgroup_parents``, ``mem_mb``,
    #: ``cpus``, ``workdir``. None runs the command as the daemon's own user.
    drop: dict[str, Any] | None = None

    def to_message(self) -> dict[str, Any]:
        """The ``launch`` wire message; raises ValueError for an ill-formed request."""
        if not self.argv:
            raise ValueError(f"job {self.job_id}: argv is empty")
        paths = {
            "cwd": self.cwd,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "exit_code_path": self.exit_code_path,
            "usage_path": self.usage_path,
        }
        if self.start_record is not None:
            paths["start_record"] = self.start_record
        for name, path in paths.items():
            if not Path(path).is_absolute():
                raise ValueError(f"job {self.job_id}: {name} must be absolute, got {path}")
        return {
            "op": "launch",
            "job_id": self.job_id,
            "argv": [str(arg) for arg in self.argv],
            "env": {str(k): str(v) for k, v in self.env.items()},
            **{name: str(path) for name, path in paths.items()},
            "thread_defaults": {str(k): str(v) for k, v in self.thread_defaults.items()},
            "cpu_affinity": [int(c) for c in self.cpu_affinity] if self.cpu_affinity else None,
            **({"drop": dict(self.drop)} if self.drop is not None else {}),
        }


@dataclass(frozen=True)
class Launched:
    """A launched job: its collector's pid, which is also the job's process-group id.

    ``start_ticks`` (field 22 of ``/proc/<pid>/stat``) pins the identity of the pid
    against reuse; see :func:`vq.executors.procs.matches_identity`.
    """

    job_id: str
    pid: int
    pgid: int
    start_ticks: int | None


@dataclass(frozen=True)
class CollectorExit:
    """A collector reaped by the server.

    ``exit_code`` is set when the collector exited (0: receipt and marker written, 1:
    the marker could not be written); ``signal`` when it was killed (then no marker was
    written by it). The job's own exit code is in its exit-code marker.
    """

    job_id: str
    pid: int
    exit_code: int | None
    signal: int | None


#: Called as (job_id, Launched, None, True) on success, or (job_id, None, error, sent) on
#: failure, where ``sent`` says whether the request reached the server (if it did, the
#: collector may have been forked before the server died).
LaunchCallback = Callable[[str, "Launched | None", "str | None", bool], None]
