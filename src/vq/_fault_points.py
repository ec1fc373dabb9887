"""Named crash points for fault-injection tests (stdlib only, a no-op in normal use).

``VQ_TEST_FAULT=<name>`` makes the process SIGKILL itself when it reaches
:func:`crash_point` ``(<name>)``: the test then checks what the next run recovers. The
points are placed between the durable steps of a multi-step operation (archive: temp
written → renamed → recorded → deleted; fetch: staged → published).
"""

from __future__ import annotations

import os
import signal

__all__ = ["crash_point"]


def crash_point(name: str) -> None:
    """SIGKILL this process here when ``VQ_TEST_FAULT`` names this point."""
    if os.environ.get("VQ_TEST_FAULT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
