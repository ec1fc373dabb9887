"""One lane's worker thread: every SSH and scheduler call runs here, never on the loop.

:meth:`Worker.submit` queues a blocking ``work`` callable; its result (or the exception
it raised) is handed to ``done`` *on the daemon loop* through ``deliver`` (the daemon's
``call_soon``), so every state decision is made on the loop thread.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["Worker"]

log = logging.getLogger(__name__)

_STOP = object()


class Worker:
    """A single background thread running queued calls in order."""

    def __init__(self, name: str, deliver: Callable[[Callable[[], None]], None]) -> None:
        self._deliver = deliver
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._in_flight = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, work: Callable[[], Any], done: Callable[[Any], None]) -> None:
        """Run ``work`` on the worker; then ``done(result or exception)`` on the loop."""
        self._in_flight += 1  # on the loop; back down when ``done`` has run there

        def finished(result: Any) -> None:
            self._in_flight -= 1
            done(result)

        self._queue.put((work, finished))

    @property
    def in_flight(self) -> int:
        """Calls submitted whose ``done`` has not run yet (read on the loop)."""
        return self._in_flight

    def close(self) -> None:
        self._queue.put(_STOP)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            work, done = item
            try:
                result = work()
            except Exception as exc:  # delivered to the loop, which decides
                result = exc
            self._deliver(_bind(done, result))


def _bind(done: Callable[[Any], None], result: Any) -> Callable[[], None]:
    return lambda: done(result)
