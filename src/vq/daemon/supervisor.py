"""Supervision of local jobs the daemon holds: collector exits, kill graces, orphans.

A *holder* is a job charged against the local budget. It is created when a job is
launched (or reattached by recovery) and released only when:

* its collector exited normally (it waited for its command; background leftovers are not
  signalled on a host without a job scope, §4.4), or
* its group has no live member any more (zombies count as gone), or
* the kill grace expired and SIGCONT + SIGKILL were sent to the group.

Collector exits arrive from the fork server's reader thread through a queue and are
applied on the main loop (:meth:`Supervisor.process`). Orphans — jobs whose collector is
not a child of our fork server (reattached after a restart, or a fork server that died) —
are polled through the executor (``watcher_alive``).

Thread ownership: ``holders`` belongs to the loop. Other threads never read it; they read
:meth:`Supervisor.usage`, an immutable snapshot the loop publishes after every change,
and hand work to the loop through the event queue. Processes are reached only through
the executor protocol (:class:`vq.executors.base.Executor`: ``watcher_alive``,
``find_lost_launch``, ``fence_unstarted``, ``running``, ``force_stop`` and the outcome
reads); every state write goes through the lifecycle writer.
"""

from __future__ import annotations

import logging
import queue
import time
from collections.abc import Callable
from dataclasses import dataclass

from vq.domain.admission import Usage, effective_mem_mb
from vq.domain.spec import JobSpec
from vq.domain.states import JobState
from vq.errors import StorageError
from vq.executors.base import Executor, JobHandle, LaunchResult
from vq.executors.launch import COLLECTOR_NOT_STARTED, CollectorExit, Launched
from vq.services.context import ServiceContext
from vq.services.kill import KILL_GRACE_SECONDS
from vq.services.lifecycle import Lifecycle

from .owed import OwedWrites

__all__ = ["SETTLE_SECONDS", "Holder", "LaunchResult", "Supervisor"]

#: How long after a fork-server death an in-flight launch is given to show itself.
SETTLE_SECONDS = 2.0
#: A job whose collector could not record its start waits this long before its next
#: claim (the usual cause, a full disk, rarely clears at once).
NOT_STARTED_DELAY_SECONDS = 10.0

log = logging.getLogger(__name__)


def _paused_before(spec: JobSpec, now: float) -> float:
    """Pause time to discount from a fresh wall-time epoch starting ``now``: the recorded
    total plus, for a job suspended right now, the part of its pause before ``now`` (it
    is added to the total only at resume, and must not count against time after it)."""
    ongoing = 0.0
    if spec.state is JobState.SUSPENDED and spec.paused_monotonic_at is not None:
        ongoing = max(0.0, now - spec.paused_monotonic_at)
    return spec.paused_seconds_total + ongoing


@dataclass
class Holder:
    """One job holding budget. ``pid`` is the collector, which leads group ``pgid``.

    Both are None between the claim and the fork server's answer (the job already holds
    its budget then, so nothing can be admitted in its place).
    """

    job_id: str
    pid: int | None
    pgid: int | None
    start_ticks: int | None
    cpus: int
    mem_mb: int
    epoch: float = 0.0  # monotonic start of this attempt's wall clock (launch or reattach)
    paused_base: float = 0.0  # paused_seconds_total when the epoch began
    orphan: bool = False
    collector_done: bool = False
    unresolved_since: float | None = None  # launch in flight when the fork server died
    grace_deadline: float | None = None  # monotonic; set once a SIGTERM is owed its grace
    cores: tuple[int, ...] = ()  # the CPU affinity of this attempt (empty: not pinned)

    @property
    def handle(self) -> JobHandle:
        return JobHandle(self.job_id, self.pgid, self.start_ticks)


