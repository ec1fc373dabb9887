"""Named crash points for fault-injection tests (stdlib only, a no-op in normal use).

``VQ_TEST_FAULT=<name>`` makes the process SIGKILL itself when it reaches
:func:`crash_point` ``(<name>)``: the test then checks what the next run recovers. The
points are placed between the durable steps of a multi-step operation (archive: temp
written → renamed → recorded → deleted; fetch: staged → published).

``VQ_TEST_HOLD=<name>:<dir>`` makes the thread that reaches :func:`hold_point` ``(<name>)``
create ``<dir>/<name>.held`` and wait until ``<dir>/<name>.go`` exists: a test then
changes the world (say, takes a network link down) at exactly that step.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

__all__ = ["crash_point", "hold_point"]

#: How long a hold waits for its release before going on anyway.
HOLD_LIMIT_SECONDS = 600.0


def crash_point(name: str) -> None:
    """SIGKILL this process here when ``VQ_TEST_FAULT`` names this point."""
    if os.environ.get("VQ_TEST_FAULT") == name:
        os.kill(os.getpid(), signal.SIGKILL)


def hold_point(name: str) -> None:
    """Wait here (blocking only the calling thread) when ``VQ_TEST_HOLD`` names this point:
    announce ``<dir>/<name>.held``, then wait for ``<dir>/<name>.go`` (at most
    :data:`HOLD_LIMIT_SECONDS`)."""
    point, sep, folder = os.environ.get("VQ_TEST_HOLD", "").partition(":")
    if not sep or point != name:
        return
    Path(folder, f"{name}.held").touch()
    release = Path(folder, f"{name}.go")
    limit = time.monotonic() + HOLD_LIMIT_SECONDS
    while not release.exists() and time.monotonic() < limit:
        time.sleep(0.05)
