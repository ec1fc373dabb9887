"""A job's captured environment on disk: ``jobs/<id>/_vq/environment`` (mode 0600).

Written once at submit, before the spec (the acceptance boundary), and read by the
collector at every launch of the job, so retries reuse it; a resubmit or a sibling gets a
copy. The format is :class:`vq.domain.environment.CapturedEnvironment`. Values are
secrets as far as vq knows: nothing here logs or returns them.
"""

from __future__ import annotations

import os
from pathlib import Path

from vq.domain.environment import CapturedEnvironment
from vq.paths import StatePaths

__all__ = ["ENVIRONMENT_FILE", "copy_environment", "environment_path", "write_environment"]

ENVIRONMENT_FILE = "environment"
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def environment_path(paths: StatePaths, job_id: str) -> Path:
    return paths.environment(job_id)


def _write_new(path: Path, data: bytes) -> None:
    fd = os.open(path, _CREATE, 0o600)
    try:
        os.fchmod(fd, 0o600)  # whatever the umask
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def write_environment(paths: StatePaths, job_id: str, captured: CapturedEnvironment | None) -> None:
    """Store ``captured`` for ``job_id`` (whose ``_vq/`` must exist). Nothing is written
    for no capture or one that changes nothing (NONE without variables)."""
    if captured is None or captured.is_empty:
        return
    _write_new(environment_path(paths, job_id), captured.to_bytes())


def copy_environment(paths: StatePaths, from_id: str, to_id: str) -> None:
    """Give ``to_id`` the captured environment of ``from_id``, if it has one."""
    try:
        data = environment_path(paths, from_id).read_bytes()
    except FileNotFoundError:
        return
    _write_new(environment_path(paths, to_id), data)
