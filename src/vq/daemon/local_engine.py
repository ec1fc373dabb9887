"""The local engine: the dispatcher's claims and launches on this host, as one of the
engines the daemon loop ticks (:class:`vq.executors.base.Engine`).

Its jobs are taken over at a restart by the daemon's recovery pass
(:mod:`vq.daemon.recovery`), spec by spec; its launches are answered through the
supervisor's queue, which wakes the loop.
"""

from __future__ import annotations

from vq.executors.base import HostExecutor

from .dispatch import Dispatcher
from .supervisor import Supervisor

__all__ = ["LocalEngine"]


class LocalEngine:
    """Claim and launch on this host (see the module docstring)."""

    name = "local"

    def __init__(
        self, dispatcher: Dispatcher, supervisor: Supervisor, executor: HostExecutor
    ) -> None:
        self._dispatcher = dispatcher
        self._supervisor = supervisor
        self._executor = executor

    def tick(self) -> None:
        """Dispatch what admission allows (the local executor launches it)."""
        self._dispatcher.run_pass()

    def next_deadline(self) -> float | None:
        """When a kill grace or a launch's deadline of a local job falls due."""
        return self._supervisor.next_deadline()

    def close(self) -> None:
        """Stop the launcher; running jobs go on."""
        self._executor.close()
