"""Observation, completion and kill of a lane's packed allocations (a part of
:class:`~.packed.PackedLane`; every method runs on the daemon loop, every cluster call on
the lane's worker).

* Every allocation due in a tick is observed in rounds of up to
  :data:`~vq.packing.slurm_rounds.ROUND_SIZE`, one token of the host's bucket each: one
  ``squeue --jobs=…``, one ``sacct --name=vqp-<a1>,vqp-<a2>,…`` (read by the Slurm
  dialect, :mod:`vq.dialects.slurm_alloc`) and one read of the slot markers for the
  whole round (:mod:`vq.packing.slurm_rounds`), turned into one
  :class:`~vq.packing.evidence.AttemptEvidence` per allocation (an allocation whose
  answer cannot be trusted fails alone). Each is due again ``poll_interval`` later.
  ``UNKNOWN`` (accounting has not shown the allocation yet) changes nothing; an
  untrustworthy answer neither.
* Each element ends as soon as its own slot has
  (:func:`~vq.packing.lane_batch.element_ending`); in an ended allocation a slot without
  evidence is ``ABORTED_BY_QUEUE``. The slots that ended in one round are copied back
  first, in one remote call (:mod:`.packed_copy`): each slot's directory into its
  element's workspace and its logs (``.out`` and ``.err``) as its ``stdout.log`` and
  ``stderr.log`` (the last :data:`MAX_SLOT_LOG_BYTES` of each, continuing what was
  mirrored live: :func:`~.packed_copy.settled_log`). A failed copy is retried
  after each of ``copy_back_delays``, then the element ends ``artifacts_unavailable``
  with its exit code kept; then ``scheduler_state`` is settled, then the outcome is
  written.
* A round that finds elements running in a running allocation also brings their slots'
  new output (one more SSH call for the whole round, with one more token of the bucket;
  :mod:`.live_logs`, at most :data:`MAX_SLOT_LOG_BYTES` of each log) into their local
  ``stdout.log``/``stderr.log``. It runs on the worker, where a later round's copy-back
  of the same slot queues behind it.
* A kill (:func:`~vq.packing.lane_control.kill_action`) is re-evaluated every round until
  the element's slot has ended.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime

from vq._safe_open import atomic_write_beneath, read_regular_beneath
from vq.dialects._values import format_slurm_duration
from vq.dialects.slurm_alloc import COMMAND_DEADLINE_S, ObservationError
from vq.domain.states import JobState
from vq.errors import TransportError, VqError
from vq.packing.evidence import TERMINAL, AttemptEvidence, attempt_evidence
from vq.packing.lane_batch import ElementEnding, element_ending
from vq.packing.lane_control import kill_action
from vq.packing.slurm_rounds import Watched, rounds

from .live_logs import LiveLog, LiveLogs, read_start
from .packed_copy import SlotCopy, restore_slots, settled_log
from .packed_ports import PackHost
from .packed_state import PackedAllocation, PackedAllocations

__all__ = ["MAX_SLOT_LOG_BYTES", "PackedObservation"]

log = logging.getLogger(__name__)

#: The most of a slot's log copied back as its element's ``stdout.log``.
MAX_SLOT_LOG_BYTES = 1 << 20


class PackedObservation:
    """Poll, complete and kill the allocations of ``packs`` (see the module docstring)."""

    def __init__(self, packs: PackedAllocations) -> None:
        self.packs = packs

    @property
    def host(self) -> PackHost:
        return self.packs.host

    def poll_due(self, due: list[PackedAllocation], now: float) -> None:
        """Observe every due allocation, a round of up to ``ROUND_SIZE`` per token of the
        host's scheduler budget; those left when the bucket is empty wait a second."""
        watched = {Watched(a.allocation_id, a.job_id or "", a.work): a for a in due}
        for group in rounds(list(watched)):
            allocs = [watched[item] for item in group]
            if not self.host.take_token():
                for alloc in allocs:
                    alloc.due = now + 1.0
                continue
            self._poll(allocs, group)

    def _poll(self, allocs: list[PackedAllocation], group: list[Watched]) -> None:
        """One round (``squeue``, ``sacct``, markers) over ``allocs``; each allocation's
        evidence, or its own error, goes to :meth:`_polled`."""
        remote = self.packs.remote
        assert remote is not None
        for alloc in allocs:
            alloc.busy = True
        since = min(alloc.known[1].window_start() for alloc in allocs)

        def work() -> list[AttemptEvidence | ObservationError]:
            evidence: list[AttemptEvidence | ObservationError] = []
            answers = remote.observe_round(group, since)
            for alloc, item, answer in zip(allocs, group, answers, strict=True):
                if isinstance(answer, ObservationError):
                    evidence.append(answer)
                    continue
                row, records, markers = answer
                try:
                    evidence.append(
                        attempt_evidence(
                            alloc.allocation_id, item.job_id, alloc.keys, row, records, markers
                        )
                    )
                except ObservationError as exc:
                    evidence.append(exc)
            return evidence

        def done(result: object) -> None:
            if isinstance(result, TransportError):
                self.host.host_failed(result)  # once for the round
            running: list[tuple[str, str]] = []
            for index, alloc in enumerate(allocs):
                answer = result[index] if isinstance(result, list) else result
                running += self._polled(alloc, answer)
            self._mirror(running)

        self.host.run_on_worker(work, done)

    def _mirror(self, running: list[tuple[str, str]]) -> None:
        """On the loop: the new output of the running elements (``(element, log prefix of
        its slot)``) appended to their local logs on the worker, one SSH call with one
        token of the bucket (none left: the next round brings it)."""
        remote = self.packs.remote
        if not running or remote is None or not self.host.take_token():
            return
        ctx = self.host.ctx
        live = LiveLogs(remote.runner, COMMAND_DEADLINE_S, ctx.paths.tree_of)

        def work() -> None:
            logs: list[LiveLog] = []
            for element, slot_log in running:
                try:
                    spec = ctx.store.read(element)
                except (OSError, VqError):
                    continue
                workspace = ctx.paths.workspace(element)
                for local, suffix in ((spec.stdout_path, "out"), (spec.stderr_path, "err")):
                    cluster = f"{slot_log}.{suffix}"
                    logs.append(LiveLog(element, cluster, workspace / local, MAX_SLOT_LOG_BYTES))
            live.mirror(logs)

        self.host.run_on_worker(work, self._mirrored)

    def _mirrored(self, result: object) -> None:
        if isinstance(result, TransportError):
            self.host.host_failed(result)
        elif isinstance(result, BaseException):
            log.info("lane %s: live logs not read: %s", self.host.name, result)

    def _polled(self, alloc: PackedAllocation, result: object) -> list[tuple[str, str]]:
        """Act on one allocation's evidence; the elements still running in it, each with
        its slot's log prefix (for :meth:`_mirror`)."""
        alloc.busy = False
        alloc.due = self.host.monotonic() + self.host.settings.poll_interval
        if not isinstance(result, AttemptEvidence):
            log.warning("lane %s: observing %s failed: %s", self.host.name, alloc, result)
            return []
        if result.state == "UNKNOWN":
            return []  # accounting has not shown the allocation yet: not final
        ended = result.state in TERMINAL
        if not ended:
            alloc.phase = "running" if result.state == "RUNNING" else "queued"
            if alloc.phase == "queued":
                alloc.started_at = None
            elif alloc.started_at is None:
                alloc.started_at = self.host.ctx.now()
        endings: dict[str, ElementEnding] = {}
        walls: dict[str, str] = {}
        running: list[tuple[str, str]] = []
        for task in result.tasks:
            element = alloc.keys[task.slot]
            if element not in alloc.members:
                continue
            wall = self._wall(task.elapsed_seconds, result.start)
            if wall is not None:
                walls[element] = wall
            ending = element_ending(task)
            if ending is None and ended:
                ending = ElementEnding(
                    JobState.ABORTED_BY_QUEUE,
                    None,
                    f"the allocation ended ({result.raw_state}) without evidence of slot "
                    f"{task.slot}",
                )
            if ending is not None:
                endings[element] = ending
            elif not ended:
                self.packs.record(
                    element,
                    {"scheduler_state": alloc.phase, "scheduler_started_at": alloc.started_at},
                    durable=False,
                )
                if alloc.phase == "running":
                    running.append((element, f"{alloc.log_prefix}{task.slot}"))
        self._kill_wanted(alloc, result, endings)
        if endings:
            self._collect(alloc, endings, walls)
        return running

    def _wall(self, step_seconds: float | None, allocation_start: str | None) -> str | None:
        """A slot's ``scheduler_walltime_used``: its step's wall time in accounting, else
        (the step row lags) the time since the allocation started, as the scheduler
        reported that start; None when neither is known. Never the queue wait (§6.3)."""
        if step_seconds is None and allocation_start is not None:
            try:
                started = datetime.fromisoformat(allocation_start).replace(tzinfo=UTC)
            except ValueError:
                return None
            step_seconds = max(0.0, (self.host.ctx.now() - started).total_seconds())
        return None if step_seconds is None else format_slurm_duration(step_seconds)

    def _collect(
        self,
        alloc: PackedAllocation,
        endings: dict[str, ElementEnding],
        walls: Mapping[str, str],
    ) -> None:
        """Copy every ended slot back in one remote call (its directory into the element's
        workspace, its logs as ``stdout.log`` and ``stderr.log``), then write each
        element's outcome."""
        remote = self.packs.remote
        assert remote is not None
        alloc.busy = True
        slots = {element: alloc.members[element] for element in endings}
        paths = self.host.ctx.paths
        destinations = {slot: paths.workspace(element) for element, slot in slots.items()}
        where, log_prefix = alloc.work, alloc.log_prefix
        # Where each element's live copies end: the copy-back brings the bytes there to check.
        checked: dict[str, tuple[int, int]] = {}
        for element in slots:
            out, err = self._local_logs(element)
            checked[element] = (read_start(len(out or b"")), read_start(len(err or b"")))
        checks = {slot: checked[element] for element, slot in slots.items()}

        def work() -> dict[str, SlotCopy | Exception]:
            try:
                archive = remote.collect(
                    where, log_prefix, sorted(destinations), MAX_SLOT_LOG_BYTES, checks
                )
            except (VqError, OSError, ObservationError) as exc:
                return dict.fromkeys(slots, exc)
            restored = restore_slots(archive, destinations)
            copied: dict[str, SlotCopy | Exception] = {}
            for element, slot in slots.items():
                copy = restored[slot]
                ran = endings[element].state is None
                if isinstance(copy, SlotCopy) and copy.stdout is None and ran:
                    # The slot ran (its marker decided) so its step made the log: not
                    # visible yet is a copy to retry, never an element without output.
                    copy = ObservationError(f"slot {slot}'s log is not there yet")
                copied[element] = copy
            return copied

        self.host.run_on_worker(
            work, lambda result: self._collected(alloc, endings, walls, checked, result)
        )

    def _collected(
        self,
        alloc: PackedAllocation,
        endings: dict[str, ElementEnding],
        walls: Mapping[str, str],
        checked: Mapping[str, tuple[int, int]],
        result: object,
    ) -> None:
        alloc.busy = False
        copied: Mapping[str, object] = result if isinstance(result, dict) else {}
        delays = self.host.settings.copy_back_delays
        for element, ending in endings.items():
            data = copied.get(element, result)
            if isinstance(data, BaseException):
                tries = alloc.copy_tries.get(element, 0)
                if tries < len(delays):
                    alloc.copy_tries[element] = tries + 1
                    alloc.due = self.host.monotonic() + delays[tries]
                    continue  # observed again, and copied again, after the delay
                log.warning("lane %s: copy-back of %s failed: %s", self.host.name, element, data)
                self._finish(alloc, element, ending, walls.get(element), artifacts=False)
                continue
            if isinstance(data, SlotCopy):
                self._write_logs(element, data, checked[element])
            self._finish(alloc, element, ending, walls.get(element), artifacts=True)

    def _local_logs(self, element: str) -> tuple[bytes | None, bytes | None]:
        """The element's local ``stdout.log`` and ``stderr.log`` as mirrored live (b"": no
        file; None: unreadable or beyond what the live mirror writes, never a prefix)."""
        try:
            spec = self.host.ctx.store.read(element)
        except (VqError, OSError):
            return None, None
        workspace = self.host.ctx.paths.workspace(element)
        tree = self.host.ctx.paths.tree_of(element)
        found: list[bytes | None] = []
        for name in (spec.stdout_path, spec.stderr_path):
            try:
                found.append(read_regular_beneath(tree, workspace / name, MAX_SLOT_LOG_BYTES))
            except FileNotFoundError:
                found.append(b"")
            except (VqError, OSError):
                found.append(None)
        return found[0], found[1]

    def _write_logs(self, element: str, copy: SlotCopy, checked: tuple[int, int]) -> None:
        """The element's ``stdout.log`` and ``stderr.log`` (a missing slot log: none): the
        live copy continued by the copied tail (:func:`~.packed_copy.settled_log`; the
        copy's check bytes were read from ``checked``, per log)."""
        try:
            spec = self.host.ctx.store.read(element)
            workspace = self.host.ctx.paths.workspace(element)
            tree = self.host.ctx.paths.tree_of(element)
            locals_ = self._local_logs(element)
            for name, copied, local, checked_from in (
                (spec.stdout_path, copy.stdout, locals_[0], checked[0]),
                (spec.stderr_path, copy.stderr, locals_[1], checked[1]),
            ):
                if copied is None:
                    continue
                data = settled_log(local or b"", copied, checked_from)
                atomic_write_beneath(
                    tree, workspace / name, data, mode=0o600, durable=False, parents=True
                )
        except (VqError, OSError) as exc:
            log.warning("lane %s: logs of %s not written: %s", self.host.name, element, exc)

    def _finish(
        self,
        alloc: PackedAllocation,
        element: str,
        ending: ElementEnding,
        wall: str | None,
        *,
        artifacts: bool,
    ) -> None:
        state = "ended" if artifacts else "artifacts_unavailable"
        settled: dict[str, object] = {"scheduler_state": state, "scheduler_queued_reason": None}
        if wall is not None:  # the usage report charges this, not the queue wait (§6.3)
            settled["scheduler_walltime_used"] = wall
        # Settled first: a restart between the two writes re-reads the same ending.
        self.packs.record(element, settled)
        lifecycle = self.host.lifecycle
        if ending.state is None:
            lifecycle.finish_attempt(element, ending.exit_code)
        else:
            lifecycle.scheduler_verdict(
                element, ending.state, ending.reason or "", ending.exit_code
            )
        alloc.members.pop(element, None)
        alloc.kills.discard(element)
        lifecycle.ended(element)
        if not alloc.members:
            self.packs.forget(alloc)

    # --- kill -------------------------------------------------------------------------------------
    def request_kill(self, job_id: str) -> None:
        """On the loop: the element is KILLED already; stop its slot (module doc)."""
        for alloc in self.packs.by_id.values():
            if job_id in alloc.members:
                alloc.kills.add(job_id)
                alloc.due = min(alloc.due, self.host.monotonic())

    def _kill_wanted(
        self, alloc: PackedAllocation, evidence: AttemptEvidence, endings: Mapping[str, object]
    ) -> None:
        remote, job = self.packs.remote, alloc.job_id
        if not alloc.kills or remote is None or job is None:
            return
        slot_state = {alloc.keys[t.slot]: t.state for t in evidence.tasks}
        others = [e for e in alloc.members if e not in alloc.kills and e not in endings]
        sends: list[tuple[str, int | None]] = []
        for element in sorted(alloc.kills):
            if element in endings:
                continue
            action = kill_action(
                receipt=True,
                allocation=evidence.state,
                others_settled=not others,
                step_running=True,  # cancel_slot finds out: "not_running" is retried
                marker_written=slot_state.get(element) in TERMINAL,
            )
            if action == "cancel_allocation":
                sends = [(job, None)]
                break
            if action in ("cancel_step", "retry_step"):
                sends.append((job, alloc.members[element]))
        if not sends:
            return

        def work() -> None:
            for scheduler_job, slot in sends:
                if slot is None:
                    remote.cancel(scheduler_job)
                else:
                    remote.cancel_slot(scheduler_job, alloc.allocation_id, slot)

        self.host.run_on_worker(work, self._cancel_sent)

    def _cancel_sent(self, result: object) -> None:
        if isinstance(result, TransportError):
            self.host.host_failed(result)
        elif isinstance(result, BaseException):
            log.warning("lane %s: cancel failed (%s); retried", self.host.name, result)
