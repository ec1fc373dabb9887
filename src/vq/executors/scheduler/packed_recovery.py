"""Packed allocations in doubt: their restart and an operator's decision (a part of
:class:`~.packed.PackedLane`, on the daemon loop; it sends no cluster command itself: an
allocation it rebuilds is observed or looked up by the other parts).

**Restart** (once per lane): each allocation is rebuilt from its elements' specs and its intent
(:func:`~vq.packing.lane_control.recovery_step`): observed when every element holds its
receipt, looked up by its identity when the intent names exactly these elements and
attempts, requeued when claimed without an intent (nothing was sent), else
``reattach_failed`` for an operator.

**Decision** (``vq scheduler resolve ELEMENT``, :meth:`PackedRecovery.resolve`): settles the whole
allocation of the element: ``--job-id N`` adopts Slurm job N as its receipt (it needs the
intent and the profile, to observe it); ``--not-submitted`` returns its unfinished
elements to PENDING, to be packed again (a killed one is settled), and removes the intent.
"""

from __future__ import annotations

import logging
import re

from vq._fs import read_regular
from vq.domain.spec import JobSpec
from vq.domain.states import ACTIVE
from vq.errors import Conflict, InvalidInput
from vq.packing.lane_control import Member, recovery_step
from vq.packing.lane_intent import IntentUnreadable, PackIntent, decode_intent
from vq.protocol.answers import SchedulerResolveAnswer

from .packed_ports import PackHost
from .packed_state import PackedAllocation, PackedAllocations

__all__ = ["SETTLED", "PackedRecovery"]

log = logging.getLogger(__name__)

#: scheduler_state values of an element whose allocation has nothing more to do with it.
SETTLED = frozenset({"ended", "artifacts_unavailable", "not_submitted"})


