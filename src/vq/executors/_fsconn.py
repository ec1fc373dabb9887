"""One connection to a spawned fork server and the replies awaited on it (client side).

Internal to :mod:`vq.executors.forkserver_client`.
"""

from __future__ import annotations

import collections
import json
import logging
import socket
import subprocess
import threading
from typing import Any

from vq.executors.launch import LaunchCallback, Launched

__all__ = ["Connection", "Waiter"]

log = logging.getLogger("vq.executors.forkserver_client")

_REAP_SECONDS = 5.0


class Waiter:
    __slots__ = ("callback", "error", "event", "launched", "sent")

    def __init__(self, callback: LaunchCallback | None = None) -> None:
        self.event = threading.Event()
        self.launched: Launched | None = None
        self.error: str | None = None
        self.callback = callback
        self.sent = False

    def settle(self, job_id: str) -> None:
        """Wake the blocking caller, or run the asynchronous caller's callback."""
        if self.callback is None:
            self.event.set()
            return
        try:
            self.callback(job_id, self.launched, self.error, self.sent)
        except Exception:
            log.exception("launch callback failed for job %s", job_id)


class Connection:
    """One spawned server: its process, its socket and the replies awaited from it."""

    def __init__(self, sock: socket.socket, proc: subprocess.Popen[bytes]) -> None:
        self.sock = sock
        self.proc = proc
        self.lock = threading.Lock()  # guards writes, pending, pongs and dead
        self.pending: dict[str, Waiter] = {}
        self.pongs: collections.deque[Waiter] = collections.deque()
        self.dead = False
        self.closing = False
        self.reader: threading.Thread | None = None

    def usable(self) -> bool:
        return not self.dead and self.proc.poll() is None

    def send(self, message: dict[str, Any]) -> None:
        """Write one line; the caller holds ``lock``. A failed write kills the stream."""
        data = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        try:
            self.sock.sendall(data, socket.MSG_NOSIGNAL)
        except OSError:
            # A partial line would corrupt the stream: make the server see EOF and exit.
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            raise

    def reap(self) -> int | None:
        try:
            return self.proc.wait(timeout=_REAP_SECONDS)
        except subprocess.TimeoutExpired:
            log.warning("fork server %d did not exit; killing it", self.proc.pid)
            self.proc.kill()
            return self.proc.wait()