class Supervisor:
    """Owns the holders (loop only). :meth:`on_collector_exit`, :meth:`on_launch_result`
    and :meth:`usage` may be called from any thread."""

    def __init__(
        self,
        ctx: ServiceContext,
        lifecycle: Lifecycle,
        executor: Executor,
        monotonic: Callable[[], float] = time.monotonic,
        grace_seconds: float = KILL_GRACE_SECONDS,
        on_release: Callable[[str], None] = lambda job_id: None,
        wake: Callable[[], None] = lambda: None,
        on_launch: Callable[[LaunchResult], None] = lambda result: None,
    ) -> None:
        self.ctx = ctx
        self.lifecycle = lifecycle
        self.executor = executor
        self._monotonic = monotonic
        self._grace = grace_seconds
        self._on_release = on_release
        self.holders: dict[str, Holder] = {}
        self._usage = Usage(jobs=0, cpus=0, mem_mb=0)
        self._events: queue.SimpleQueue[CollectorExit | LaunchResult] = queue.SimpleQueue()
        #: Wakes the main loop (a collector exit or launch answer arrived).
        self.wake = wake
        #: Applies a launch answer on the loop (the dispatcher's ``apply_launch``).
        self.launch_handler = on_launch
        #: Told of every write the state root could not take (the daemon's storage hold).
        self.on_storage_error: Callable[[StorageError], None] = lambda error: None
        #: End-of-attempt writes that failed with a StorageError, retried by process().
        self._owed = OwedWrites(monotonic)

    # --- bookkeeping ---------------------------------------------------------------------
    def usage(self) -> Usage:
        """The budget held, as last published by the loop (safe from any thread)."""
        return self._usage

    def _publish(self) -> None:
        holders = list(self.holders.values())
        self._usage = Usage(
            jobs=len(holders),
            cpus=sum(h.cpus for h in holders),
            mem_mb=sum(h.mem_mb for h in holders),
        )

    def track(
        self,
        spec: JobSpec,
        pid: int | None,
        pgid: int | None,
        start_ticks: int | None,
        *,
        orphan: bool,
    ) -> None:
        self.holders[spec.id] = Holder(
            job_id=spec.id,
            pid=pid,
            pgid=pgid,
            start_ticks=start_ticks,
            cpus=spec.cpus,
            mem_mb=effective_mem_mb(spec.mem_mb, self.ctx.caps),
            epoch=self._monotonic(),
            paused_base=_paused_before(spec, self._monotonic()),
            orphan=orphan,
            cores=tuple(spec.cpu_affinity or ()),
        )
        self._publish()

    def cores_in_use(self) -> list[tuple[int, ...]]:
        """The core sets of the jobs holding budget (the loop's affinity allocation; a
        job's cores are free again once it is released)."""
        return [h.cores for h in self.holders.values() if h.cores]

    def set_launched(self, launched: Launched) -> Holder | None:
        holder = self.holders.get(launched.job_id)
        if holder is not None:
            holder.pid, holder.pgid = launched.pid, launched.pgid
            holder.start_ticks = launched.start_ticks
        return holder

    def launch_unresolved(self, job_id: str) -> None:
        """The fork server died with this launch in flight: keep the budget and find out
        (after :data:`SETTLE_SECONDS`) whether the job runs, ended, or never started."""
        holder = self.holders.get(job_id)
        if holder is not None:
            holder.unresolved_since = self._monotonic()
            log.warning("job %s: launch in flight when the fork server died; checking", job_id)

    def _resolve_launch(self, holder: Holder) -> None:
        job_id = holder.job_id
        holder.unresolved_since = None
        launched = self.executor.find_lost_launch(job_id)
        if launched is not None:
            self.set_launched(launched)
            holder.orphan = True
            self.launch_handler(LaunchResult(job_id, launched, None))
            return
        marker = self.executor.exit_code(job_id)
        if marker is None and self._fenced(job_id):
            self._requeue_unstarted(
                job_id, "the fork server died while launching this job, before its command started"
            )
            return
        self._end(
            job_id,
            lambda: self._finish(
                job_id,
                marker,
                JobState.ABORTED_BY_QUEUE,
                "the fork server died while launching this job; no process and no exit "
                "marker were found, so its outcome is unknown",
                marker_backed=True,
            ),
        )

    def _fenced(self, job_id: str) -> bool:
        """Whether the job's current attempt provably never started (and now cannot)."""
        spec = self.ctx.store.read(job_id)
        return (
            spec.state is JobState.RUNNING
            and self.executor.spawn_failure(job_id) is None
            and self.executor.fence_unstarted(spec)
        )

    def _requeue_unstarted(self, job_id: str, why: str, delay_seconds: float = 0.0) -> None:
        """RUNNING → PENDING for an attempt whose command never started; budget freed."""
        attempt = self.ctx.store.read(job_id).launch_attempt

        def write() -> None:
            moved = self.lifecycle.requeue_never_started(
                job_id,
                attempt,
                f"{why}; it did not run and is back in the queue",
                delay_seconds=delay_seconds,
            )
            if moved.changed:
                log.info("job %s: never started (%s); back in the queue", job_id, why)

        self._end(job_id, write)

    def unsent(self, spec: JobSpec, reason: str) -> None:
        """A claim whose launch was never sent: back to PENDING, budget freed (the write
        is owed and retried if the state root cannot take it now)."""
        self.track(spec, None, None, None, orphan=False)
        self._end(spec.id, lambda: self.lifecycle.requeue_unlaunched(spec.id, reason))

    def _end(self, job_id: str, write: Callable[[], object]) -> None:
        """Write the end of an attempt, then free its budget. A write the state root
        cannot take (StorageError) is owed: the outcome stays in memory, the budget
        stays held, and :meth:`process` retries it until it lands."""

        def attempt() -> bool:
            try:
                write()
            except StorageError as exc:
                self.on_storage_error(exc)
                return False
            self.release(job_id)
            return True

        if not attempt():
            log.warning("job %s: its end could not be written; retrying", job_id)
            self._owed.add(job_id, attempt)

    def release(self, job_id: str) -> None:
        """Free the job's budget. A job whose spec is terminal has now fully ended."""
        if self.holders.pop(job_id, None) is None:
            return
        self._publish()
        self.executor.released(job_id)
        self._on_release(job_id)
        self.lifecycle.ended(job_id)
        self.wake()

    def start_grace(self, job_id: str) -> None:
        """A SIGTERM went to this job's group: it is owed the grace before SIGKILL."""
        holder = self.holders.get(job_id)
        if holder is not None and holder.grace_deadline is None:
            holder.grace_deadline = self._monotonic() + self._grace

    def awaiting_stop_check(self) -> list[JobHandle]:
        """The held attempts another writer's stop may concern (``foreign_stops``):
        launched, not yet in their kill grace, and owed no end-of-attempt write."""
        return [
            holder.handle
            for holder in self.holders.values()
            if holder.pid is not None
            and holder.grace_deadline is None
            and holder.job_id not in self._owed
        ]

    def next_deadline(self) -> float | None:
        """Seconds until the earliest grace expiry, for the loop's wait timeout."""
        deadlines = [h.grace_deadline for h in self.holders.values() if h.grace_deadline]
        return max(0.0, min(deadlines) - self._monotonic()) if deadlines else None

    def needs_polling(self) -> bool:
        """A group in its kill grace is watched closely (its budget frees on exit)."""
        return bool(self._owed) or any(
            h.collector_done or h.unresolved_since is not None for h in self.holders.values()
        )

    # --- inputs ----------------------------------------------------------------------------
    def on_collector_exit(self, event: CollectorExit) -> None:
        """Called on the fork server's reader thread: queue it and wake the loop."""
        self._events.put(event)
        self.wake()

    def on_launch_result(self, result: LaunchResult) -> None:
        """Launch answers travel the same queue as exits, so order is kept per job."""
        self._events.put(result)
        self.wake()

    def orphan_all(self) -> None:
        """The fork server died: its collectors are orphans now; poll them via /proc."""
        for holder in self.holders.values():
            if not holder.collector_done:
                holder.orphan = True

    # --- the loop's work -------------------------------------------------------------------
    def process(self) -> None:
        self._owed.retry()
        while True:
            try:
                event = self._events.get_nowait()
            except queue.Empty:
                break
            if isinstance(event, LaunchResult):
                self.launch_handler(event)
            elif event.exit_code == COLLECTOR_NOT_STARTED and event.job_id in self.holders:
                self._requeue_unstarted(
                    event.job_id,
                    "its collector could not create the start record (see daemon.log)",
                    NOT_STARTED_DELAY_SECONDS,
                )
            else:
                self._collector_exited(event.job_id, event.signal)
        for holder in list(self.holders.values()):
            if holder.job_id in self._owed:
                continue  # its end is written first; its budget stays held until then
            since = holder.unresolved_since
            if since is not None and self._monotonic() - since >= SETTLE_SECONDS:
                self._resolve_launch(holder)
                continue
            if holder.pid is None:
                continue  # launch still in flight
            if (
                holder.orphan
                and not holder.collector_done
                and not self.executor.watcher_alive(holder.handle)
            ):
                # An orphaned collector is gone; we cannot know how it ended. Its marker
                # tells whether it finished its work.
                marker = self.executor.exit_code(holder.job_id)
                self._collector_exited(
                    holder.job_id,
                    None if marker is not None else -1,
                    unknown_state=JobState.ABORTED_BY_QUEUE,
                )
            elif holder.collector_done:
                self._check_group(holder)

    def _collector_exited(
        self,
        job_id: str,
        collector_signal: int | None,
        unknown_state: JobState = JobState.FAILED,
    ) -> None:
        holder = self.holders.get(job_id)
        if holder is None:
            log.warning("exit of untracked collector for job %s ignored", job_id)
            return
        holder.collector_done = True
        if collector_signal is not None and self.executor.exit_code(job_id) is not None:
            # Killed after it recorded the command's exit: the outcome is known.
            collector_signal = None
        if collector_signal is None:
            # The collector waited for its command and wrote the marker (or failed to).
            exit_code = self.executor.exit_code(job_id)
            self._end(
                job_id,
                lambda: self._finish(
                    job_id,
                    exit_code,
                    JobState.FAILED,
                    "the collector could not record an exit code",
                    marker_backed=True,
                ),
            )
            return
        if not self.ctx.store.read(job_id).is_terminal:
            # Killed collector, job still live in the spec: reap the group first so the
            # command can never run on beside its own retry (§4.4).
            self._reap(holder)
            if self.executor.exit_code(job_id) is None and self._fenced(job_id):
                self._requeue_unstarted(
                    job_id,
                    "its collector was killed before the command started",
                    NOT_STARTED_DELAY_SECONDS,
                )
                return
            how = f"signal {collector_signal}" if collector_signal > 0 else "an unknown cause"
            reason = (
                f"the job's collector (pid {holder.pid}) was killed by {how}; "
                "the command's exit code is unknown and its process group was killed"
            )
            self._end(job_id, lambda: self._finish(job_id, None, unknown_state, reason))
            return
        # A terminal state was written by kill or the watchdog: the group is owed its grace.
        self.start_grace(job_id)
        self._check_group(holder)

    def _finish(
        self,
        job_id: str,
        exit_code: int | None,
        unknown_state: JobState,
        unknown_reason: str,
        *,
        marker_backed: bool = False,
    ) -> None:
        spawn_failure = self.executor.spawn_failure(job_id) if marker_backed else None
        if spawn_failure is not None:
            # The command never started: a dispatch failure, never a payload exit code
            # consuming a retry.
            end = self.lifecycle.fail_dispatch(job_id, f"launch failed: {spawn_failure}")
        elif marker_backed and self.executor.oom_killed(job_id):
            end = self.lifecycle.watchdog_verdict(
                job_id,
                JobState.OOM_KILLED,
                "the kernel killed it for exceeding its memory limit (its cgroup's OOM killer)",
                {"exit_code": exit_code, "source": "cgroup"},
            )
            # The exit code too (a terminal spec keeps its state; it is only filled in).
            filled = self.lifecycle.finish_attempt(job_id, exit_code, marker_backed=True)
            end = end if end.changed else filled
        else:
            end = self.lifecycle.finish_attempt(
                job_id,
                exit_code,
                unknown_state=unknown_state,
                unknown_reason=unknown_reason,
                marker_backed=marker_backed,
            )
        if end.changed:
            log.info("job %s: %s -> %s", job_id, end.previous.value, end.spec.state.value)

    def _check_group(self, holder: Holder) -> None:
        if not self.executor.running(holder.handle):
            self.release(holder.job_id)
            return
        if holder.grace_deadline is None:
            self.start_grace(holder.job_id)
        elif self._monotonic() >= holder.grace_deadline:
            self._reap(holder)
            self.release(holder.job_id)

    def _reap(self, holder: Holder) -> None:
        if self.executor.force_stop(holder.handle):
            log.info("job %s: SIGCONT + SIGKILL to process group %s", holder.job_id, holder.pgid)
