"""The one writer of job state transitions, and of the end of a job.

Every state change of a spec goes through :class:`Lifecycle`: claim, launch record,
requeue of a launch that never left, dispatch failures, watchdog verdicts, kill, pause,
resume, the end of an attempt (live or found by recovery) and the terminal bookkeeping.
Each one is a single :meth:`vq.store.specs.SpecStore.update` under the spec lock that
applies :func:`vq.domain.lifecycle.apply_transition`; the ``state_transition`` event is
appended only when the state on disk actually moved (a refused or no-op request writes
no event).

The end of a job — terminal state written *and* no process of it left — runs the same
bookkeeping on every path (:meth:`Lifecycle.ended`): ``failure_tail`` for a
non-COMPLETED ending that has none yet (a kill or a watchdog verdict is written before
the group is gone, so its tail is read once the exit is reaped), the index update, then
the owner's hook (the daemon's webhook, ``--rerun-until-file-exists`` sibling and
``--clean-workdir`` sweep). It runs once per ending.

What each request decides from the spec on disk is in
:mod:`vq.services.lifecycle_decisions` (pure functions); this module owns the lock, the
events and the end of a job.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from vq.domain.events import Event, EventKind, make_event, transition_event
from vq.domain.lifecycle import Outcome
from vq.domain.programs import ProgramStatus
from vq.domain.spec import JobSpec
from vq.domain.states import JobState
from vq.domain.watchdog import Evidence
from vq.errors import VqError
from vq.services import lifecycle_decisions as rules
from vq.services.context import ServiceContext
from vq.services.outcomes import read_stderr_tail
from vq.store.events import append_event
from vq.store.group_commit import commit_group

__all__ = ["Lifecycle", "Transition"]

#: How many endings :meth:`Lifecycle.ended` remembers to run its bookkeeping only once.
_ENDED_MEMORY = 4096


@dataclass(frozen=True)
class Transition:
    """One request's result: the spec on disk, its state before, and whether it moved."""

    spec: JobSpec
    previous: JobState
    changed: bool


def _no_op(spec: JobSpec) -> None:
    return None


