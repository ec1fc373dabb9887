"""Handlers of ``ping`` (who answers, since when, with what) and ``wake``."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from vq import __version__
from vq.protocol.methods import CONTRACTS, EmptyParams, EmptyResult, PingResult
from vq.services.capacity import advertised_caps
from vq.services.context import ServiceContext

from ..inbox import LoopInbox

__all__ = ["DaemonFacts", "InfoHandlers"]


@dataclass
class DaemonFacts:
    """What ``ping`` reports about the daemon process; the start-up fills in the probes."""

    started_monotonic: float
    started_at: datetime
    provenance: dict[str, str | None] = field(default_factory=dict)
    cgroup_mode: str = "direct"
    cgroup_reason: str = "not probed yet"
    #: ``time.monotonic()`` of the main loop's latest pass (``health``), None before it.
    loop_progress_at: float | None = None
    #: The storage hold (message and since), or None (see :mod:`vq.daemon.storage`).
    storage_hold: Callable[[], dict[str, str] | None] = lambda: None


class InfoHandlers:
    """``ping`` and ``wake`` over the daemon's facts, service context and loop."""

    def __init__(
        self,
        ctx: ServiceContext,
        facts: DaemonFacts,
        inbox: LoopInbox,
        affinity_on: Callable[[], bool],
        dispatch_hold: Callable[[], str | None],
    ) -> None:
        self._affinity_on = affinity_on
        self._dispatch_hold = dispatch_hold
        self._ctx = ctx
        self._facts = facts
        self._inbox = inbox

    def ping(self, _: EmptyParams) -> PingResult:
        facts = self._facts
        return PingResult(
            version=__version__,
            pid=os.getpid(),
            uptime_seconds=round(time.monotonic() - facts.started_monotonic, 3),
            started_at=facts.started_at.isoformat(),
            state_root=str(self._ctx.paths.root),
            methods=sorted(CONTRACTS),
            provenance=facts.provenance,
            cgroup_mode=facts.cgroup_mode,
            cgroup_reason=facts.cgroup_reason,
            cpu_affinity=self._affinity_on(),
            dispatch_hold=self._dispatch_hold(),
            storage_hold=facts.storage_hold(),
            # A root daemon of this build is always the --allow-root single-user kind.
            root_single_user=os.geteuid() == 0,
            **advertised_caps(self._ctx),
        )

    def wake(self, _: EmptyParams) -> EmptyResult:
        self._inbox.wake()
        return EmptyResult()
