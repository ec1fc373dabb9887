"""Packed arrays on a Slurm lane: the elements of a ``vq submit LANE --array … --pack P``
array share allocations of ``srun`` steps (one slot per element). Owned by
:class:`~.lane.SchedulerLane` (seen as a :class:`~.packed_ports.PackHost`); every method
runs on the daemon loop, every cluster call on the lane's worker.

:class:`PackedLane` composes its parts, each in its own module around one shared state
(:class:`~.packed_state.PackedAllocations`): submission (:mod:`.packed_submit`, steps 1–3),
observation, completion and kill (:mod:`.packed_observe`, steps 4–5) and recovery
(:mod:`.packed_recovery`, step 6).

One allocation's path:

1. **claim** the batch :func:`~vq.packing.lane_batch.next_batch` picks from the pending
   elements of one array (PENDING → RUNNING), recording each element's
   ``scheduler_pack_id``/``scheduler_pack_slot`` (``scheduler_state = "claimed"``);
2. **intent**: ``lane-packs/<lane>/<alloc>.json`` (:mod:`vq.packing.lane_intent`) written
   and synced, then every element ``submitting`` durably;
3. **submit** ``sbatch --parsable`` once; the receipt is recorded on every element
   (``queued``). A refusal fails the elements; an ambiguous answer is never resubmitted
   blindly: the allocation is looked up by its identity
   (:func:`~vq.packing.lane_intent.decide`);
4. **observe** per ``poll_interval``, in rounds over the lane's due allocations: one
   ``squeue``, one ``sacct`` (read by :mod:`vq.dialects.slurm_alloc`) and one read of
   the slot markers per round (:mod:`vq.packing.slurm_rounds`); each element ends as
   soon as its own slot has (:func:`~vq.packing.lane_batch.element_ending`): the slots
   that ended in a round are copied back in one call (:mod:`.packed_copy`: each slot's
   directory into its element's workspace, its logs as ``stdout.log`` and
   ``stderr.log``), then each outcome is written (retries apply: a retried element
   joins a later allocation under a new identity);
5. **kill** (:func:`~vq.packing.lane_control.kill_action`): ``scancel JOBID.STEP`` for the
   element's slot, ``scancel JOBID`` once nothing in the allocation is wanted;
6. **restart** (:func:`~vq.packing.lane_control.recovery_step`): observe, look up by
   identity, requeue what was claimed but never sent, or ``reattach_failed``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from vq.domain.spec import JobSpec
from vq.packing.profiles import PackingProfile
from vq.protocol.answers import SchedulerResolveAnswer

from .packed_observe import PackedObservation
from .packed_ports import PackHost
from .packed_recovery import PackedRecovery
from .packed_state import PackedAllocation, PackedAllocations
from .packed_submit import PackedSubmission
from .ports import PackRemotePort

__all__ = ["PackedLane"]


class PackedLane:
    """The packed arrays of one scheduler lane (see the module docstring)."""

    def __init__(
        self,
        host: PackHost,
        profiles: Callable[[], Mapping[str, PackingProfile]],
        remote: PackRemotePort | None,
    ) -> None:
        self.packs = PackedAllocations(host, profiles, remote)
        self.submission = PackedSubmission(self.packs)
        self.observation = PackedObservation(self.packs)
        self.recovery = PackedRecovery(self.packs)

    @property
    def allocations(self) -> dict[str, PackedAllocation]:
        """Every allocation holding capacity, by allocation id."""
        return self.packs.by_id

    # --- capacity and the loop's entry points ----------------------------------------------
    @property
    def held(self) -> int:
        """Elements holding lane capacity."""
        return self.packs.held

    def holds(self, job_id: str) -> bool:
        return self.packs.holds(job_id)

    def next_due(self) -> list[float]:
        """When an allocation has a step to run (one in doubt waits for an operator)."""
        return [
            a.due
            for a in self.packs.by_id.values()
            if not a.busy
            and a.phase in ("submitting", "submit_retry", "looking_up", "queued", "running")
        ]

    def advance(self, now: float) -> None:
        """Run every allocation's due step; the due observations go in shared rounds."""
        due: list[PackedAllocation] = []
        for alloc in list(self.packs.by_id.values()):
            if alloc.busy or alloc.due > now:
                continue
            if alloc.phase == "submitting":
                self.submission.submit(alloc)
            elif alloc.phase == "looking_up":
                self.submission.look_up(alloc)
            elif alloc.phase == "submit_retry":
                self.submission.resubmit(alloc, supersede=alloc.supersede)
            elif alloc.phase in ("queued", "running") and alloc.job_id is not None:
                due.append(alloc)
        if due:
            self.observation.poll_due(due, now)

    def dispatch(self, specs: list[JobSpec], free: int) -> int:
        """Pack the due PENDING elements of ``specs`` into new allocations, at most
        ``free`` elements; returns how many were taken."""
        return self.submission.dispatch(specs, free)

    def request_kill(self, job_id: str) -> None:
        """The element is KILLED already; stop its slot (:mod:`.packed_observe`)."""
        self.observation.request_kill(job_id)

    # --- restart and an operator's decision -------------------------------------------------
    def recover(self, specs: list[JobSpec]) -> None:
        """Rebuild the allocations of this lane's packed elements (once, at the start)."""
        self.recovery.recover(specs)

    def resolve(self, job_id: str, scheduler_job_id: str | None) -> SchedulerResolveAnswer:
        """Settle the allocation in doubt of the element ``job_id`` (see
        :meth:`.packed_recovery.PackedRecovery.resolve`)."""
        return self.recovery.resolve(job_id, scheduler_job_id)
