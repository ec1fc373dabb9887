"""One lane's loop-owned state: the jobs holding its capacity, its poll schedule and
backoff, its delayed follow-ups, and the writes every part makes about a job.

:class:`LaneJobs` is the one object the lane's parts (:mod:`.submission`,
:mod:`.observe`, :mod:`.control`, :mod:`.recovery`) share; none of them keeps lane state
of its own. Every mutating method runs on the daemon loop
(:meth:`.loop_guard.LoopGuard.assert_on_loop`); reads are for the loop too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vq.config.hosts import LaneSettings
from vq.errors import TransportError, VqError
from vq.hosts.health import record_failure

from .jobs import LaneJob
from .loop_guard import LoopGuard
from .ports import LaneContext, LaneLifecycle

__all__ = ["LaneBasis", "LaneJobs"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LaneBasis:
    """What every part of one lane reads: its name and settings, the state root, the one
    lifecycle writer and the lane's clock."""

    name: str
    settings: LaneSettings
    ctx: LaneContext
    lifecycle: LaneLifecycle
    monotonic: Callable[[], float]


class LaneJobs:
    """The lane's jobs and schedule (see the module docstring)."""

    def __init__(self, basis: LaneBasis, guard: LoopGuard) -> None:
        self.basis = basis
        self.guard = guard
        self._jobs: dict[str, LaneJob] = {}
        self._polling = False
        self._next_poll = 0.0
        self._backoff_until = 0.0
        #: (monotonic due time, call): delayed follow-ups such as an accounting sample retry.
        self._later: list[tuple[float, Callable[[], None]]] = []

    # --- reads -------------------------------------------------------------------------------
    def get(self, job_id: str) -> LaneJob | None:
        return self._jobs.get(job_id)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._jobs

    def __len__(self) -> int:
        return len(self._jobs)

    def all(self) -> list[LaneJob]:
        """The tracked jobs (a copy: a step may drop one while the caller iterates)."""
        return list(self._jobs.values())

    def pollable(self) -> dict[str, LaneJob]:
        """Tracked jobs with a scheduler id and no step in flight, by scheduler id."""
        return {
            j.scheduler_job_id: j
            for j in self._jobs.values()
            if j.scheduler_job_id is not None and not j.busy and j.phase != "copying"
        }

    @property
    def polling(self) -> bool:
        """A status round is in flight on the worker."""
        return self._polling

    @property
    def next_poll(self) -> float:
        return self._next_poll

    @property
    def backoff_until(self) -> float:
        return self._backoff_until

    def later_due(self) -> list[float]:
        return [at for at, _ in self._later]

    # --- the schedule (on the loop) ------------------------------------------------------------
    def poll_started(self, next_poll: float) -> None:
        self.guard.assert_on_loop()
        self._polling, self._next_poll = True, next_poll

    def poll_ended(self) -> None:
        self.guard.assert_on_loop()
        self._polling = False

    def poll_at(self, at: float) -> None:
        """The next status round is due at ``at`` (monotonic)."""
        self.guard.assert_on_loop()
        self._next_poll = at

    def later(self, at: float, call: Callable[[], None]) -> None:
        """Run ``call`` on the loop once ``at`` (monotonic) has passed."""
        self.guard.assert_on_loop()
        self._later.append((at, call))

    def run_later(self, now: float) -> None:
        """Run the delayed calls that are due."""
        self.guard.assert_on_loop()
        due = [call for at, call in self._later if at <= now]
        self._later = [(at, call) for at, call in self._later if at > now]
        for call in due:
            call()

    # --- the jobs (on the loop) ----------------------------------------------------------------
    def track(self, job: LaneJob) -> None:
        self.guard.assert_on_loop()
        self._jobs[job.job_id] = job

    def record(
        self,
        job: LaneJob,
        fields: dict[str, Any],
        *,
        durable: bool = True,
        event: Any = None,
    ) -> None:
        """Write ``fields`` to the job's spec through the lifecycle writer (a refusal is
        logged: the next step or observation writes again)."""
        self.guard.assert_on_loop()
        job.observed = None  # the spec now differs from the last observation written
        try:
            self.basis.lifecycle.record_scheduler(job.job_id, fields, durable=durable, event=event)
        except VqError as exc:
            log.warning("lane %s: job %s not updated: %s", self.basis.name, job.job_id, exc.message)

    def fail(self, job: LaneJob, reason: str) -> None:
        """FAILED at dispatch: the job holds no capacity any more."""
        self.guard.assert_on_loop()
        self.basis.lifecycle.fail_dispatch(job.job_id, reason)
        self._jobs.pop(job.job_id, None)

    def drop(self, job: LaneJob) -> None:
        """The job holds no capacity any more; its ending bookkeeping runs now."""
        self.guard.assert_on_loop()
        self._jobs.pop(job.job_id, None)
        self.basis.lifecycle.ended(job.job_id)

    def host_failed(self, exc: TransportError) -> None:
        """The login host did not answer: back off and mark the host (never a job)."""
        self.back_off(exc.message)
        record_failure(self.basis.ctx.paths.root, self.basis.name, exc)

    def back_off(self, why: str) -> None:
        """No step, claim or poll for ``backoff_seconds``."""
        self.guard.assert_on_loop()
        seconds = self.basis.settings.backoff_seconds
        self._backoff_until = self.basis.monotonic() + seconds
        log.warning("lane %s: backing off for %.0f s (%s)", self.basis.name, seconds, why)
