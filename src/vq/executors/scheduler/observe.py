"""Observation, completion and cancel of a lane's scheduler jobs (a mixin of
:class:`~.lane.SchedulerLane`; every method runs on the daemon loop, every cluster call
on the lane's worker).

* One poll in flight at a time, at most one per ``poll_interval``, within the host's
  token bucket: one status query for every tracked id, plus one accounting query for
  ids the status no longer shows as active. A transport failure (or a scheduler answer
  saying it is overloaded) backs off and marks the host unreachable; jobs are untouched.
* An unlisted id without an accounting record is "not final": nothing changes.
* Completion reads the exit marker and copies the workspace back (retried after each of
  ``copy_back_delays``), then writes the outcome (:func:`.outcome.ending`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from vq import _fault_points
from vq._safe_open import append_line_beneath, read_regular_beneath
from vq.config.hosts import LaneSettings
from vq.dialects import (
    AccountingRecord,
    ControlOutcome,
    JobObservation,
    ParseFailure,
    SchedulerPhase,
    StatusReport,
)
from vq.domain.states import JobState
from vq.errors import TransportError, VqError
from vq.hosts.health import record_failure, record_ok, record_slow

from .jobs import ACTIVE_PHASES, LaneJob, ambiguous
from .outcome import TokenBucket, ending
from .ports import LaneContext, LaneLifecycle
from .remote import LaneRemote
from .usage import accounting_sample, never_started, receipt_usable
from .worker import Worker

__all__ = ["ObservingLane"]

#: A receipt larger than this is not a GNU time receipt.
RECEIPT_LIMIT = 64 * 1024
#: An unchanged observation is not written again (a round over 1,000 held jobs writes
#: nothing), except that ``last_heartbeat_at`` is refreshed at least this often (seconds;
#: never more than half of MinJobAge, which the blind-lane warning measures against).
HEARTBEAT_REFRESH = 60.0

log = logging.getLogger(__name__)


class ObservingLane:
    """Poll, complete and cancel (see the module docstring)."""

    name: str
    settings: LaneSettings
    ctx: LaneContext
    lifecycle: LaneLifecycle
    remote: LaneRemote
    _worker: Worker
    _monotonic: Callable[[], float]
    _bucket: TokenBucket
    _jobs: dict[str, LaneJob]
    _polling: bool
    _next_poll: float
    _backoff_until: float
    #: (monotonic due time, call): delayed follow-ups such as an accounting sample retry.
    _later: list[tuple[float, Callable[[], None]]]

    # --- observe ---------------------------------------------------------------------------
    def _maybe_poll(self, now: float) -> None:
        ids = {
            j.scheduler_job_id: j
            for j in self._jobs.values()
            if j.scheduler_job_id is not None and not j.busy and j.phase != "copying"
        }
        if self._polling or not ids or now < self._next_poll:
            return
        if not self._bucket.take():
            self._next_poll = now + self._bucket.wait_seconds()
            return
        self._polling = True
        self._next_poll = now + self.settings.poll_interval
        since = min(
            (j.submitted_at for j in ids.values() if j.submitted_at), default=self.ctx.now()
        )

        def work() -> tuple[StatusReport | ParseFailure, dict[str, AccountingRecord], float]:
            started = time.monotonic()
            report = self.remote.status(sorted(ids))
            elapsed_ms = (time.monotonic() - started) * 1000
            records: dict[str, AccountingRecord] = {}
            if isinstance(report, StatusReport):
                gone = [*report.unlisted, *report.absent]
                gone += [i for i, o in report.observed.items() if o.phase is SchedulerPhase.ENDED]
                if gone and self._bucket.take():
                    accounting = self.remote.accounting(sorted(gone), since)
                    if accounting is not None:
                        records = dict(accounting.records)
            return report, records, elapsed_ms

        asked_at = self._monotonic()
        self._worker.submit(work, lambda result: self._polled(ids, result, asked_at))

    def _polled(self, ids: Mapping[str, LaneJob], result: object, asked_at: float) -> None:
        self._polling = False
        if isinstance(result, TransportError):
            self._host_failed(result)
            return
        if isinstance(result, BaseException) or not isinstance(result, tuple):
            log.warning("lane %s: poll failed: %s", self.name, result)
            return
        report, records, elapsed_ms = result
        if isinstance(report, ParseFailure):
            log.warning("lane %s: status unreadable (%s)", self.name, report.detail)
            if report.kind == "timed_out":
                record_slow(self.ctx.paths.root, self.name, report.detail, elapsed_ms)
            if ambiguous(report.detail):
                self._back_off(report.detail)
            return
        record_ok(self.ctx.paths.root, self.name, elapsed_ms)
        now = self.ctx.now()
        for scheduler_id, job in ids.items():
            if self._jobs.get(job.job_id) is not job or job.written_outside_at >= asked_at:
                continue  # gone, or held/released after this round asked: the next one sees it
            seen = report.observed.get(scheduler_id)
            record = records.get(scheduler_id)
            if seen is not None and seen.phase in ACTIVE_PHASES:
                self._observe(job, seen, now)
            elif seen is not None and seen.phase is SchedulerPhase.ENDED:
                self._ended(job, seen.abnormal_end_state, seen.raw_state, record)
            elif record is not None and record.phase is SchedulerPhase.ENDED:
                self._ended(job, record.abnormal_end_state, record.state_code, record)
            elif scheduler_id in report.absent:
                self._ended(job, None, "", None)  # positively gone; accounting silent
            # unlisted and not in accounting yet: not final, keep waiting

    def _observe(self, job: LaneJob, seen: JobObservation, now: datetime) -> None:
        """Write what the scheduler reports of a live job, unless it is what was last
        written and the heartbeat is younger than the refresh period (no spec write)."""
        phase = ACTIVE_PHASES[seen.phase]
        job.phase = phase if not job.cancel_wanted else "cancel_pending"
        waiting = seen.phase in (SchedulerPhase.QUEUED, SchedulerPhase.HELD)
        fields: dict[str, Any] = {
            "scheduler_state": job.phase,
            "scheduler_queued_reason": seen.queued_reason if waiting else None,
            "scheduler_exec_host": seen.exec_host,
            "scheduler_walltime_used": seen.walltime_used,
            "scheduler_walltime_limit": seen.walltime_limit,
        }
        observed = tuple(fields.values())
        at = self._monotonic()
        refresh = min(HEARTBEAT_REFRESH, self.settings.min_job_age / 2)
        if observed == job.observed and at - job.observed_at < refresh:
            return
        self._record(job, {**fields, "last_heartbeat_at": now}, durable=False)
        job.observed, job.observed_at = observed, at

    def forget_observation(self, job_id: str) -> None:
        """The spec's scheduler fields were written outside an observation (any thread):
        the next observation of ``job_id`` is written whatever it says, and a round asked
        before now is not applied to it (it could undo a hold it did not see)."""
        job = self._jobs.get(job_id)
        if job is not None:
            job.observed = None
            job.written_outside_at = self._monotonic()

    # --- complete --------------------------------------------------------------------------
    def _ended(
        self,
        job: LaneJob,
        abnormal: JobState | None,
        raw_state: str,
        record: AccountingRecord | None,
    ) -> None:
        if record is not None and abnormal is None:
            abnormal = record.abnormal_end_state
        job.end = (abnormal, raw_state)
        job.accounting = record
        job.phase = "copying"
        self._complete(job)

    def _complete(self, job: LaneJob) -> None:
        job.busy = True
        destination = self.ctx.paths.workspace(job.job_id)

        def work() -> tuple[int | None, BaseException | None]:
            marker = self.remote.exit_marker(job.job_id)
            _fault_points.hold_point("before_copy_back")
            try:
                self.remote.copy_back(job.job_id, destination)
            except (VqError, OSError) as exc:
                return marker, exc
            return marker, None

        self._worker.submit(work, lambda result: self._copied(job, result))

    def _copied(self, job: LaneJob, result: object) -> None:
        job.busy = False
        if isinstance(result, TransportError) and job.copy_tries == 0 and job.marker is None:
            self._host_failed(result)  # the marker is unknown: not final, try again
            job.due = self._monotonic() + self.settings.poll_interval
            return
        copy_error: object = result
        if isinstance(result, tuple):
            marker, copy_error = result
            job.marker = marker if marker is not None else job.marker
        if copy_error is not None:
            delays = self.settings.copy_back_delays
            if job.copy_tries < len(delays):
                job.due = self._monotonic() + delays[job.copy_tries]
                job.copy_tries += 1
                log.warning(
                    "lane %s: copy-back of %s failed: %s", self.name, job.job_id, copy_error
                )
                return
        self._finish(job, artifacts=copy_error is None)

    def _finish(self, job: LaneJob, *, artifacts: bool) -> None:
        abnormal, raw_state = job.end or (None, "")
        verdict = ending(job.marker, abnormal, raw_state)
        # Settled first: a restart between the two writes re-reads the same ending.
        state = "ended" if artifacts else "artifacts_unavailable"
        self._record(job, {"scheduler_state": state, "scheduler_queued_reason": None})
        if verdict.state is None:
            self.lifecycle.finish_attempt(job.job_id, verdict.exit_code)
        else:
            self.lifecycle.scheduler_verdict(
                job.job_id, verdict.state, verdict.reason or "", verdict.exit_code
            )
        self._drop(job)
        self._sample_after_end(job, artifacts=artifacts)

    def _sample_after_end(self, job: LaneJob, *, artifacts: bool) -> None:
        """After the terminal transition (never delaying it): when the job's GNU time
        receipt is unusable, one ``samples.jsonl`` record from ``sacct`` (:mod:`.usage`).
        A ``partial`` or ``unavailable`` answer (accounting lags the end) is asked again
        after each of ``copy_back_delays``; only the last answer is written. A job that
        never started (cancelled while queued) is not asked about at all."""
        scheduler_id = job.scheduler_job_id
        if scheduler_id is None or self.settings.accounting != "sacct":
            return
        paths = self.ctx.paths
        started = None
        if artifacts:  # the copied-back workspace is the remote one: its first write
            started = (paths.meta_dir(job.job_id) / "scheduler-job-id").exists()
        if never_started(job.marker, started, job.accounting):
            log.info("lane %s: %s never started; no usage to ask for", self.name, job.job_id)
            return
        try:
            receipt: bytes | None = read_regular_beneath(
                paths.tree_of(job.job_id), paths.resource_usage(job.job_id), RECEIPT_LIMIT
            )
        except (OSError, VqError):
            receipt = None
        if not receipt_usable(receipt):
            since = (job.submitted_at or self.ctx.now()) - timedelta(days=1)
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
                report = self.remote.accounting([scheduler_id], since)
            except (VqError, OSError) as exc:
                return known, f"the accounting query failed: {exc}"
            if report is None:
                return known, "the accounting answer could not be read"
            record = report.records.get(scheduler_id)
            return (record, None) if record is not None else (known, "not in accounting yet")

        def answered(result: object) -> None:
            record, why = result if isinstance(result, tuple) else (known, str(result))
            sample = accounting_sample(scheduler_id, record, why, self.ctx.now())
            delays = self.settings.copy_back_delays
            if sample["status"] != "ok" and tries < len(delays):
                self._later.append(
                    (
                        self._monotonic() + delays[tries],
                        lambda: self._ask_sample(job_id, scheduler_id, since, record, tries + 1),
                    )
                )
                return
            paths = self.ctx.paths
            append_line_beneath(paths.tree_of(job_id), paths.samples(job_id), json.dumps(sample))

        self._worker.submit(work, answered)

    def _run_later(self, now: float) -> None:
        """Run the delayed calls that are due (on the loop)."""
        due = [call for at, call in self._later if at <= now]
        self._later = [(at, call) for at, call in self._later if at > now]
        for call in due:
            call()

    # --- cancel ----------------------------------------------------------------------------
    def request_cancel(self, job_id: str) -> None:
        """On the loop: cancel the job's scheduler job (KILLED is already written)."""
        job = self._jobs.get(job_id)
        if job is None:
            return
        job.cancel_wanted = True
        if job.scheduler_job_id is not None and not job.busy:
            self._send_cancel(job)

    def _send_cancel(self, job: LaneJob) -> None:
        scheduler_id = job.scheduler_job_id
        if scheduler_id is None:
            return
        job.busy = True
        self._worker.submit(
            lambda: self.remote.control("cancel", scheduler_id),
            lambda result: self._cancelled(job, result),
        )

    def _cancelled(self, job: LaneJob, result: object) -> None:
        job.busy = False
        if isinstance(result, ControlOutcome) and result.kind in (
            "done",
            "already_ended",
            "unknown_job",
        ):
            job.cancel_wanted = False
            self._next_poll = self._monotonic()  # learn soon that it is gone
            return
        if isinstance(result, TransportError):
            self._host_failed(result)
        job.phase, job.due = "cancel_pending", self._monotonic() + self.settings.poll_interval
        self._record(job, {"scheduler_state": "cancel_pending"}, durable=False)

    # --- helpers -----------------------------------------------------------------------------
    def track(self, job: LaneJob) -> None:
        self._jobs[job.job_id] = job

    def _record(
        self,
        job: LaneJob,
        fields: dict[str, Any],
        *,
        durable: bool = True,
        event: Any = None,
    ) -> None:
        job.observed = None  # the spec now differs from the last observation written
        try:
            self.lifecycle.record_scheduler(job.job_id, fields, durable=durable, event=event)
        except VqError as exc:
            log.warning("lane %s: job %s not updated: %s", self.name, job.job_id, exc.message)

    def _fail(self, job: LaneJob, reason: str) -> None:
        self.lifecycle.fail_dispatch(job.job_id, reason)
        self._jobs.pop(job.job_id, None)

    def _drop(self, job: LaneJob) -> None:
        """The job holds no capacity any more; its ending bookkeeping runs now."""
        self._jobs.pop(job.job_id, None)
        self.lifecycle.ended(job.job_id)

    def _host_failed(self, exc: TransportError) -> None:
        self._back_off(exc.message)
        record_failure(self.ctx.paths.root, self.name, exc)

    def _back_off(self, why: str) -> None:
        self._backoff_until = self._monotonic() + self.settings.backoff_seconds
        log.warning(
            "lane %s: backing off for %.0f s (%s)", self.name, self.settings.backoff_seconds, why
        )