class Lifecycle:
    """The transitions of one state root.

    ``on_change`` sees every spec written (the daemon's index); ``on_ended`` runs the
    owner's end-of-job work once per ending (it must not raise; it may be called on any
    thread that ends a job).
    """

    def __init__(
        self,
        ctx: ServiceContext,
        *,
        on_change: Callable[[JobSpec], None] = _no_op,
        on_ended: Callable[[JobSpec], None] = _no_op,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ctx = ctx
        self.on_change = on_change
        self.on_ended = on_ended
        self._monotonic = monotonic
        self._ended: OrderedDict[tuple[str, datetime | None], None] = OrderedDict()
        self._ended_lock = threading.Lock()  # a PENDING kill ends a job on an RPC thread

    # --- the one write path ------------------------------------------------------------
    def _move(
        self,
        job_id: str,
        decide: Callable[[JobSpec], JobSpec | None],
        *,
        now: datetime,
        durable: bool = True,
        sync_dir: bool = True,
        preceding: Callable[[JobState], list[Event]] = lambda previous: [],
        reason: str | None = None,
        **fields: Any,
    ) -> Transition:
        """Update under the lock; append ``preceding`` events and the transition event
        (``reason``, else the recorded ``failure_reason``) only if the state moved."""
        result = self.ctx.store.update(job_id, decide, durable=durable, sync_dir=sync_dir)
        spec = result.spec
        changed = result.changed and spec.state is not result.before
        if changed:
            for event in preceding(result.before):
                append_event(self.ctx.paths, event)
            if reason is None and spec.state is not JobState.COMPLETED:
                reason = spec.failure_reason
            append_event(
                self.ctx.paths,
                transition_event(
                    job_id, now, result.before.value, spec.state.value, reason=reason, **fields
                ),
            )
        self.on_change(spec)
        return Transition(spec, result.before, changed)

    # --- dispatch --------------------------------------------------------------------------
    def claim(
        self,
        job_id: str,
        *,
        workdir: str,
        program: ProgramStatus | None = None,
        cpu_affinity: list[int] | None = None,
    ) -> Transition:
        """PENDING (and due) → RUNNING, durable before the launch; records ``workdir``,
        the program SHA that will actually run and the cores the attempt is pinned to
        (None: not pinned)."""
        moved = self.claim_group([(job_id, workdir, program, cpu_affinity)])[0]
        if isinstance(moved, BaseException):
            raise moved
        return moved

    def claim_group(
        self, claims: Sequence[tuple[str, str, ProgramStatus | None, list[int] | None]]
    ) -> list[Transition | BaseException]:
        """:meth:`claim` for several ``(job_id, workdir, program, cpu_affinity)`` at once,
        as one group commit (:mod:`vq.store.group_commit`): every claim returned is durable
        when this returns; per claim, its Transition or the error that refused it."""
        now = self.ctx.now()

        def claim_one(
            job_id: str, workdir: str, program: ProgramStatus | None, cores: list[int] | None
        ) -> Callable[[bool], Transition]:
            decide = partial(
                rules.decide_claim,
                now=now,
                workdir=workdir,
                program=program,
                cores=cores,
                attempt=secrets.token_hex(8),
            )
            return lambda sync_dir: self._move(job_id, decide, now=now, sync_dir=sync_dir)

        return list(commit_group(self.ctx.store, [claim_one(*claim) for claim in claims]))

    def record_launch(
        self,
        job_id: str,
        pid: int,
        pgid: int,
        start_ticks: int | None,
        *,
        event: bool = True,
        durable: bool = False,
    ) -> JobSpec:
        """The launched attempt's identity (no state change).

        Not fsync'd by default: after a power loss no process survives anyway, and
        recovery finds a live group through its ``VQ_JOB_ID`` environment when the pid is
        missing.
        """

        def record(current: JobSpec) -> JobSpec:
            current.pid, current.pgid, current.pid_start_time = pid, pgid, start_ticks
            return current

        spec = self.ctx.store.update(job_id, record, durable=durable).spec
        self.on_change(spec)
        if event:
            append_event(
                self.ctx.paths,
                make_event(
                    "dispatched",
                    job_id,
                    self.ctx.now(),
                    pid=pid,
                    pgid=pgid,
                    cpus=spec.cpus,
                    mem_mb=spec.mem_mb,
                ),
            )
        return spec

    def requeue_unlaunched(self, job_id: str, reason: str) -> Transition:
        """RUNNING → PENDING for a claim whose launch provably never left."""
        now = self.ctx.now()
        decide = partial(rules.decide_requeue_unlaunched, now=now, reason=reason)
        return self._move(job_id, decide, now=now)

    def requeue_never_started(
        self, job_id: str, attempt: str | None, reason: str, *, delay_seconds: float = 0.0
    ) -> Transition:
        """RUNNING → PENDING for the attempt ``attempt`` whose command provably never
        started (its executor fenced the start record): it did not run, so running it
        once is not a re-run, and no retry budget is consumed. Any other state, or a
        later attempt, is left alone."""
        now = self.ctx.now()
        decide = partial(
            rules.decide_requeue_never_started,
            now=now,
            attempt=attempt,
            reason=reason,
            delay_seconds=delay_seconds,
        )
        return self._move(job_id, decide, now=now)

    def fail_pending(self, job_id: str, reason: str) -> Transition:
        """PENDING → FAILED (a dependency cascade, a refused program, no executor)."""
        now = self.ctx.now()
        decide = partial(rules.decide_fail_pending, now=now, reason=reason)
        moved = self._move(job_id, decide, now=now)
        if moved.changed:
            self.ended(moved.spec)
        return moved

    def fail_dispatch(self, job_id: str, reason: str) -> Transition:
        """A claimed job whose launch failed (nothing of it runs) → FAILED with the
        reason, never consuming retry budget. A terminal spec (killed meanwhile) stays."""
        now = self.ctx.now()
        decide = partial(rules.decide_fail_dispatch, now=now, reason=reason)
        moved = self._move(job_id, decide, now=now)
        self.ended(moved.spec)
        return moved

    # --- supervision -------------------------------------------------------------------------
    def watchdog_verdict(
        self, job_id: str, state: JobState, reason: str, evidence: Evidence
    ) -> Transition:
        """RUNNING → OOM_KILLED / TIME_EXCEEDED / STARVED, written before any signal. A
        paused job, or one another writer ended first, keeps its state."""
        now = self.ctx.now()
        decide = partial(
            rules.decide_watchdog_verdict, now=now, state=state, reason=reason, evidence=evidence
        )

        def watchdog_kill(previous: JobState) -> list[Event]:
            return [
                make_event(
                    "watchdog_kill",
                    job_id,
                    now,
                    state=state.value,
                    reason=reason,
                    evidence=evidence,
                )
            ]

        return self._move(job_id, decide, now=now, preceding=watchdog_kill, evidence=evidence)

    def finish_attempt(
        self,
        job_id: str,
        exit_code: int | None,
        *,
        unknown_state: JobState = JobState.FAILED,
        unknown_reason: str = "the job's exit code is unknown",
        marker_backed: bool = False,
    ) -> Transition:
        """Persist the end of the current attempt (rules in :mod:`vq.services.outcomes`).

        A terminal spec keeps its state (sticky); a late exit code is only filled in.
        ``marker_backed``: the exit code came from the executor's durable record, so the
        spec write is atomic but not fsync'd (recovery re-derives the same outcome after
        a power loss). Without one the outcome exists nowhere else: fully durable.
        """
        now = self.ctx.now()
        # The stderr tail is read before the lock is taken, and only when it can be needed.
        tail = None if exit_code == 0 else read_stderr_tail(self.ctx, self.ctx.store.read(job_id))
        decide = partial(
            rules.decide_finish_attempt,
            now=now,
            exit_code=exit_code,
            unknown=Outcome(unknown_state, unknown_reason),
            tail=tail,
        )
        durable = not (marker_backed and exit_code is not None)
        return self._move(job_id, decide, now=now, durable=durable, exit_code=exit_code)

    # --- scheduler lanes -----------------------------------------------------------------------
    def record_scheduler(
        self,
        job_id: str,
        fields: dict[str, Any],
        *,
        durable: bool = True,
        event: EventKind | None = None,
    ) -> JobSpec:
        """Set ``scheduler_*`` observation fields (and ``last_heartbeat_at``) of a claimed
        job; no state change. ``durable`` for the intent and the scheduler job id, whose
        loss would mean a second submission; observations are re-read by the next poll.
        ``event`` appends that event with the fields once written."""
        allowed = {"last_heartbeat_at"}

        def record(current: JobSpec) -> JobSpec | None:
            changed = False
            for key, value in fields.items():
                if not key.startswith("scheduler_") and key not in allowed:
                    raise ValueError(f"not a scheduler field: {key}")
                if getattr(current, key) != value:
                    setattr(current, key, value)
                    changed = True
            return current if changed else None

        result = self.ctx.store.update(job_id, record, durable=durable)
        if result.changed:
            self.on_change(result.spec)
            if event is not None:
                payload = {k: v for k, v in fields.items() if k != "last_heartbeat_at"}
                append_event(self.ctx.paths, make_event(event, job_id, self.ctx.now(), **payload))
        return result.spec

    def scheduler_verdict(
        self, job_id: str, state: JobState, reason: str, exit_code: int | None
    ) -> Transition:
        """The scheduler's own ending (OUT_OF_MEMORY → OOM_KILLED, TIMEOUT → TIME_EXCEEDED,
        gone without a marker → ABORTED_BY_QUEUE), whatever the exit marker says. A
        terminal spec keeps its state; a missing exit code is filled in."""
        now = self.ctx.now()
        decide = partial(
            rules.decide_scheduler_verdict, now=now, state=state, reason=reason, exit_code=exit_code
        )
        return self._move(job_id, decide, now=now, exit_code=exit_code)

    # --- operator control --------------------------------------------------------------------
    def _owned(
        self, decide: Callable[[JobSpec], JobSpec | None]
    ) -> Callable[[JobSpec], JobSpec | None]:
        """``decide`` behind the ownership helper (§7.3), applied under the spec's lock to
        the spec as it is there, before the state is classified."""
        check = self.ctx.owner_check
        if check is None:
            return decide

        def owned(current: JobSpec) -> JobSpec | None:
            check(current)
            return decide(current)

        return owned

    def kill(self, job_id: str, reason: str) -> Transition:
        """Write KILLED (sticky) before any signal. Killing a KILLED job changes nothing;
        any other terminal state is a Conflict naming it. A PENDING job has ended at once."""
        now = self.ctx.now()
        decide = self._owned(partial(rules.decide_kill, now=now, reason=reason))

        def requested(previous: JobState) -> list[Event]:
            return [make_event("kill_requested", job_id, now, state=previous.value)]

        moved = self._move(job_id, decide, now=now, preceding=requested)
        if moved.changed and moved.previous is JobState.PENDING:
            self.ended(moved.spec)
        return moved

    def pause(
        self,
        job_id: str,
        by: str,
        *,
        started: Callable[[JobSpec], bool] = lambda spec: spec.pgid is not None,
    ) -> Transition:
        """RUNNING → SUSPENDED, durable before SIGSTOP. Pausing a SUSPENDED job changes
        nothing; a job still starting (no process recorded yet) is a Conflict."""
        now, now_mono = self.ctx.now(), self._monotonic()
        decide = self._owned(
            partial(rules.decide_pause, now=now, now_monotonic=now_mono, by=by, started=started)
        )
        return self._move(job_id, decide, now=now, reason=f"paused by {by}")

    def pause_undelivered(self, spec: JobSpec) -> Transition:
        """Undo the pause ``spec`` records (RUNNING again, no pause time) when its signal
        could not reach the still-running job: the spec never says SUSPENDED of a job
        that runs. Changes nothing once the job moved on."""
        now = self.ctx.now()
        decide = partial(rules.decide_pause_undelivered, now=now, paused_at=spec.paused_at)
        return self._move(spec.id, decide, now=now, reason="the pause could not be delivered")

    def resume(self, job_id: str, *, only_paused_by: str | None = None) -> Transition:
        """SUSPENDED → RUNNING with the pause added to ``paused_seconds_total``, durable
        before SIGCONT. With ``only_paused_by``, a job someone else paused stays."""
        now, now_mono = self.ctx.now(), self._monotonic()
        decide = self._owned(
            partial(
                rules.decide_resume, now=now, now_monotonic=now_mono, only_paused_by=only_paused_by
            )
        )
        return self._move(job_id, decide, now=now, reason="resumed")

    # --- the end of a job ----------------------------------------------------------------------
    def ended(self, spec_or_id: JobSpec | str) -> JobSpec | None:
        """Terminal bookkeeping for a job that has fully ended (terminal, nothing of it
        running): the same on every path, once per ending. Returns the spec, or None if
        it is not terminal (nothing to do)."""
        job_id = spec_or_id if isinstance(spec_or_id, str) else spec_or_id.id
        try:
            spec = self.ctx.store.read(job_id)
        except VqError:
            return None  # removed or unreadable: nothing left to do bookkeeping on
        if not spec.is_terminal:
            return None
        key = (job_id, spec.finished_at)
        with self._ended_lock:
            if key in self._ended:
                return spec
            self._ended[key] = None
            while len(self._ended) > _ENDED_MEMORY:
                self._ended.popitem(last=False)
        if spec.state is not JobState.COMPLETED and spec.failure_tail is None:
            tail = read_stderr_tail(self.ctx, spec)  # outside the lock
            if tail is not None:

                def fill(current: JobSpec) -> JobSpec | None:
                    if current.failure_tail is not None or current.finished_at != spec.finished_at:
                        return None
                    current.failure_tail = tail
                    return current

                # Re-derivable from the stderr file: atomic, not fsync'd.
                spec = self.ctx.store.update(job_id, fill, durable=False).spec
        self.on_change(spec)
        self.on_ended(spec)
        return spec
