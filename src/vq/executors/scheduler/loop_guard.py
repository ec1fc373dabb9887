"""The thread that owns the lanes' state, checked where that state changes.

A lane's bookkeeping (its :class:`~.lane_jobs.LaneJobs`, its poll schedule, the
:class:`~.lane_set.LaneSet` of lanes) belongs to the daemon loop: worker answers are
applied there, RPC handlers reach it through the loop's call mechanism
(``vq.daemon.holds.LoopCalls``) or read a snapshot the loop publishes. Every mutating
method calls :meth:`LoopGuard.assert_on_loop` first; a call from any other thread raises
:class:`WrongThread` (a programming error, never a user's), so a violation fails loudly
where it happens instead of racing silently.

The guard is bound to the thread that built it and rebound by :meth:`LoopGuard.bind`
when the loop starts on another thread (a daemon composed on one thread and run on
another).
"""

from __future__ import annotations

import threading

__all__ = ["LoopGuard", "WrongThread"]


class WrongThread(RuntimeError):
    """Loop-owned state was touched from a thread other than the loop."""


class LoopGuard:
    """One loop thread's identity (see the module docstring); cheap to check."""

    def __init__(self) -> None:
        self._ident = threading.get_ident()
        self._name = threading.current_thread().name

    def bind(self) -> None:
        """The calling thread is the loop from now on."""
        self._ident = threading.get_ident()
        self._name = threading.current_thread().name

    def on_loop(self) -> bool:
        return threading.get_ident() == self._ident

    def assert_on_loop(self, what: str = "lane state") -> None:
        """Raise :class:`WrongThread` unless the caller runs on the loop thread."""
        if threading.get_ident() != self._ident:
            raise WrongThread(
                f"{what} is owned by the loop thread {self._name!r}; "
                f"called from {threading.current_thread().name!r}"
            )
