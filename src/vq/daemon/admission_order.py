"""The admission order of the pending local jobs, kept between dispatch passes.

The dispatcher (:mod:`vq.daemon.dispatch`) asks :class:`AdmissionOrder` for the jobs a
pass may start, in admission order (:func:`vq.domain.admission.order_key`), with the
dependency gates (:mod:`vq.domain.dependencies`) and array groups that hold some of them
back. Keeping these between passes, and placing only the jobs that entered the pending
set since the last one, makes a submit cost about one insertion, not a sort of every
pending job, even against a queue of 100,000 specs. What a job may do once it is a
candidate (quotas, group limits, programs, the claim and the launch) is the dispatcher's.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime

from vq.domain.admission import Request, order_key
from vq.domain.dependencies import evaluate
from vq.domain.spec import JobSpec
from vq.domain.states import JobState
from vq.services.query import request_of

from .index import JobIndex

__all__ = ["AdmissionOrder", "HeldView"]


@dataclass(frozen=True)
class HeldView:
    """What an :class:`AdmissionOrder` holds of the jobs that are pending now (stale
    entries, which readers skip, left out): equal for an order kept incrementally and
    one rebuilt over the same index."""

    order: list[Request]  #: the due jobs, in admission order
    later: list[tuple[datetime, str, Request]]  #: the jobs not due yet, by due time
    gated: dict[str, JobSpec]  #: jobs with predecessors -> their spec
    dependents: dict[str, set[str]]  #: predecessor -> its gated dependents
    groups: dict[str, tuple[str, int]]  #: array element -> (group, max parallel)
    blocked: set[str]  #: gated jobs whose gate held them at the last evaluation


class AdmissionOrder:
    """The pending local jobs in admission order, with their gates and array groups.

    What it holds: the due jobs as a sorted list of their :class:`Request`; the jobs
    whose ``not_before`` lies ahead in a heap, moved into the list once due; which
    request each held job is placed as; the gated jobs (those with ``depends_on`` or
    ``depends_on_any``) with their predecessors' reverse edges and which of them a gate
    holds back (:meth:`admissible` skips them); the array elements' ``--max-parallel``
    groups (:meth:`array_groups`); and the pending specs ``select_local`` did not take (a parked
    lane's, or one whose failure did not land).

    Kept in step with the index: :meth:`candidates` compares the index's
    ``pending_generation`` with the one it reflects and places on its own each job that
    entered the pending set, or whose pending entry was replaced, since then (from
    :meth:`JobIndex.pending_since`), each replacing what was held of it, and also again
    the pending specs ``select_local`` did not take last time. It rebuilds everything
    from :meth:`JobIndex.pending` only when that log no longer reaches back: the first
    pass, an index load, a burst longer than the log. After a rebuild the next
    :meth:`apply_gates` evaluates every gate; otherwise only those of the gated jobs
    placed since and of the dependents of jobs whose state changed since
    (:meth:`JobIndex.take_state_changes`). A job that leaves the pending set (claimed,
    killed, failed) stays held until a sweep drops it, once held entries outnumber twice
    the pending set; every reader skips it meanwhile (:meth:`JobIndex.is_pending`). So
    callers tell the order nothing when a job is submitted, claimed, requeued or ends:
    every change reaches it through the index, its only input. The live part of what it
    holds (:meth:`held`) is always what a rebuild would give.

    ``select_local`` picks from a snapshot of pending specs the ones this dispatcher
    runs (it may fail the others, as the dispatcher does for an unknown lane); ``fail``
    fails a PENDING job whose dependency can never be met (a cascade), through the
    lifecycle writer so that the index records the change. Both run on the caller's
    thread, during :meth:`candidates` and :meth:`apply_gates`. The order is the one
    consumer of :meth:`JobIndex.take_state_changes`.
    """

    def __init__(
        self,
        index: JobIndex,
        select_local: Callable[[list[JobSpec]], list[JobSpec]],
        fail: Callable[[str, str], None],
    ) -> None:
        self._index = index
        self._select_local = select_local
        self._fail = fail
        self._order: list[Request] = []  # due, in admission order (may hold stale ones)
        #: not due yet: a heap; an entry whose request is no longer placed has lapsed
        self._later: list[tuple[datetime, str, int, Request]] = []
        self._serial = itertools.count()  # heap tie-break: requests are not ordered
        self._placed: dict[str, Request] = {}  # job -> its request in _order or _later
        self._unplaced: set[str] = set()  # pending, but no executor took them
        self._order_generation = -1  # the index's pending_generation _order reflects
        self._gated: dict[str, JobSpec] = {}  # pending specs with predecessors
        self._groups: dict[str, tuple[str, int]] = {}  # job -> (array group, max parallel)
        self._dependents: dict[str, set[str]] = {}  # predecessor -> gated dependents
        self._blocked: set[str] = set()  # gated jobs a gate held at its last evaluation
        self._gates_fresh = False  # False: every gated job must be (re)evaluated
        self._gates_stale: set[str] = set()  # gated jobs to evaluate (placed since)
        #: how many times :meth:`candidates` rebuilt the order, and placed entries on
        #: their own (for tests and diagnostics)
        self.rebuilds = 0
        self.incremental_updates = 0

    # --- what a pass reads --------------------------------------------------------------
    def candidates(self, now: datetime) -> list[Request]:
        """Pending local jobs that are due, in admission order (stale entries included:
        :meth:`admissible` skips them).

        Kept incrementally: a job that entered the pending set (or whose pending entry was
        replaced) since the last pass is placed on its own (:meth:`_enter`), from the
        index's log of them; the whole order is rebuilt from the pending set only when that
        log no longer reaches back (:meth:`_rebuild`: the first pass, a load, a burst
        longer than the log). A job whose ``not_before`` lies ahead waits in a heap and is
        inserted in order once due, and jobs that left the pending set are dropped in one
        sweep once they are half of what is held (readers skip them meanwhile). So a submit
        costs about one insertion, and an idle pass over 10,000 jobs deferred to tomorrow
        a heap peek. The live part of the result (the jobs still pending) is always what a
        rebuild would give.
        """
        if self._index.pending_generation != self._order_generation:
            entered = None
            if self._order_generation >= 0:
                entered = self._index.pending_since(self._order_generation)
            if entered is None:
                self._rebuild(now)
            else:
                self._order_generation += len(entered)
                self._enter(entered, now)
        while self._later and self._later[0][0] <= now:
            request = heapq.heappop(self._later)[-1]
            if self._placed.get(request.job_id) is not request:
                continue  # replaced or dropped since it was pushed
            if self._index.is_pending(request.job_id):
                bisect.insort(self._order, request, key=order_key)
            else:
                del self._placed[request.job_id]
        if len(self._order) + len(self._later) > 2 * self._index.pending_count() + 64:
            self._sweep()
        return self._order

    def admissible(self, candidates: list[Request]) -> Iterator[Request]:
        """The requests of ``candidates`` still pending and not held by a gate, lazily
        (in order: a pass consumes them only until its free slots are taken)."""
        return (
            r
            for r in candidates
            if self._index.is_pending(r.job_id) and r.job_id not in self._blocked
        )

    def array_groups(self) -> Mapping[str, tuple[str, int]]:
        """Placed array elements with a ``--max-parallel``: job -> (group, limit). May
        hold jobs that left the pending set; read it, never keep it across a pass."""
        return self._groups

    def held(self) -> HeldView:
        """What is held of the jobs pending now (costs the whole order: for tests and
        diagnostics, never a pass)."""
        live = self._index.is_pending
        return HeldView(
            order=[r for r in self._order if live(r.job_id)],
            later=sorted(
                (e[0], e[1], e[3])
                for e in self._later
                if live(e[1]) and self._placed.get(e[1]) is e[3]
            ),
            gated={k: s for k, s in self._gated.items() if live(k)},
            dependents={
                p: kept
                for p, ds in self._dependents.items()
                if (kept := {d for d in ds if live(d)})
            },
            groups={k: g for k, g in self._groups.items() if live(k)},
            blocked={k for k in self._blocked if live(k)},
        )

    # --- the gates ----------------------------------------------------------------------
    def apply_gates(self) -> None:
        """Re-evaluate the dependency gates that can have changed; cascade failures.

        Only the gated jobs placed since the last pass and the dependents of jobs whose
        state changed since then are checked (all gated jobs after a rebuild), so the work
        follows the graph's edges, not its size squared. Runs to a fixed point so a
        failure propagates through a whole chain at once.
        """
        changes = self._index.take_state_changes()
        if not self._gates_fresh:
            self._gates_fresh = True
            to_check = set(self._gated)
        else:
            to_check = set(self._gates_stale)  # gated jobs placed since the last pass
            for job_id in changes:
                to_check |= self._dependents.get(job_id, set())
        self._gates_stale.clear()
        while to_check:
            for job_id in to_check:
                spec = self._gated.get(job_id)
                if spec is None or not self._index.is_pending(job_id):
                    self._gated.pop(job_id, None)
                    self._blocked.discard(job_id)
                    continue
                gate = evaluate(spec.depends_on, spec.depends_on_any, self._index.dependency_state)
                if gate.cascade:
                    del self._gated[job_id]
                    self._blocked.discard(job_id)
                    self._fail(job_id, gate.reason or "a dependency failed")
                elif gate.ready:
                    self._blocked.discard(job_id)
                else:
                    self._blocked.add(job_id)
            to_check = set()
            for job_id in self._index.take_state_changes():  # cascades just written
                to_check |= self._dependents.get(job_id, set())

    # --- keeping in step with the index -------------------------------------------------
    def _rebuild(self, now: datetime) -> None:
        """The admission order and the gate, group and placement maps, from every pending
        spec; every gate is evaluated again on the next pass."""
        self.rebuilds += 1
        self._order_generation = self._index.pending_generation  # before the snapshot
        pending = self._local(self._index.pending())
        requests = [request_of(s) for s in pending]
        self._order = sorted(
            (r for r in requests if r.not_before is None or r.not_before <= now),
            key=order_key,
        )
        self._later = [
            (r.not_before, r.job_id, next(self._serial), r)
            for r in requests
            if r.not_before is not None and r.not_before > now
        ]
        heapq.heapify(self._later)
        self._placed = {r.job_id: r for r in requests}
        self._gated, self._dependents, self._groups = {}, {}, {}
        for spec in pending:
            self._track(spec)
        self._blocked.intersection_update(self._gated)
        self._gates_stale.clear()
        self._gates_fresh = False

    def _enter(self, entered: list[str], now: datetime) -> None:
        """Place the jobs in ``entered`` as :meth:`_rebuild` would (each replacing what
        was held of it), and the pending specs no executor took last time (a parked
        lane's, or one whose failure did not land), which a rebuild would look at again."""
        self.incremental_updates += 1
        ids = dict.fromkeys([*entered, *self._unplaced])
        for job_id in ids:
            self._unplace(job_id)
        pending = self._local(
            [s for job_id in ids if (s := self._pending_spec(job_id)) is not None]
        )
        for spec in pending:
            request = request_of(spec)
            self._placed[spec.id] = request
            if request.not_before is None or request.not_before <= now:
                bisect.insort(self._order, request, key=order_key)
            else:
                entry = (request.not_before, spec.id, next(self._serial), request)
                heapq.heappush(self._later, entry)
            if self._track(spec):
                self._gates_stale.add(spec.id)

    def _track(self, spec: JobSpec) -> bool:
        """Hold a placed pending job's dependency gate and array group; whether it is
        gated."""
        if spec.array_group_id and spec.array_max_parallel:
            self._groups[spec.id] = (spec.array_group_id, spec.array_max_parallel)
        if not (spec.depends_on or spec.depends_on_any):
            return False
        self._gated[spec.id] = spec
        for predecessor in (*spec.depends_on, *spec.depends_on_any):
            self._dependents.setdefault(predecessor, set()).add(spec.id)
        return True

    def _local(self, snapshot: list[JobSpec]) -> list[JobSpec]:
        """The specs of ``snapshot`` this dispatcher runs (``select_local``); the others
        are remembered as unplaced, to be looked at again by :meth:`_enter`."""
        pending = self._select_local(snapshot)
        local = {s.id for s in pending}
        self._unplaced = {s.id for s in snapshot if s.id not in local}
        return pending

    def _pending_spec(self, job_id: str) -> JobSpec | None:
        spec = self._index.get(job_id) if self._index.is_pending(job_id) else None
        return spec if spec is not None and spec.state is JobState.PENDING else None

    def _unplace(self, job_id: str) -> None:
        """Drop everything held of ``job_id`` (a heap entry lapses: it is not placed)."""
        held = self._placed.pop(job_id, None)
        if held is not None:
            at = bisect.bisect_left(self._order, order_key(held), key=order_key)
            if at < len(self._order) and self._order[at] is held:
                del self._order[at]
        spec = self._gated.pop(job_id, None)
        if spec is not None:
            for predecessor in (*spec.depends_on, *spec.depends_on_any):
                dependents = self._dependents.get(predecessor)
                if dependents is not None:
                    dependents.discard(job_id)
                    if not dependents:
                        del self._dependents[predecessor]
        self._groups.pop(job_id, None)
        self._blocked.discard(job_id)
        self._gates_stale.discard(job_id)

    def _sweep(self) -> None:
        """Drop what is held of jobs that left the pending set (once they are half)."""
        pending = self._index.is_pending
        self._placed = {k: r for k, r in self._placed.items() if pending(k)}
        self._order = [r for r in self._order if self._placed.get(r.job_id) is r]
        self._later = [e for e in self._later if self._placed.get(e[1]) is e[-1]]
        heapq.heapify(self._later)
        self._gated = {k: s for k, s in self._gated.items() if pending(k)}
        self._dependents = {
            p: kept for p, ds in self._dependents.items() if (kept := {d for d in ds if pending(d)})
        }
        self._groups = {k: g for k, g in self._groups.items() if pending(k)}
        self._blocked = {k for k in self._blocked if pending(k)}
        self._gates_stale = {k for k in self._gates_stale if pending(k)}
