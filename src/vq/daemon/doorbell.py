"""The multi-user daemon's doorbell: any local user may ask it to look for new specs now.

Users' CLIs cannot reach ``daemon.sock`` (the admin group's), so after writing a spec to
their own tree they ring ``<system-root>/doorbell.sock``, a datagram socket open to every
local user (0666). A ring carries no data and no authority: whatever it holds is read and
dropped, and all it does is make the loop list the owners' queues at its next pass
instead of at the next periodic rescan (:func:`vq.client.ring_doorbell` rings). Rings are
taken at most every :data:`MIN_RING_INTERVAL` seconds, so a user ringing in a loop costs
the daemon at most that many listings.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["Doorbell"]

log = logging.getLogger("vq.daemon")

#: The least time between two rings the daemon acts on.
MIN_RING_INTERVAL = 0.005


class Doorbell:
    """The listening side: ``on_ring`` runs on the doorbell's thread for each ring."""

    def __init__(self, path: Path, on_ring: Callable[[], None]) -> None:
        self.path = path
        self._on_ring = on_ring
        self._sock: socket.socket | None = None

    def start(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(str(self.path))
        os.chmod(self.path, 0o666)  # noqa: S103 - any local user may ring; it grants nothing
        self._sock = sock
        threading.Thread(target=self._listen, name="vq-doorbell", daemon=True).start()

    def _listen(self) -> None:
        sock = self._sock
        while sock is not None:
            try:
                sock.recv(64)
            except OSError:
                return  # closed by stop()
            self._on_ring()
            time.sleep(MIN_RING_INTERVAL)

    def stop(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
