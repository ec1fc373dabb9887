"""Host memory pressure (§4.4): pause local jobs above a threshold, resume below another.

Read on every loop pass, whether or not a job runs (a reading is one small ``/proc``
read). Above ``memory_pause_percent`` of host memory in use, every RUNNING local job is
paused (``paused_by = "memory-pressure"``) and dispatch is held, also when no job runs.
Once use falls below ``memory_resume_percent`` (the thresholds in force, so a reload
that raises them releases the hold at the next pass) the hold clears whatever the jobs,
and only the jobs *this guard* paused are resumed; jobs an operator paused stay paused.
An unreadable reading is a no-op (nothing paused, nothing resumed, the hold unchanged).
:attr:`PressureGuard.hold_reason` says why dispatch is held, for ``pending_reason``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from vq.config.settings import WatchdogSettings
from vq.domain.spec import JobSpec
from vq.domain.states import JobState
from vq.errors import VqError
from vq.executors.sampling import host_memory_used_percent
from vq.services.context import ServiceContext
from vq.services.pause import PAUSED_BY_PRESSURE, pause_job, resume_job

from .supervisor import Supervisor

__all__ = ["PressureGuard"]

log = logging.getLogger(__name__)


class PressureGuard:
    def __init__(
        self,
        ctx: ServiceContext,
        supervisor: Supervisor,
        lookup: Callable[[str], JobSpec | None],
        settings: WatchdogSettings,
        on_change: Callable[[JobSpec], None],
        read_percent: Callable[[], float | None] = host_memory_used_percent,
    ) -> None:
        self.ctx = ctx
        self.supervisor = supervisor
        self._lookup = lookup
        self._on_change = on_change
        self._read = read_percent
        self.configure(settings)
        self.paused: set[str] = set()
        self.holding = False
        #: Why dispatch is held (None: not held); a str swapped whole, safe to read anywhere.
        self.hold_reason: str | None = None

    def configure(self, settings: WatchdogSettings) -> None:
        """Apply (re)loaded thresholds."""
        self._pause_at = settings.memory_pause_percent
        self._resume_below = settings.memory_resume_percent

    def check(self) -> None:
        percent = self._read()
        if percent is None:
            return
        if percent >= self._pause_at:
            if not self.holding:
                log.warning("host memory at %.1f%%: pausing local jobs, holding dispatch", percent)
            self.holding = True
            self._pause_running()
        elif percent < self._resume_below and self.holding:
            log.info(
                "host memory at %.1f%%: dispatch resumes; resuming the jobs paused for it", percent
            )
            self.holding = False
            for job_id in sorted(self.paused):
                self._resume(job_id)
            self.paused.clear()
        self.hold_reason = (
            f"dispatch held for host memory pressure: {percent:.1f}% in use (pauses at "
            f"{self._pause_at:g}%, resumes below {self._resume_below:g}%)"
            if self.holding
            else None
        )

    def _pause_running(self) -> None:
        for job_id, holder in list(self.supervisor.holders.items()):
            spec = self._lookup(job_id)
            if holder.collector_done or spec is None or spec.state is not JobState.RUNNING:
                continue
            try:
                outcome = pause_job(self.ctx, job_id, by=PAUSED_BY_PRESSURE)
            except VqError as exc:
                log.info("job %s not paused: %s", job_id, exc.message)
                continue
            self._on_change(outcome.spec)
            if outcome.changed:
                self.paused.add(job_id)

    def _resume(self, job_id: str) -> None:
        try:
            outcome = resume_job(self.ctx, job_id, only_paused_by=PAUSED_BY_PRESSURE)
        except VqError as exc:
            log.info("job %s not resumed: %s", job_id, exc.message)
            return
        self._on_change(outcome.spec)
