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

from vq._safe_open import open_dir_beneath
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


def make_meta_dir(tree: Path, meta: Path) -> tuple[int, int]:
    """Ensure ``_vq/`` inside an owner's workspace, walked from the owner's ``tree``
    without following a planted symlink (LaunchError otherwise). Returns the directory's
    ``(st_dev, st_ino)``: the collector writes its markers into that very directory only
    (``drop["meta"]``), whatever the owner renames or swaps afterwards."""
    try:
        fd = open_dir_beneath(tree, meta, create=0o755)
    except OSError as exc:
        raise LaunchError(f"{meta} is not a usable directory: {exc.strerror}") from exc
    try:
        info = os.fstat(fd)
    finally:
        os.close(fd)
    return info.st_dev, info.st_ino
