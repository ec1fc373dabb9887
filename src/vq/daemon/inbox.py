"""Wake-ups and calls handed to the daemon's main loop by other threads.

The main loop is the only thread that touches the supervisor; an RPC handler or a
reader thread that needs it queues a call with :meth:`LoopInbox.call_soon` and the
loop runs it at the start of its next tick. :meth:`LoopInbox.wake` ends the loop's
wait early (a submit, a collector exit, a signal).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["LoopInbox"]


class LoopInbox:
    """The loop's wake event and its queue of calls (thread-safe)."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._calls: list[Callable[[], object]] = []
        self._lock = threading.Lock()

    def wake(self) -> None:
        """End the loop's current wait (or the next one) at once."""
        self._event.set()

    def call_soon(self, fn: Callable[[], object]) -> None:
        """Run ``fn`` on the main loop, at the start of its next tick."""
        with self._lock:
            self._calls.append(fn)
        self.wake()

    def run_calls(self) -> None:
        """Run the queued calls, oldest first (on the loop)."""
        with self._lock:
            calls, self._calls = self._calls, []
        for fn in calls:
            fn()

    def wait(self, timeout: float) -> None:
        """Sleep until woken or ``timeout`` seconds pass; then clear the wake-up."""
        self._event.wait(timeout)
        self._event.clear()
