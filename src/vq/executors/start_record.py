"""The never-started proof's file: one start record per attempt (docs/architecture.md).

The claim gives each attempt a token; the attempt's start record is
``jobs/<id>/_vq/started.<token>``. The collector creates it exclusively (and durably)
before it starts the command, holding ``<pid> <start ticks>``, and starts nothing if it
cannot. :func:`fence` creates it first, holding :data:`FENCED`: if that succeeds (or an
earlier fence did), no collector of the attempt started the command, and none can.
"""

from __future__ import annotations

import os
from pathlib import Path

from vq._fs import read_regular
from vq.domain.spec import JobSpec
from vq.paths import StatePaths

__all__ = ["FENCED", "START_RECORD_PREFIX", "fence", "start_record_path"]

START_RECORD_PREFIX = "started."
FENCED = b"fenced\n"


def start_record_path(paths: StatePaths, spec: JobSpec) -> Path | None:
    """The current attempt's start record (None: a claim without a token)."""
    if spec.launch_attempt is None:
        return None
    return paths.meta_dir(spec.id) / f"{START_RECORD_PREFIX}{spec.launch_attempt}"


def fence(path: Path) -> bool:
    """Create ``path`` exclusively with :data:`FENCED` (fsync'd with its directory).

    True when this call created it or it already holds :data:`FENCED`; False when a
    collector wrote it (the command may have started) or it cannot be created.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except FileExistsError:
        try:
            return read_regular(path, 64) == FENCED
        except OSError:
            return False
    except OSError:
        return False
    try:
        try:
            os.write(fd, FENCED)
            os.fsync(fd)
        finally:
            os.close(fd)
        dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass  # the exclusive create already fenced the attempt; the content is a note
    return True
