"""What the local executor adds to a launch in multi-user mode: the privilege drop.

The root daemon never runs a user's command as root. Each launch names the job's trusted
owner (the uid of the ``users/<uid>`` tree its spec was found in, never a spec field)
and the cgroup parents below which the collector creates ``vq-job-<id>``; the collector
(:mod:`vq.executors._privdrop`) joins that group, drops to the owner, verifies the drop
and only then opens the logs and creates ``VQ_WORKDIR``. A job with no trusted owner is
not launched.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vq.domain.spec import JobSpec

from ._privdrop import cgroup_parents
from .launch import LaunchError

__all__ = ["PrivilegeDrop", "make_meta_dir"]


@dataclass(frozen=True)
class PrivilegeDrop:
    """The ``collector`` privilege drop: whose each job is, and where its groups go."""

    owner_of: Callable[[str], int | None]
    parents: dict[str, str] = field(default_factory=cgroup_parents)

    def request(self, spec: JobSpec, mem_mb: int | None, workdir: str) -> dict[str, Any]:
        """The launch request's ``drop``; LaunchError when the job has no trusted owner."""
        uid = self.owner_of(spec.id)
        if uid is None:
            raise LaunchError(f"job {spec.id} has no trusted owner; it is not run")
        return {
            "uid": uid,
            "cgroup_parents": dict(self.parents),
            "mem_mb": mem_mb,
            "cpus": spec.cpus,
            "workdir": workdir,
        }


def make_meta_dir(workspace: Path, meta: Path) -> None:
    """Ensure ``_vq/`` inside an owner's workspace without following a planted symlink:
    the workspace and ``_vq`` must be real directories (LaunchError otherwise)."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(workspace, flags)
    except OSError as exc:
        raise LaunchError(
            f"workspace {workspace} is not a usable directory: {exc.strerror}"
        ) from exc
    try:
        try:
            os.mkdir(meta.name, 0o755, dir_fd=fd)
        except FileExistsError:
            pass
        try:
            os.close(os.open(meta.name, flags, dir_fd=fd))
        except OSError as exc:
            raise LaunchError(f"{meta} is not a real directory: {exc.strerror}") from exc
    finally:
        os.close(fd)
