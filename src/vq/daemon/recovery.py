"""Startup recovery (§1.2 item 2, §4.7): reconcile every persisted spec with reality.

The rules, per spec state at startup:

* PENDING stays PENDING.
* Terminal stays terminal. If a live process group that is provably the job's survives
  behind it (leader start-time fingerprint, or a member whose environment names the job),
  it is a leak: SIGCONT + SIGKILL.
* RUNNING / SUSPENDED with a live group that is the job's: reattached as an orphan and
  supervised again (state kept, budget charged). If only the collector is gone, the
  group is reaped first, as when a collector dies under a running daemon.
* RUNNING / SUSPENDED whose group is gone: the durable exit marker decides (normal
  retry/COMPLETED/FAILED classification); without one, ABORTED_BY_QUEUE with a reason.
* ``auto_resume``: a spec that entered as RUNNING and was just moved to ABORTED_BY_QUEUE
  gets a fresh PENDING sibling (new id, ``parent_jobid``, the same working directory).
  Never for a spec that entered SUSPENDED or was already terminal.
* A RUNNING claim whose launch was never recorded (crash between claim and pid record)
  is found by the ``VQ_JOB_ID`` environment of its processes, else treated as gone.

The pass is interruptible: it checks ``stop`` at every spec boundary. A spec it never
reached keeps its entry state for the next start; a spec it reached is persisted.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from vq._fs import read_regular
from vq.domain.spec import JobSpec
from vq.domain.states import ACTIVE, JobState
from vq.errors import CorruptSpec, NotFound
from vq.executors import procs
from vq.executors.identity import group_is_job, job_processes
from vq.services.context import ServiceContext
from vq.services.outcomes import finish_attempt, read_exit_marker
from vq.services.siblings import create_sibling

from .supervisor import Supervisor

__all__ = ["RecoveryReport", "recover"]

log = logging.getLogger(__name__)

ABORT_REASON = (
    "vq restarted and found neither a live process nor an exit marker for this job; "
    "its outcome is unknown"
)


@dataclass
class RecoveryReport:
    examined: int = 0
    reattached: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    aborted: list[str] = field(default_factory=list)
    reaped_leaks: list[str] = field(default_factory=list)
    resumed_as: dict[str, str] = field(default_factory=dict)
    interrupted: bool = False


def _kill_group(pgid: int) -> None:
    procs.signal_group(pgid, signal.SIGCONT)
    procs.signal_group(pgid, signal.SIGKILL)


def _collector_record(ctx: ServiceContext, job_id: str) -> tuple[int, int] | None:
    """The live collector named by ``_vq/collector.pid`` (identity-checked), if any."""
    try:
        pid_text, ticks_text = read_regular(ctx.paths.collector_pid(job_id), 256).decode().split()
        pid, ticks = int(pid_text), int(ticks_text)
    except (OSError, ValueError):
        return None
    return (pid, ticks) if procs.matches_identity(pid, ticks) else None


def _locate_group(
    ctx: ServiceContext, spec: JobSpec, by_job: dict[str, list[int]]
) -> tuple[int | None, int | None]:
    """The job's (pgid, leader start ticks): from the spec, else (a launch whose pid was
    never recorded) from the collector's own ``collector.pid``, else from the
    ``VQ_JOB_ID`` environment of its processes."""
    if spec.pgid is not None:
        return spec.pgid, spec.pid_start_time
    record = _collector_record(ctx, spec.id)
    if record is not None:
        return record
    for pid in by_job.get(spec.id, []):
        stat = procs.read_stat(pid)
        if stat is not None:
            leader = procs.read_stat(stat.pgid)
            return stat.pgid, leader.start_ticks if leader else None
    return None, None


def _recover_active(
    ctx: ServiceContext,
    spec: JobSpec,
    supervisor: Supervisor,
    report: RecoveryReport,
    on_change: Callable[[JobSpec], None],
    auto_resume: bool,
    by_job: dict[str, list[int]],
) -> None:
    pgid, start_ticks = _locate_group(ctx, spec, by_job)
    if pgid is not None and group_is_job(spec.id, pgid, start_ticks):
        if procs.is_alive(pgid):
            if spec.pgid is None:

                def record(current: JobSpec) -> JobSpec:
                    current.pid, current.pgid, current.pid_start_time = pgid, pgid, start_ticks
                    return current

                spec = ctx.store.update(spec.id, record)
                on_change(spec)
            supervisor.track(spec, pgid, pgid, start_ticks, orphan=True)
            # Re-assert the recorded intent: a crash may have fallen between the durable
            # pause/resume write and its signal.
            paused = spec.state is JobState.SUSPENDED
            procs.signal_group(pgid, signal.SIGSTOP if paused else signal.SIGCONT)
            report.reattached.append(spec.id)
            log.info("job %s: reattached to live process group %d", spec.id, pgid)
            return
        log.info("job %s: collector gone but its group %d lives; reaping it", spec.id, pgid)
        _kill_group(pgid)
    exit_code = read_exit_marker(ctx, spec.id)
    end = finish_attempt(
        ctx,
        spec.id,
        exit_code,
        unknown_state=JobState.ABORTED_BY_QUEUE,
        unknown_reason=ABORT_REASON,
    )
    on_change(end.spec)
    (report.aborted if exit_code is None else report.finished).append(spec.id)
    entered_running = spec.state is JobState.RUNNING
    if auto_resume and entered_running and end.spec.state is JobState.ABORTED_BY_QUEUE:
        sibling = create_sibling(ctx, end.spec, "auto-resume after a restart lost the job")
        on_change(sibling)
        report.resumed_as[spec.id] = sibling.id
        log.info("job %s: auto-resumed as %s", spec.id, sibling.id)


def recover(
    ctx: ServiceContext,
    supervisor: Supervisor,
    stop: threading.Event,
    on_change: Callable[[JobSpec], None],
    *,
    auto_resume: bool = False,
) -> RecoveryReport:
    """Run the pass over every spec in the queue (see module rules)."""
    report = RecoveryReport()
    groups = procs.live_groups()  # one /proc scan for the whole pass
    by_job = job_processes()  # and one environment scan
    for job_id in sorted(ctx.store.list_ids()):
        if stop.is_set():
            report.interrupted = True
            log.info("recovery pass interrupted by a stop request after %d specs", report.examined)
            break
        report.examined += 1
        try:
            spec = ctx.store.read(job_id)
        except (CorruptSpec, NotFound):
            continue  # quarantined by the index load; never touched here
        if spec.state is JobState.PENDING or spec.scheduler_target is not None:
            continue
        if spec.state in ACTIVE:
            _recover_active(ctx, spec, supervisor, report, on_change, auto_resume, by_job)
            continue
        # Terminal: reap a group that survives behind it — recorded, or (killed before
        # its pid was recorded) found through its processes' VQ_JOB_ID.
        pgid, start_ticks = _locate_group(ctx, spec, by_job)
        if pgid is not None and pgid in groups and group_is_job(spec.id, pgid, start_ticks):
            log.info("job %s is %s but its group %d survives; reaping", job_id, spec.state, pgid)
            _kill_group(pgid)
            report.reaped_leaks.append(job_id)
    return report