class PackedRecovery:
    """Rebuild the allocations of ``packs`` at a restart; settle one in doubt."""

    def __init__(self, packs: PackedAllocations) -> None:
        self.packs = packs

    @property
    def host(self) -> PackHost:
        return self.packs.host

    def recover(self, specs: list[JobSpec]) -> None:
        """Rebuild the allocations of this lane's packed elements (on the loop, once)."""
        groups: dict[str, list[JobSpec]] = {}
        for spec in specs:
            if spec.state in ACTIVE and spec.scheduler_pack_id is None:
                self.host.lifecycle.requeue_unlaunched(spec.id, "claimed, never submitted")
            elif spec.scheduler_pack_id is not None and (
                spec.state in ACTIVE
                or (spec.scheduler_job_id and spec.scheduler_state not in SETTLED)
            ):
                groups.setdefault(spec.scheduler_pack_id, []).append(spec)
        for alloc_id, members in sorted(groups.items()):
            self._recover_one(alloc_id, members)

    def _recover_one(self, alloc_id: str, specs: list[JobSpec]) -> None:
        path = self.packs.intent_path(alloc_id)
        intent: PackIntent | None = None
        try:
            intent = decode_intent(read_regular(path, 1 << 20))
        except (OSError, IntentUnreadable):
            intent = None
        step = recovery_step(
            alloc_id,
            [
                Member(
                    s.id,
                    s.retry_count,
                    s.scheduler_pack_slot,
                    s.scheduler_state,
                    s.scheduler_job_id,
                )
                for s in specs
            ],
            intent,
            intent_exists=path.exists(),
        )
        if step.action == "redispatch":
            for spec in specs:
                if spec.state in ACTIVE:
                    self.host.lifecycle.requeue_unlaunched(spec.id, "claimed, never submitted")
            return
        profile = self.packs.profiles.get(specs[0].scheduler_pack or "")
        members = {s.id: s.scheduler_pack_slot or 0 for s in specs}
        if intent is None or profile is None or self.packs.remote is None:
            alloc = PackedAllocation(alloc_id, profile, intent, None, members)
            self.packs.by_id[alloc_id] = alloc
            self.packs.mark_reattach_failed(alloc, step.reason or "its packing profile is gone")
            return
        alloc = PackedAllocation(alloc_id, profile, intent, None, members)
        alloc.kills = {s.id for s in specs if s.state not in ACTIVE}
        starts = [s.scheduler_started_at for s in specs if s.scheduler_started_at is not None]
        alloc.started_at = min(starts) if starts else None
        self.packs.by_id[alloc_id] = alloc
        if step.action == "observe" and step.job_id is not None:
            alloc.job_id, alloc.phase = step.job_id, "queued"
        elif step.action == "complete_receipt" and step.job_id is not None:
            missing = [s.id for s in specs if s.scheduler_job_id is None and s.state in ACTIVE]
            log.warning(
                "lane %s: allocation %s: the receipt of job %s reached only some elements "
                "before a stop; recording it on %d more",
                self.host.name,
                alloc_id,
                step.job_id,
                len(missing),
            )
            self.packs.adopt(alloc, step.job_id, elements=missing)
        elif step.action == "look_up":
            alloc.phase = "looking_up"
        else:
            self.packs.mark_reattach_failed(alloc, step.reason)
        log.info("lane %s: allocation %s adopted (%s)", self.host.name, alloc_id, alloc.phase)

    def resolve(self, job_id: str, scheduler_job_id: str | None) -> SchedulerResolveAnswer:
        """Settle the allocation of the packed element ``job_id`` whose submission is in
        doubt (on the loop), for all its elements at once: ``scheduler_job_id`` is the
        allocation's Slurm job (adopted and observed); None means it never reached Slurm
        (its unfinished elements return to PENDING and are packed again)."""
        alloc = self.packs.of_element(job_id)
        if alloc.busy or alloc.phase not in ("reattach_failed", "looking_up"):
            raise Conflict(
                f"job {job_id}'s allocation {alloc.allocation_id} is not waiting for a "
                f"decision ({alloc.phase})",
                hint="only an element in scheduler_state reattach_failed (or one whose "
                "allocation is being looked up) can be resolved; `vq status ID` shows it",
            )
        answer: SchedulerResolveAnswer = {
            "id": job_id,
            "scheduler_job_id": scheduler_job_id,
            "lane": self.host.name,
            "scheduler_pack_id": alloc.allocation_id,
            "elements": sorted(alloc.members),
        }
        if scheduler_job_id is None:
            self._not_submitted(alloc)
            return answer
        if not re.fullmatch(r"[0-9]+", scheduler_job_id):
            raise InvalidInput(
                f"{scheduler_job_id!r} is not a Slurm job id",
                hint=f"give the number of job vqp-{alloc.allocation_id}, e.g. --job-id 1234",
            )
        if alloc.profile is None or alloc.intent is None or self.packs.remote is None:
            raise Conflict(
                f"allocation {alloc.allocation_id} cannot be observed: its packing profile "
                "or its intent is gone",
                hint="restore the profile in the configuration and restart the daemon; or "
                f"`scancel {scheduler_job_id}` on the cluster and resolve with --not-submitted",
            )
        log.info(
            "lane %s: allocation %s resolved by an operator as job %s",
            self.host.name,
            alloc.allocation_id,
            scheduler_job_id,
        )
        self.packs.adopt(alloc, scheduler_job_id)
        return answer

    def _not_submitted(self, alloc: PackedAllocation) -> None:
        """The allocation never reached Slurm: its elements leave it (PENDING again, or
        settled when already killed) and its intent is removed."""
        log.info(
            "lane %s: allocation %s resolved by an operator as never submitted",
            self.host.name,
            alloc.allocation_id,
        )
        for element in list(alloc.members):
            # settled first: a restart before the requeue never rebuilds this allocation
            self.packs.record(
                element, {"scheduler_state": "not_submitted", "scheduler_job_id": None}
            )
            self.host.lifecycle.requeue_unlaunched(element, "its allocation was never submitted")
            self.host.lifecycle.ended(element)  # a killed element: its bookkeeping ends here
            alloc.members.pop(element)
        self.packs.forget(alloc)
