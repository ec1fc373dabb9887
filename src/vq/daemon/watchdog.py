"""The local watchdog (§4.4): sample running jobs, enforce memory, wall time, starvation.

Every loop pass it reads all running groups in one ``/proc`` scan and judges each RUNNING
job (never a SUSPENDED one, never one already ending). Enforcement does not wait for the
5-second sampling cadence: a verdict can fire on any pass, and the loop wakes at the
earliest wall-time expiry. Samples are appended to ``_vq/samples.jsonl`` every
:data:`SAMPLE_SECONDS`.

A limit first records the terminal state (OOM_KILLED / TIME_EXCEEDED / STARVED) with a
``watchdog_kill`` evidence event, *then* SIGTERMs the group; the supervisor holds the
budget through the 10 s grace and then sends SIGCONT + SIGKILL. The recorded state is
never revised (terminal states are sticky).

Wall time is active time: monotonic seconds since the attempt's epoch (launch, or
reattachment after a restart — the old in-memory clock cannot be rebuilt) minus the pause
time accumulated since that epoch.
"""

from __future__ import annotations

import json
import logging
import time
from collections import deque
from collections.abc import Callable

from vq._safe_open import append_line_beneath
from vq.config.settings import WatchdogSettings
from vq.domain.admission import effective_mem_mb
from vq.domain.spec import JobSpec
from vq.domain.states import JobState
from vq.domain.watchdog import (
    CpuPoint,
    StarvationPolicy,
    Verdict,
    check_memory,
    check_starved,
    check_wall,
)
from vq.executors.sampling import GroupUsage
from vq.services.context import ServiceContext

from .supervisor import Holder, Supervisor

__all__ = ["SAMPLE_SECONDS", "Watchdog"]

log = logging.getLogger(__name__)

#: Cadence of ``samples.jsonl`` records (§4.4's five-second default).
SAMPLE_SECONDS = 5.0
#: How often the /proc scan behind memory and starvation checks runs.
SCAN_SECONDS = 1.0


class Watchdog:
    """Judges the supervisor's running holders; runs on the daemon's main loop only."""

    def __init__(
        self,
        ctx: ServiceContext,
        supervisor: Supervisor,
        lookup: Callable[[str], JobSpec | None],
        settings: WatchdogSettings,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ctx = ctx
        self.supervisor = supervisor
        self._lookup = lookup
        self._monotonic = monotonic
        self.configure(settings)
        self._cpu: dict[str, deque[CpuPoint]] = {}
        self._last_sample: dict[str, CpuPoint] = {}
        self._last_scan = float("-inf")

    def configure(self, settings: WatchdogSettings) -> None:
        """Apply (re)loaded ``[watchdog]`` settings."""
        self._policy = StarvationPolicy(
            settings.starved_cpu_percent, settings.starved_window_seconds or None
        )

    def _running(self) -> list[tuple[Holder, JobSpec]]:
        out = []
        for holder in self.supervisor.holders.values():
            if holder.pgid is None or holder.collector_done or holder.grace_deadline is not None:
                continue
            spec = self._lookup(holder.job_id)
            if spec is not None and spec.state is JobState.RUNNING:
                out.append((holder, spec))
            else:
                self._cpu.pop(holder.job_id, None)  # a pause breaks the CPU window
        return out

    def active_seconds(self, holder: Holder, spec: JobSpec, now: float) -> float:
        return now - holder.epoch - (spec.paused_seconds_total - holder.paused_base)

    def next_deadline(self) -> float | None:
        """Seconds until the earliest wall-time expiry of a running job."""
        now = self._monotonic()
        remaining = [
            spec.wall_time_seconds - self.active_seconds(holder, spec, now)
            for holder, spec in self._running()
            if spec.wall_time_seconds
        ]
        return max(0.0, min(remaining)) if remaining else None

    def has_work(self) -> bool:
        return bool(self._running())

    def check(self) -> None:
        running = self._running()
        live = {holder.job_id for holder, _ in running}
        for job_id in set(self._cpu) - live:
            del self._cpu[job_id]
        for job_id in set(self._last_sample) - set(self.supervisor.holders):
            del self._last_sample[job_id]
        if not running:
            return
        now = self._monotonic()
        if now - self._last_scan < SCAN_SECONDS:
            # Between scans only the wall-time rule runs (it needs no /proc reading).
            for holder, spec in running:
                verdict = check_wall(self.active_seconds(holder, spec, now), spec.wall_time_seconds)
                if verdict is not None:
                    self._enforce(holder, verdict)
            return
        self._last_scan = now
        usage = self.supervisor.executor.sample(holder.handle for holder, _ in running)
        for holder, spec in running:
            group = usage.get(holder.job_id)
            active = self.active_seconds(holder, spec, now)
            if group is not None:
                history = self._cpu.setdefault(holder.job_id, deque())
                history.append(CpuPoint(now, group.cpu_seconds))
                window = self._policy.window_seconds or 0
                while len(history) > 2 and now - history[1].at >= window:
                    history.popleft()
                self._maybe_sample(holder, group, now, active)
            verdict = (
                check_memory(
                    group.rss_mb if group else None, effective_mem_mb(spec.mem_mb, self.ctx.caps)
                )
                or check_wall(active, spec.wall_time_seconds)
                or check_starved(self._cpu.get(holder.job_id, ()), now, self._policy)
            )
            if verdict is not None:
                self._enforce(holder, verdict)

    def _maybe_sample(self, holder: Holder, group: GroupUsage, now: float, active: float) -> None:
        previous = self._last_sample.get(holder.job_id)
        if previous is not None and now - previous.at < SAMPLE_SECONDS:
            return
        point = CpuPoint(now, group.cpu_seconds)
        cpu_percent = None
        if previous is not None and now > previous.at:
            cpu_percent = round(
                100 * (point.cpu_seconds - previous.cpu_seconds) / (now - previous.at), 2
            )
        self._last_sample[holder.job_id] = point
        record = {
            "ts": self.ctx.now().isoformat(),
            "elapsed_seconds": round(active, 3),
            "rss_mb": round(group.rss_mb, 2),
            "cpu_percent": cpu_percent,
            "cpu_time_seconds": round(group.cpu_seconds, 3),
            "cpu_time_source": group.cpu_time_source,
            "cgroup_lookup": group.cgroup_lookup,
            "cgroup_path": group.cgroup_path,
            "sample_pid": holder.pid,
            "sample_pgid": holder.pgid,
            "process_count": group.tasks if group.tasks is not None else len(group.pids),
        }
        append_line_beneath(
            self.ctx.paths.tree_of(holder.job_id),
            self.ctx.paths.samples(holder.job_id),
            json.dumps(record, separators=(",", ":")),
        )

    def _enforce(self, holder: Holder, verdict: Verdict) -> None:
        """The verdict is durable first (the lifecycle writer), then the group is
        cancelled and owed its grace. A job another writer ended first keeps its state."""
        moved = self.supervisor.lifecycle.watchdog_verdict(
            holder.job_id, verdict.state, verdict.reason, verdict.evidence
        )
        if not moved.changed:
            return
        log.warning("job %s: %s", holder.job_id, verdict.reason)
        self.supervisor.executor.cancel(holder.handle)
        self.supervisor.start_grace(holder.job_id)
