"""The packed allocations of one lane and the writes every part of them shares (on the
daemon loop).

:class:`PackedAllocation` is one allocation holding lane capacity for its unfinished
elements; :class:`PackedAllocations` holds them all with what every part of
:class:`~.packed.PackedLane` needs of them: the owning lane (:class:`~.packed_ports.PackHost`),
the packing profiles, the login host's bounded Slurm commands, and the bookkeeping writes
through the one lifecycle writer (record a field, adopt a receipt, mark an allocation in
doubt, fail or forget one). It runs no cluster command itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from vq import _fault_points
from vq.dialects.submit_guard import records_dir
from vq.errors import VqError
from vq.packing.lane_intent import PackIntent
from vq.packing.profiles import PackingProfile

from .packed_ports import PackHost
from .ports import PackRemotePort

__all__ = ["PackedAllocation", "PackedAllocations"]

log = logging.getLogger(__name__)


@dataclass
class PackedAllocation:
    """One allocation holding lane capacity for its unfinished elements (loop-owned)."""

    allocation_id: str
    #: None only for an allocation in doubt whose profile or intent is gone: it holds
    #: capacity (``reattach_failed``) and never reaches the cluster
    profile: PackingProfile | None
    intent: PackIntent | None
    script: bytes | None
    members: dict[str, int]  # element job id -> slot, while it holds capacity
    job_id: str | None = None  # the receipt
    phase: str = "submitting"  # submitting, looking_up, queued, running, reattach_failed
    busy: bool = False
    due: float = 0.0
    absent_looks: int = 0
    #: The submit guard's token of a call in doubt (the scheduler decides), of a call
    #: proved never submitted (the next call supersedes it), and how many submits could
    #: not reach the controller so far (the retry backoff).
    in_doubt: str | None = None
    supersede: str | None = None
    unreached: int = 0
    kills: set[str] = field(default_factory=set)
    copy_tries: dict[str, int] = field(default_factory=dict)
    #: When the allocation was first observed running (its elements' cluster start,
    #: within one poll interval); None while it waits
    started_at: datetime | None = None

    @property
    def known(self) -> tuple[PackingProfile, PackIntent]:
        """The profile and intent of an allocation that reaches the cluster."""
        if self.profile is None or self.intent is None:
            raise RuntimeError(f"allocation {self.allocation_id} has no profile or intent")
        return self.profile, self.intent

    @property
    def keys(self) -> list[str]:
        return [job for job, _ in self.known[1].members]

    @property
    def work(self) -> str:
        return f"{self.known[0].target.work_root}/{self.allocation_id}"

    @property
    def log_prefix(self) -> str:
        """What every slot's log name starts with: ``<log_root>/<alloc>-<job>-`` (then
        ``<slot>.out``, its stdout, and ``<slot>.err``, its stderr)."""
        log_root = self.known[0].target.log_root
        return f"{log_root}/{self.allocation_id}-{self.job_id}-"


class PackedAllocations:
    """Every packed allocation of one lane, by allocation id, and their shared writes."""

    def __init__(
        self,
        host: PackHost,
        profiles: Callable[[], Mapping[str, PackingProfile]],
        remote: PackRemotePort | None,
    ) -> None:
        self.host = host
        self._profiles = profiles
        #: the login host's bounded Slurm commands (None: the lane cannot pack)
        self.remote = remote
        self.by_id: dict[str, PackedAllocation] = {}

    @property
    def profiles(self) -> Mapping[str, PackingProfile]:
        """The packing profiles as configured now (``vq daemon reload`` changes them): a
        new allocation is built on them; one already built keeps its own profile."""
        return self._profiles()

    # --- capacity -----------------------------------------------------------------------------
    @property
    def held(self) -> int:
        """Elements holding lane capacity."""
        return sum(len(a.members) for a in self.by_id.values())

    def holds(self, job_id: str) -> bool:
        return any(job_id in a.members for a in self.by_id.values())

    def of_element(self, job_id: str) -> PackedAllocation:
        """The allocation holding element ``job_id`` (it must hold it)."""
        return next(a for a in self.by_id.values() if job_id in a.members)

    def running_in_group(self, group: str) -> int:
        """Elements of array ``group`` holding capacity (``--max-parallel``)."""
        return sum(
            len(a.members)
            for a in self.by_id.values()
            if a.intent is not None and a.intent.group == group
        )

    # --- where an allocation's records are -----------------------------------------------------
    def intent_path(self, allocation_id: str) -> Path:
        return self.host.ctx.paths.lane_pack_intent(self.host.name, allocation_id)

    def records_of(self, alloc: PackedAllocation) -> str:
        """The submit guard's records directory of this allocation (its identity names
        one attempt of each element: a retry is another allocation)."""
        return records_dir(self.host.settings.scratch_root, f"vqp-{alloc.allocation_id}")

    # --- the shared writes ---------------------------------------------------------------------
    def record(
        self, job_id: str, fields: dict[str, Any], *, durable: bool = True, event: Any = None
    ) -> None:
        """Write scheduler fields of element ``job_id`` (a refused write is logged)."""
        try:
            self.host.lifecycle.record_scheduler(job_id, fields, durable=durable, event=event)
        except VqError as exc:
            log.warning("lane %s: job %s not updated: %s", self.host.name, job_id, exc.message)

    def forget(self, alloc: PackedAllocation) -> None:
        """``alloc`` holds nothing any more; its intent goes once no element needs it."""
        self.by_id.pop(alloc.allocation_id, None)
        if not alloc.members:
            self.intent_path(alloc.allocation_id).unlink(missing_ok=True)

    def adopt(
        self, alloc: PackedAllocation, job_id: str, *, elements: Iterable[str] | None = None
    ) -> None:
        """Observe ``alloc`` as Slurm job ``job_id`` from now on, recording it as the
        receipt of ``elements`` (default: every member)."""
        alloc.job_id, alloc.phase, alloc.absent_looks = job_id, "queued", 0
        for position, element in enumerate(alloc.members if elements is None else elements):
            if position == 1:
                _fault_points.crash_point("packed_during_receipt")
            self.record(
                element,
                {"scheduler_job_id": job_id, "scheduler_state": "queued"},
                event="dispatched",
            )
        alloc.due = self.host.monotonic()

    def mark_reattach_failed(self, alloc: PackedAllocation, why: str) -> None:
        """``alloc`` is in doubt: its elements keep their capacity for an operator."""
        alloc.phase = "reattach_failed"
        for element in alloc.members:
            self.record(element, {"scheduler_state": "reattach_failed"})
        log.error(
            "lane %s: allocation %s (vqp-%s) is in doubt: %s; its elements keep their "
            "capacity until an operator decides",
            self.host.name,
            alloc.allocation_id,
            alloc.allocation_id,
            why,
        )

    def fail_all(self, alloc: PackedAllocation, reason: str) -> None:
        """Nothing of ``alloc`` reached the cluster: every element fails its dispatch."""
        for element in list(alloc.members):
            self.record(element, {"scheduler_state": "not_submitted"})
            self.host.lifecycle.fail_dispatch(element, reason)
        self.forget(alloc)
