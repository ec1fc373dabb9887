"""Observation and completion of a lane's scheduler jobs (a part of
:class:`~.lane.SchedulerLane`; every method runs on the daemon loop, every cluster call
on the lane's worker; the lane's state is its :class:`~.lane_jobs.LaneJobs`).

* One poll in flight at a time, at most one per ``poll_interval``, within the host's
  token bucket: one status query for every tracked id, plus one accounting query for
  ids the status no longer shows as active. A transport failure (or a scheduler answer
  saying it is overloaded) backs off and marks the host unreachable; jobs are untouched.
* An unlisted id without an accounting record is "not final": nothing changes.
* A round that finds jobs running also brings their new output (one more SSH call in the
  same step, within the bucket; :mod:`.live_logs`) into the local workspace.
* Completion reads the exit marker and copies the workspace back (retried after each of
  ``copy_back_delays``), then writes the outcome (:func:`.outcome.ending`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from vq import _fault_points
from vq._safe_open import append_line_beneath, read_regular_beneath
from vq.dialects import (
    AccountingRecord,
    JobObservation,
    ParseFailure,
    SchedulerPhase,
    StatusReport,
)
from vq.dialects._values import format_slurm_duration
from vq.domain.states import JobState
from vq.errors import TransportError, VqError
from vq.hosts.health import record_ok, record_slow

from .jobs import ACTIVE_PHASES, LaneJob, ambiguous
from .lane_jobs import LaneJobs
from .live_logs import LiveLog, LiveLogs
from .outcome import TokenBucket, ending
from .remote import LaneRemote
from .usage import accounting_sample, never_started, receipt_usable
from .worker import Worker

__all__ = ["Observation"]

#: A receipt larger than this is not a GNU time receipt.
RECEIPT_LIMIT = 64 * 1024
#: An unchanged observation is not written again (a round over 1,000 held jobs writes
#: nothing), except that ``last_heartbeat_at`` is refreshed at least this often (seconds;
#: never more than half of MinJobAge, which the blind-lane warning measures against).
HEARTBEAT_REFRESH = 60.0

#: The phases in which a job's cluster-side output is mirrored (:mod:`.live_logs`).
_OUTPUT_PHASES = (SchedulerPhase.RUNNING, SchedulerPhase.FINISHING)

log = logging.getLogger(__name__)


class Observation:
    """Poll and complete (see the module docstring)."""

    def __init__(
        self, jobs: LaneJobs, remote: LaneRemote, worker: Worker, bucket: TokenBucket
    ) -> None:
        self._jobs = jobs
        self._remote = remote
        self._worker = worker
        self._bucket = bucket
        self._basis = jobs.basis
        self._live = LiveLogs(remote.runner, remote.deadline, jobs.basis.ctx.paths.tree_of)

    # --- observe ---------------------------------------------------------------------------
    def maybe_poll(self, now: float) -> None:
        """Start one status round when one is due and the token bucket allows it."""
        self._jobs.guard.assert_on_loop()
        ids = self._jobs.pollable()
        if self._jobs.polling or not ids or now < self._jobs.next_poll:
            return
        if not self._bucket.take():
            self._jobs.poll_at(now + self._bucket.wait_seconds())
            return
        self._jobs.poll_started(now + self._basis.settings.poll_interval)
        since = min(
            (j.submitted_at for j in ids.values() if j.submitted_at), default=self._basis.ctx.now()
        )

        def work() -> tuple[
            StatusReport | ParseFailure, dict[str, AccountingRecord], float, TransportError | None
        ]:
            started = time.monotonic()
            report = self._remote.status(sorted(ids))
            elapsed_ms = (time.monotonic() - started) * 1000
            records: dict[str, AccountingRecord] = {}
            tail_failed: TransportError | None = None
            if isinstance(report, StatusReport):
                gone = [*report.unlisted, *report.absent]
                gone += [i for i, o in report.observed.items() if o.phase is SchedulerPhase.ENDED]
                if gone and self._bucket.take():
                    accounting = self._remote.accounting(sorted(gone), since)
                    if accounting is not None:
                        records = dict(accounting.records)
                running = [
                    ids[i].job_id
                    for i, o in report.observed.items()
                    if i in ids and o.phase in _OUTPUT_PHASES
                ]
                if running and self._bucket.take():
                    tail_failed = self._mirror_logs(running)
            return report, records, elapsed_ms, tail_failed

        asked_at = self._basis.monotonic()
        self._worker.submit(work, lambda result: self.polled(ids, result, asked_at))

    def polled(self, ids: Mapping[str, LaneJob], result: object, asked_at: float) -> None:
        self._jobs.guard.assert_on_loop()
        self._jobs.poll_ended()
        if isinstance(result, TransportError):
            self._jobs.host_failed(result)
            return
        if isinstance(result, BaseException) or not isinstance(result, tuple):
            log.warning("lane %s: poll failed: %s", self._basis.name, result)
            return
        report, records, elapsed_ms, tail_failed = result
        if isinstance(report, ParseFailure):
            log.warning("lane %s: status unreadable (%s)", self._basis.name, report.detail)
            if report.kind == "timed_out":
                record_slow(self._basis.ctx.paths.root, self._basis.name, report.detail, elapsed_ms)
            if ambiguous(report.detail):
                self._jobs.back_off(report.detail)
            return
        record_ok(self._basis.ctx.paths.root, self._basis.name, elapsed_ms)
        now = self._basis.ctx.now()
        for scheduler_id, job in ids.items():
            if self._jobs.get(job.job_id) is not job or job.written_outside_at >= asked_at:
                continue  # gone, or held/released after this round asked: the next one sees it
            seen = report.observed.get(scheduler_id)
            record = records.get(scheduler_id)
            if seen is not None and seen.phase in ACTIVE_PHASES:
                self.observe(job, seen, now)
            elif seen is not None and seen.phase is SchedulerPhase.ENDED:
                self.ended(job, seen.abnormal_end_state, seen.raw_state, record)
            elif record is not None and record.phase is SchedulerPhase.ENDED:
                self.ended(job, record.abnormal_end_state, record.state_code, record)
            elif scheduler_id in report.absent:
                self.ended(job, None, "", None)  # positively gone; accounting silent
            # unlisted and not in accounting yet: not final, keep waiting
        if tail_failed is not None:  # the status was read; the log read lost the host
            self._jobs.host_failed(tail_failed)

    def _mirror_logs(self, job_ids: list[str]) -> TransportError | None:
        """On the worker: the running jobs' cluster-side logs appended to their local
        copies (:mod:`.live_logs`); a transport failure is returned for the loop to mark
        the host, anything else is logged (the output is never evidence about a job)."""
        logs: list[LiveLog] = []
        paths = self._basis.ctx.paths
        for job_id in job_ids:
            try:
                spec = self._basis.ctx.store.read(job_id)
            except (OSError, VqError):
                continue
            for relative in (spec.stdout_path, spec.stderr_path):
                remote = f"{self._remote.workspace(job_id)}/{relative}"
                logs.append(LiveLog(job_id, remote, paths.workspace(job_id) / relative))
        try:
            self._live.mirror(logs)
        except TransportError as exc:
            return exc
        except (OSError, VqError) as exc:
            log.info("lane %s: live logs not read: %s", self._basis.name, exc)
        return None

    def observe(self, job: LaneJob, seen: JobObservation, now: datetime) -> None:
        """Write what the scheduler reports of a live job, unless it is what was last
        written and the heartbeat is younger than the refresh period (no spec write)."""
        self._jobs.guard.assert_on_loop()
        phase = ACTIVE_PHASES[seen.phase]
        job.phase = phase if not job.cancel_wanted else "cancel_pending"
        waiting = seen.phase in (SchedulerPhase.QUEUED, SchedulerPhase.HELD)
        if waiting:
            job.cluster_started_at = None  # (again) in the queue: a requeue starts anew
        elif job.cluster_started_at is None:
            used = seen.walltime_used_seconds
            job.cluster_started_at = now - timedelta(seconds=used) if used is not None else now
        fields: dict[str, Any] = {
            "scheduler_state": job.phase,
            "scheduler_queued_reason": seen.queued_reason if waiting else None,
            "scheduler_exec_host": seen.exec_host,
            "scheduler_walltime_used": seen.walltime_used,
            "scheduler_walltime_limit": seen.walltime_limit,
            "scheduler_started_at": job.cluster_started_at,
        }
        observed = tuple(fields.values())
        at = self._basis.monotonic()
        refresh = min(HEARTBEAT_REFRESH, self._basis.settings.min_job_age / 2)
        if observed == job.observed and at - job.observed_at < refresh:
            return
        self._jobs.record(job, {**fields, "last_heartbeat_at": now}, durable=False)
        job.observed, job.observed_at = observed, at

    # --- complete --------------------------------------------------------------------------
    def ended(
        self,
        job: LaneJob,
        abnormal: JobState | None,
        raw_state: str,
        record: AccountingRecord | None,
    ) -> None:
        self._jobs.guard.assert_on_loop()
        if record is not None and abnormal is None:
            abnormal = record.abnormal_end_state
        job.end = (abnormal, raw_state)
        job.accounting = record
        job.phase = "copying"
        self.complete(job)

    def complete(self, job: LaneJob) -> None:
        self._jobs.guard.assert_on_loop()
        job.busy = True
        destination = self._basis.ctx.paths.workspace(job.job_id)

        def work() -> tuple[int | None, BaseException | None]:
            marker = self._remote.exit_marker(job.job_id)
            _fault_points.hold_point("before_copy_back")
            try:
                self._remote.copy_back(job.job_id, destination)
            except (VqError, OSError) as exc:
                return marker, exc
            return marker, None

        self._worker.submit(work, lambda result: self._copied(job, result))

    def _copied(self, job: LaneJob, result: object) -> None:
        job.busy = False
        if isinstance(result, TransportError) and job.copy_tries == 0 and job.marker is None:
            self._jobs.host_failed(result)  # the marker is unknown: not final, try again
            job.due = self._basis.monotonic() + self._basis.settings.poll_interval
            return
        copy_error: object = result
        if isinstance(result, tuple):
            marker, copy_error = result
            job.marker = marker if marker is not None else job.marker
        if copy_error is not None:
            delays = self._basis.settings.copy_back_delays
            if job.copy_tries < len(delays):
                job.due = self._basis.monotonic() + delays[job.copy_tries]
                job.copy_tries += 1
                log.warning(
                    "lane %s: copy-back of %s failed: %s", self._basis.name, job.job_id, copy_error
                )
                return
        self.finish(job, artifacts=copy_error is None)

    def finish(self, job: LaneJob, *, artifacts: bool) -> None:
        self._jobs.guard.assert_on_loop()
        abnormal, raw_state = job.end or (None, "")
        verdict = ending(job.marker, abnormal, raw_state)
        # Settled first: a restart between the two writes re-reads the same ending.
        state = "ended" if artifacts else "artifacts_unavailable"
        ran = job.accounting.elapsed_seconds if job.accounting is not None else None
        if job.cluster_started_at is None and ran:
            # never seen running (it ran between two rounds): accounting's elapsed time
            job.cluster_started_at = self._basis.ctx.now() - timedelta(seconds=ran)
        settled = {
            "scheduler_state": state,
            "scheduler_queued_reason": None,
            "scheduler_started_at": job.cluster_started_at,
        }
        if ran is not None:  # the whole run as accounting has it; the usage report
            # charges it, never the time in the cluster's queue (§6.3)
            settled["scheduler_walltime_used"] = format_slurm_duration(ran)
        self._jobs.record(job, settled)
        if verdict.state is None:
            self._basis.lifecycle.finish_attempt(job.job_id, verdict.exit_code)
        else:
            self._basis.lifecycle.scheduler_verdict(
                job.job_id, verdict.state, verdict.reason or "", verdict.exit_code
            )
        self._jobs.drop(job)
        self._sample_after_end(job, artifacts=artifacts)

    def _sample_after_end(self, job: LaneJob, *, artifacts: bool) -> None:
        """After the terminal transition (never delaying it): when the job's GNU time
        receipt is unusable, one ``samples.jsonl`` record from ``sacct`` (:mod:`.usage`).
        A ``partial`` or ``unavailable`` answer (accounting lags the end) is asked again
        after each of ``copy_back_delays``; only the last answer is written. A job that
        never started (cancelled while queued) is not asked about at all."""
        scheduler_id = job.scheduler_job_id
        if scheduler_id is None or self._basis.settings.accounting != "sacct":
            return
        paths = self._basis.ctx.paths
        started = None
        if artifacts:  # the copied-back workspace is the remote one: its first write
            started = (paths.meta_dir(job.job_id) / "scheduler-job-id").exists()
        if never_started(job.marker, started, job.accounting):
            log.info("lane %s: %s never started; no usage to ask for", self._basis.name, job.job_id)
            return
        try:
            receipt: bytes | None = read_regular_beneath(
                paths.tree_of(job.job_id), paths.resource_usage(job.job_id), RECEIPT_LIMIT
            )
        except (OSError, VqError):
            receipt = None
        if not receipt_usable(receipt):
            since = (job.submitted_at or self._basis.ctx.now()) - timedelta(days=1)
            self._ask_sample(job.job_id, scheduler_id, since, job.accounting, 0)

    def _ask_sample(
        self,
        job_id: str,
        scheduler_id: str,
        since: datetime,
        known: AccountingRecord | None,
        tries: int,
    ) -> None:
        def work() -> tuple[AccountingRecord | None, str | None]:
            if known is not None and known.max_rss_kb and known.total_cpu_seconds:
                return known, None
            try:
                report = self._remote.accounting([scheduler_id], since)
            except (VqError, OSError) as exc:
                return known, f"the accounting query failed: {exc}"
            if report is None:
                return known, "the accounting answer could not be read"
            record = report.records.get(scheduler_id)
            return (record, None) if record is not None else (known, "not in accounting yet")

        def answered(result: object) -> None:
            record, why = result if isinstance(result, tuple) else (known, str(result))
            sample = accounting_sample(scheduler_id, record, why, self._basis.ctx.now())
            delays = self._basis.settings.copy_back_delays
            if sample["status"] != "ok" and tries < len(delays):
                self._jobs.later(
                    self._basis.monotonic() + delays[tries],
                    lambda: self._ask_sample(job_id, scheduler_id, since, record, tries + 1),
                )
                return
            paths = self._basis.ctx.paths
            append_line_beneath(paths.tree_of(job_id), paths.samples(job_id), json.dumps(sample))

        self._worker.submit(work, answered)
