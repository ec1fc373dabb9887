"""Startup recovery (§1.2 item 2, §4.7): reconcile every persisted spec with reality.

The rules, per spec state at startup:

* PENDING stays PENDING.
* Terminal stays terminal. If a live process group that is provably the job's survives
  behind it (leader start-time fingerprint, or a member whose environment names the job),
  it is a leak: SIGCONT + SIGKILL.
* RUNNING / SUSPENDED with a live group that is the job's: reattached as an orphan and
  supervised again (state kept, budget charged). If only the collector is gone, the
  group is reaped first, as when a collector dies under a running daemon.
* RUNNING / SUSPENDED whose job scope names a MainPID outside the job's group: never
  reattached (the group is reaped); classified as below.
* RUNNING / SUSPENDED whose group is gone: the durable exit marker decides (normal
  retry/COMPLETED/FAILED classification; a command the collector could not start is a
  dispatch failure). Without one, a RUNNING attempt whose command provably never started
  (the executor fenced its start record, docs/architecture.md "The never-started
  proof") returns to PENDING with a ``requeued`` reason — it did not run, so running it
  once is not a re-run; otherwise ABORTED_BY_QUEUE with a reason.
* Auto-resume is per job: a spec with ``recover_on_reboot`` (``vq submit --auto-resume``,
  or a submit through a daemon started with ``--auto-resume``, whose flag is only that
  default) that entered as RUNNING and was just moved to ABORTED_BY_QUEUE gets a fresh
  PENDING sibling (new id, ``parent_jobid``, the same working directory). Never for a
  spec without it, one that entered SUSPENDED, or one already terminal.
* A RUNNING claim whose launch was never recorded (crash between claim and pid record)
  is found by the ``VQ_JOB_ID`` environment of its processes, else treated as gone.

Processes are reached only through the job's executor (the local one: identity-checked
process groups, the collector's marker and ``collector.pid``); states are written only
by the lifecycle writer. A job settled here has ended (nothing of it runs), so it gets
the same end-of-job bookkeeping as one that ends under a running daemon: its webhook,
its ``--rerun-until-file-exists`` sibling and its ``--clean-workdir`` sweep.

The pass is interruptible: it checks ``stop`` at every spec boundary. A spec it never
reached keeps its entry state for the next start; a spec it reached is persisted.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from vq.domain.spec import JobSpec
from vq.domain.states import ACTIVE, JobState
from vq.domain.summary import JobSummary
from vq.errors import CorruptSpec, NotFound
from vq.executors.base import AdoptingEngine, Executor, RecoveryKind
from vq.executors.registry import ExecutorRegistry
from vq.services.context import ServiceContext
from vq.services.lifecycle import Lifecycle
from vq.services.siblings import create_sibling
from vq.store.specs import Signature
from vq.store.summaries import load_summaries

from .index import Entry, QueueListing
from .supervisor import Supervisor

__all__ = ["RecoveryReport", "recover"]

log = logging.getLogger(__name__)

NEVER_STARTED_REASON = (
    "vq restarted and found proof that this job's command never started (no start "
    "record, no process); back in the queue"
)
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
    requeued: list[str] = field(default_factory=list)
    reaped_leaks: list[str] = field(default_factory=list)
    resumed_as: dict[str, str] = field(default_factory=dict)
    interrupted: bool = False
    #: Specs the pass read and did not write, with their file signature before the read
    #: (a terminal one unchanged since the terminal index took it: its summary, never
    #: parsed): the index load takes those still unchanged on disk as they are.
    untouched: dict[str, tuple[Signature, Entry]] = field(default_factory=dict)
    #: Terminal specs taken from the terminal index without being parsed.
    summarized: int = 0
    #: The queue as the pass listed it (every id, the queue's stamp taken just before
    #: the listing, and the clock then): the index load reuses the listing and the
    #: signatures when the stamp shows nothing was renamed into the queue since.
    listing: QueueListing | None = None

    def archived(self) -> list[str]:
        """The untouched specs that record an archive of their workspace (the only
        ones an interrupted ``vq cleanup`` can have left half done; written ones are
        jobs that just ended, never archived)."""
        return [
            job_id for job_id, (_, entry) in self.untouched.items() if entry.archived_at is not None
        ]


def _recover_active(
    spec: JobSpec,
    executor: Executor,
    lifecycle: Lifecycle,
    supervisor: Supervisor,
    report: RecoveryReport,
) -> None:
    found = executor.recover(spec)
    handle = found.handle
    if found.kind is RecoveryKind.REATTACHED and handle.pgid is not None:
        if found.found_unrecorded:
            spec = lifecycle.record_launch(
                spec.id, handle.pgid, handle.pgid, handle.start_ticks, event=False, durable=True
            )
        supervisor.track(spec, handle.pgid, handle.pgid, handle.start_ticks, orphan=True)
        # Re-assert the recorded intent: a crash may have fallen between the durable
        # pause/resume write and its signal.
        if spec.state is JobState.SUSPENDED:
            executor.suspend(handle)
        else:
            executor.resume(handle)
        report.reattached.append(spec.id)
        log.info("job %s: reattached to live process group %d", spec.id, handle.pgid)
        return
    if found.kind is RecoveryKind.NEVER_STARTED:
        lifecycle.requeue_never_started(spec.id, spec.launch_attempt, NEVER_STARTED_REASON)
        report.requeued.append(spec.id)
        log.info("job %s: never started; back in the queue", spec.id)
        return
    if found.spawn_failure is not None:
        end = lifecycle.fail_dispatch(spec.id, f"launch failed: {found.spawn_failure}")
    else:
        reason = ABORT_REASON
        if found.scope_conflict is not None:
            reason = (
                f"vq restarted and found the job's cgroup scope naming main pid "
                f"{found.scope_conflict}, which is not the job's: not reattached (its group "
                "was stopped); its outcome is unknown"
            )
            log.warning("job %s: %s", spec.id, reason)
        end = lifecycle.finish_attempt(
            spec.id,
            found.exit_code,
            unknown_state=JobState.ABORTED_BY_QUEUE,
            unknown_reason=reason,
        )
    (report.aborted if found.exit_code is None else report.finished).append(spec.id)
    entered_running = spec.state is JobState.RUNNING
    wanted = spec.recover_on_reboot
    if wanted and entered_running and end.spec.state is JobState.ABORTED_BY_QUEUE:
        sibling = create_sibling(
            lifecycle.ctx, end.spec, "auto-resume after a restart lost the job"
        )
        lifecycle.on_change(sibling)
        report.resumed_as[spec.id] = sibling.id
        log.info("job %s: auto-resumed as %s", spec.id, sibling.id)
    lifecycle.ended(end.spec)  # nothing of it runs: the end-of-job bookkeeping


def recover(
    ctx: ServiceContext,
    supervisor: Supervisor,
    stop: threading.Event,
    executors: ExecutorRegistry | None = None,
    *,
    engines: Sequence[AdoptingEngine] = (),
) -> RecoveryReport:
    """Run the pass over every spec in the queue (see module rules).

    The pass recovers the local executor's jobs; ``executors`` says which those are
    (default: the supervisor's executor alone). Then it asks every other engine (each
    scheduler lane) to adopt its own jobs from disk, unless a stop interrupted it.
    """
    report = RecoveryReport()
    executor = supervisor.executor
    registry = executors or ExecutorRegistry(executor)
    # Finished jobs whose spec file is unchanged since the terminal index took them are
    # not parsed: their summary says they are terminal and names their recorded group.
    summaries = load_summaries(ctx.paths.terminal_index)
    checked_at_ns = time.time_ns()
    stamp = ctx.store.queue_stamp()
    ids = sorted(ctx.store.list_ids())
    report.listing = QueueListing(ids, stamp, checked_at_ns)
    # Every signature before any read (one directory fd): a later write shows.
    signatures = ctx.store.signatures(ids)
    executor.begin_recovery()  # one /proc census for the whole pass
    try:
        with ctx.store.reader() as read:  # one directory fd for every read of the pass
            _pass(ids, signatures, summaries, read, ctx, supervisor, registry, stop, report)
    finally:
        executor.end_recovery()
    if not report.interrupted:
        for engine in engines:
            engine.adopt()
    return report


def _pass(
    ids: list[str],
    signatures: Mapping[str, Signature | None],
    summaries: dict[str, tuple[Signature, JobSummary]],
    read: Callable[[str], JobSpec],
    ctx: ServiceContext,
    supervisor: Supervisor,
    registry: ExecutorRegistry,
    stop: threading.Event,
    report: RecoveryReport,
) -> None:
    """The body of :func:`recover`: each spec in ``ids``, in order."""
    executor, lifecycle = supervisor.executor, supervisor.lifecycle
    for job_id in ids:
        if stop.is_set():
            report.interrupted = True
            log.info("recovery pass interrupted by a stop request after %d specs", report.examined)
            break
        report.examined += 1
        signature = signatures[job_id]
        held = summaries.pop(job_id, None)
        if signature is not None and held is not None and held[0] == signature:
            summary = held[1]
            # Its owner is the tree the file is in now, never the cache's word.
            admitted = ctx.store.admits_summary(job_id, summary.submitter, summary.depends_on or [])
            if admitted and not executor.may_have_leaked(summary.pgid):
                report.untouched[job_id] = (signature, summary)
                report.summarized += 1
                continue
        try:
            spec = read(job_id)
        except (CorruptSpec, NotFound):
            continue  # quarantined by the index load; never touched here
        if signature is not None:
            # An ended job is kept as its summary: the whole spec is not held.
            entry: Entry = JobSummary.of(spec) if spec.is_terminal else spec
            report.untouched[job_id] = (signature, entry)
        if spec.state is JobState.PENDING or not registry.is_local(spec):
            continue
        if spec.state in ACTIVE:
            report.untouched.pop(job_id, None)  # may be written now: read it again
            _recover_active(spec, executor, lifecycle, supervisor, report)
            continue
        # Terminal: reap a group that survives behind it — recorded, or (killed before
        # its pid was recorded) found through its processes' VQ_JOB_ID.
        if executor.reap_leak(spec):
            log.info("job %s is %s but its group survived; reaped", job_id, spec.state)
            report.reaped_leaks.append(job_id)
