"""Packed arrays on a Slurm lane: the elements of a ``vq submit LANE --array … --pack P``
array share allocations of ``srun`` steps (one slot per element). Owned by
:class:`~.lane.SchedulerLane`; every method runs on the daemon loop, every cluster call
on the lane's worker.

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
   ``squeue``, one ``sacct`` and one read of the slot markers per round
   (:mod:`vq.packing.slurm_rounds`); each element ends as soon as its own slot has
   (:func:`~vq.packing.lane_batch.element_ending`): the slots that ended in a round are
   copied back in one call (:mod:`.packed_copy`: each slot's directory into its element's
   workspace, its logs as ``stdout.log`` and ``stderr.log``), then each outcome is
   written (retries apply: a retried element joins a later allocation under a new
   identity);
5. **kill** (:func:`~vq.packing.lane_control.kill_action`): ``scancel JOBID.STEP`` for the
   element's slot, ``scancel JOBID`` once nothing in the allocation is wanted;
6. **restart** (:func:`~vq.packing.lane_control.recovery_step`): observe, look up by
   identity, requeue what was claimed but never sent, or ``reattach_failed``.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vq import _fault_points
from vq._fs import atomic_write_bytes
from vq.dialects.submit_guard import GuardState, records_dir
from vq.domain.dependencies import evaluate
from vq.domain.spec import JobSpec
from vq.errors import TransportError, VqError
from vq.packing.lane_batch import (
    STAGED_SCRIPT,
    Element,
    batch_script,
    element_task,
    next_batch,
)
from vq.packing.lane_intent import (
    decide,
    encode_intent,
    intent_of,
)
from vq.packing.planner import PlanRefused
from vq.packing.profiles import PackingProfile
from vq.packing.roster import RosterRefused
from vq.packing.script import sbatch_args
from vq.dialects.slurm_alloc import ObservationError, parse_parsable

from .jobs import SubmitVerdict, ambiguous, controller_unreached
from .outcome import unreached_retry
from .packed_observe import ObservingPacks, PackedAllocation
from .ports import PackRemotePort
from .remote import pack_archive

if TYPE_CHECKING:
    from .ports import PackHost as SchedulerLane

__all__ = ["PackedLane"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Unstaged:
    """The archive could not be built: nothing reached the cluster (definite)."""

    reason: str


def answer_verdict(state: GuardState) -> tuple[SubmitVerdict, str]:
    """What sbatch's own answer inside the guard's ``answer`` means, with the receipt's
    job id (``accepted``) or the words that decided (see
    :func:`.jobs.submit_verdict`; an exit status of 0 without a readable receipt is
    ambiguous)."""
    if state.rc == 0:
        try:
            return "accepted", parse_parsable(state.stdout).job_id
        except ObservationError as exc:
            return "ambiguous", str(exc)
    detail = state.stderr.strip()[-300:] or f"exit status {state.rc}"
    if controller_unreached(detail):
        return "unreached", detail
    return ("ambiguous" if ambiguous(detail) else "refused"), detail


class PackedLane(ObservingPacks):
    """The packed arrays of one scheduler lane (see the module docstring)."""

    def __init__(
        self,
        lane: SchedulerLane,
        profiles: Callable[[], Mapping[str, PackingProfile]],
        remote: PackRemotePort | None,
    ) -> None:
        self.lane = lane
        self._profiles = profiles
        self.remote = remote
        self.allocations: dict[str, PackedAllocation] = {}

    @property
    def profiles(self) -> Mapping[str, PackingProfile]:
        """The packing profiles as configured now (``vq daemon reload`` changes them): a
        new allocation is built on them; one already built keeps its own profile."""
        return self._profiles()

    # --- capacity and the loop's entry points ----------------------------------------------
    @property
    def held(self) -> int:
        """Elements holding lane capacity."""
        return sum(len(a.members) for a in self.allocations.values())

    def holds(self, job_id: str) -> bool:
        return any(job_id in a.members for a in self.allocations.values())

    def next_due(self) -> list[float]:
        """When an allocation has a step to run (one in doubt waits for an operator)."""
        return [
            a.due
            for a in self.allocations.values()
            if not a.busy
            and a.phase in ("submitting", "submit_retry", "looking_up", "queued", "running")
        ]

    def advance(self, now: float) -> None:
        """Run every allocation's due step; the due observations go in shared rounds."""
        due: list[PackedAllocation] = []
        for alloc in list(self.allocations.values()):
            if alloc.busy or alloc.due > now:
                continue
            if alloc.phase == "submitting":
                self._submit(alloc)
            elif alloc.phase == "looking_up":
                self._look_up(alloc)
            elif alloc.phase == "submit_retry":
                self._resubmit(alloc, supersede=alloc.supersede)
            elif alloc.phase in ("queued", "running") and alloc.job_id is not None:
                due.append(alloc)
        if due:
            self._poll_due(due, now)

    # --- dispatch ---------------------------------------------------------------------------
    def dispatch(self, specs: list[JobSpec], free: int) -> int:
        """Pack the due PENDING elements of ``specs`` into new allocations, at most
        ``free`` elements; returns how many were taken."""
        groups: dict[tuple[str, str], list[JobSpec]] = {}
        now = self.lane.ctx.now()
        for spec in specs:
            if spec.not_before is not None and spec.not_before > now:
                continue
            if spec.depends_on or spec.depends_on_any:
                gate = evaluate(spec.depends_on, spec.depends_on_any, self.lane.dependency_state)
                if gate.cascade:
                    self.lane.lifecycle.fail_pending(spec.id, gate.reason or "a dependency failed")
                if not gate.ready:
                    continue
            key = (spec.array_group_id or spec.id, spec.scheduler_pack or "")
            groups.setdefault(key, []).append(spec)
        taken = 0
        for (group, name), members in groups.items():  # in priority order
            if free - taken <= 0:
                break
            taken += self._dispatch_group(group, name, members, free - taken)
        return taken

    def _dispatch_group(self, group: str, name: str, specs: list[JobSpec], free: int) -> int:
        lifecycle = self.lane.lifecycle
        profile = self.profiles.get(name)
        if self.remote is None or profile is None or profile.target.host != self.lane.name:
            why = f"packing profile {name!r} no longer targets lane {self.lane.name}"
            for spec in specs:
                lifecycle.fail_pending(spec.id, why)
            return 0
        limit = specs[0].array_max_parallel
        if limit is not None:  # --max-parallel: the array's elements holding capacity count
            running = sum(
                len(a.members)
                for a in self.allocations.values()
                if a.intent is not None and a.intent.group == group
            )
            free = min(free, limit - running)
        try:
            batch = next_batch(
                self.lane.name, group, [Element.of(s) for s in specs], profile, free=free
            )
        except (RosterRefused, PlanRefused) as exc:
            for spec in specs:
                lifecycle.fail_pending(spec.id, f"the element cannot be packed: {exc}")
            return 0
        if batch is None:
            return 0
        alloc_id = batch.allocation_id
        work = f"{profile.target.work_root}/{alloc_id}"
        stale = {"scheduler_pack_id", "scheduler_pack_slot", "scheduler_job_id", "scheduler_state"}
        for spec in specs:
            if spec.id in {e.job_id for e in batch.elements} and any(
                getattr(spec, name) is not None for name in stale
            ):
                # a retry: the last attempt's allocation is not this one's (cleared while
                # PENDING, so a claim can never carry it into recovery)
                self._record(spec.id, dict.fromkeys(stale))
        claimed: list[str] = []
        for slot, element in enumerate(batch.elements):
            try:
                moved = lifecycle.claim(element.job_id, workdir=f"{work}/{slot}")
            except VqError as exc:
                log.warning("lane %s: cannot claim %s: %s", self.lane.name, element.job_id, exc)
                moved = None
            if moved is None or not moved.changed:
                for job_id in claimed:  # nothing was sent: back to PENDING
                    lifecycle.requeue_unlaunched(job_id, "its allocation changed before sbatch")
                return 0
            claimed.append(element.job_id)
            self._record(
                element.job_id,
                {
                    "scheduler_pack_id": alloc_id,
                    "scheduler_pack_slot": slot,
                    "scheduler_state": "claimed",
                    "scheduler_job_id": None,
                },
            )
        _fault_points.crash_point("packed_after_claim")
        sha = hashlib.sha256(batch.script).hexdigest()
        intent = intent_of(
            batch,
            lane=self.lane.name,
            group=group,
            profile=name,
            script_sha256=sha,
            now=self.lane.ctx.now(),
        )
        path = self.intent_path(alloc_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, encode_intent(intent), mode=0o600, durable=True)
        _fault_points.crash_point("packed_after_intent")
        for job_id in claimed:
            self._record(job_id, {"scheduler_state": "submitting"})
        members = {job_id: slot for slot, job_id in enumerate(claimed)}
        alloc = PackedAllocation(alloc_id, profile, intent, batch.script, members)
        self.allocations[alloc_id] = alloc
        self._submit(alloc)
        return len(claimed)

    def intent_path(self, allocation_id: str) -> Any:
        return self.lane.ctx.paths.lane_pack_intent(self.lane.name, allocation_id)

    # --- submit and look up -------------------------------------------------------------------
    def records_of(self, alloc: PackedAllocation) -> str:
        """The submit guard's records directory of this allocation (its identity names
        one attempt of each element: a retry is another allocation)."""
        return records_dir(self.lane.settings.scratch_root, f"vqp-{alloc.allocation_id}")

    def _submit(self, alloc: PackedAllocation, supersede: str | None = None) -> None:
        """Stage every slot's workspace and the script, then ``sbatch``, in one call under
        the allocation's submit guard (``sbatch`` runs at most once per allocation unless
        ``supersede`` names the exact call proved never submitted)."""
        remote, script = self.remote, alloc.script
        assert remote is not None and script is not None
        command = remote.stage_submit_command(
            alloc.known[0].target.log_root,
            alloc.work,
            self.records_of(alloc),
            secrets.token_hex(8),
            supersede,
        )
        workspaces = [self.lane.ctx.paths.workspace(job) for job in alloc.keys]
        alloc.busy, alloc.phase = True, "submitting"

        def work() -> GuardState | _Unstaged:
            try:
                archive = pack_archive(workspaces, script, STAGED_SCRIPT)
            except OSError as exc:
                return _Unstaged(f"the workspaces could not be read for staging: {exc}")
            return remote.submit_guarded(command, archive)

        self.lane.run_on_worker(work, lambda r: self._submitted(alloc, r))

    def _submitted(self, alloc: PackedAllocation, result: object) -> None:
        alloc.busy = False
        if isinstance(result, _Unstaged):  # nothing was sent
            self._fail_all(alloc, result.reason)
            return
        if isinstance(result, GuardState):
            self._answered(alloc, result)
            return
        if isinstance(result, TransportError):
            self.lane.host_failed(result)
        log.warning(
            "lane %s: submission of allocation %s is ambiguous (%s)",
            self.lane.name,
            alloc.allocation_id,
            result,
        )
        alloc.phase = "looking_up"
        alloc.due = self.lane.monotonic() + self.lane.settings.absent_recheck_seconds

    def _answered(self, alloc: PackedAllocation, state: GuardState) -> None:
        """What the submit guard said, from a submit call or a look-up's probe (on the
        loop): sbatch's own answer decides when there is one (adopt, refuse, or retry an
        unreachable controller); otherwise the allocation is looked up again."""
        recheck = self.lane.monotonic() + self.lane.settings.absent_recheck_seconds
        if state.kind == "answer":
            verdict, said = answer_verdict(state)
            if verdict == "accepted":
                _fault_points.crash_point("packed_after_sbatch")
                alloc.in_doubt = alloc.supersede = None
                self.adopt(alloc, said)
                return
            if verdict == "unreached":
                self._unreached(alloc, state.token, said)
                return
            if verdict == "refused":
                self._fail_all(alloc, f"the scheduler refused the allocation: {said}")
                return
            alloc.in_doubt = state.token
        elif state.kind == "stage_failed":
            detail = state.stderr.strip()[-300:] or "no reason given"
            self._fail_all(alloc, f"staging the workspaces on {self.lane.name} failed: {detail}")
            return
        elif state.kind == "no_lock":
            self._fail_all(
                alloc,
                f"the login host of lane {self.lane.name} cannot lock files below its "
                "scratch_root with flock(1), and vq submits only under that lock; nothing "
                "was submitted",
            )
            return
        elif state.kind == "busy":
            alloc.absent_looks = 0
        elif state.kind == "in_doubt":
            alloc.in_doubt = state.token
        log.warning(
            "lane %s: submission of allocation %s is %s; looking it up",
            self.lane.name,
            alloc.allocation_id,
            "still running on the login host" if state.kind == "busy" else "in doubt",
        )
        alloc.phase, alloc.due = "looking_up", recheck

    def _unreached(self, alloc: PackedAllocation, token: str | None, detail: str) -> None:
        """sbatch never reached the controller: nothing was submitted. The allocation is
        submitted again after a growing delay, superseding exactly that call."""
        alloc.supersede, alloc.unreached = token, alloc.unreached + 1
        delay, reason = unreached_retry(self.lane.settings, alloc.unreached, detail)
        alloc.phase, alloc.due = "submit_retry", self.lane.monotonic() + delay
        for element in alloc.members:
            self._record(
                element,
                {"scheduler_state": "submit_retry", "scheduler_queued_reason": reason},
                durable=False,
            )
        log.warning(
            "lane %s: allocation %s: %s; submitting again in %.0f s",
            self.lane.name,
            alloc.allocation_id,
            detail,
            delay,
        )

    def _look_up(self, alloc: PackedAllocation) -> None:
        remote = self.remote
        assert remote is not None
        alloc.busy = True
        since, records = alloc.known[1].window_start(), self.records_of(alloc)

        def work() -> tuple[GuardState, list[str] | None]:
            state = remote.submit_state(records)
            if state.kind in ("busy", "no_lock") or (
                state.kind == "answer" and answer_verdict(state)[0] != "ambiguous"
            ):
                return state, None  # the guard's answer decides
            return state, remote.allocation_jobs(alloc.allocation_id, since)

        self.lane.run_on_worker(work, lambda result: self._looked_up(alloc, result))

    def _looked_up(self, alloc: PackedAllocation, result: object) -> None:
        alloc.busy = False
        retry = self.lane.monotonic() + self.lane.settings.absent_recheck_seconds
        if not isinstance(result, tuple):
            if isinstance(result, TransportError):
                self.lane.host_failed(result)
            log.warning("lane %s: look-up of %s failed: %s", self.lane.name, alloc, result)
            alloc.due = retry  # not evidence either way
            return
        state, found = result
        if found is None:
            self._answered(alloc, state)
            return
        if state.kind == "none" and len(found) <= 1:
            # No call ever started sbatch under the guard (and none can without it). An
            # allocation an older daemon submitted without the guard is still adopted.
            if found:
                self.adopt(alloc, found[0])
            else:
                log.info(
                    "lane %s: allocation %s never reached sbatch; submitting it now",
                    self.lane.name,
                    alloc.allocation_id,
                )
                self._resubmit(alloc)
            return
        if state.kind in ("in_doubt", "answer"):
            alloc.in_doubt = state.token
        decision = decide(
            found,
            absent_looks=alloc.absent_looks,
            accounting=self.lane.settings.accounting == "sacct",
        )
        alloc.absent_looks = decision.absent_looks
        if decision.action == "adopt" and decision.job_id is not None:
            self.adopt(alloc, decision.job_id)
        elif decision.action == "look_again":
            alloc.due = retry
        elif decision.action == "not_submitted":
            self._resubmit(alloc, supersede=alloc.in_doubt)
        else:
            self.mark_reattach_failed(alloc, decision.reason)

    def _resubmit(self, alloc: PackedAllocation, supersede: str | None = None) -> None:
        """Submit again under the same identity: the script is rebuilt from the intent's
        elements and must hash to what the intent recorded."""
        if alloc.script is None:
            profile, intent = alloc.known
            try:
                specs = [self.lane.ctx.store.read(job) for job in alloc.keys]
                tasks = [element_task(Element.of(spec)) for spec in specs]
                directives = sbatch_args(alloc.allocation_id, len(tasks), profile)
                script = batch_script(alloc.allocation_id, tasks, profile, directives)
            except (VqError, RosterRefused, ValueError) as exc:
                self.mark_reattach_failed(alloc, f"its script cannot be rebuilt: {exc}")
                return
            if hashlib.sha256(script).hexdigest() != intent.script_sha256:
                self.mark_reattach_failed(alloc, "its rebuilt script differs from the intent's")
                return
            alloc.script = script
        log.info(
            "lane %s: allocation %s was never submitted; submitting it now",
            self.lane.name,
            alloc.allocation_id,
        )
        self._submit(alloc, supersede)

    def adopt(
        self, alloc: PackedAllocation, job_id: str, *, elements: Iterable[str] | None = None
    ) -> None:
        """Observe ``alloc`` as Slurm job ``job_id`` from now on, recording it as the
        receipt of ``elements`` (default: every member)."""
        alloc.job_id, alloc.phase, alloc.absent_looks = job_id, "queued", 0
        for position, element in enumerate(alloc.members if elements is None else elements):
            if position == 1:
                _fault_points.crash_point("packed_during_receipt")
            self._record(
                element,
                {"scheduler_job_id": job_id, "scheduler_state": "queued"},
                event="dispatched",
            )
        alloc.due = self.lane.monotonic()

    def mark_reattach_failed(self, alloc: PackedAllocation, why: str) -> None:
        alloc.phase = "reattach_failed"
        for element in alloc.members:
            self._record(element, {"scheduler_state": "reattach_failed"})
        log.error(
            "lane %s: allocation %s (vqp-%s) is in doubt: %s; its elements keep their "
            "capacity until an operator decides",
            self.lane.name,
            alloc.allocation_id,
            alloc.allocation_id,
            why,
        )

    def _fail_all(self, alloc: PackedAllocation, reason: str) -> None:
        for element in list(alloc.members):
            self._record(element, {"scheduler_state": "not_submitted"})
            self.lane.lifecycle.fail_dispatch(element, reason)
        self._forget(alloc)

    # --- an operator's decision -------------------------------------------------------------
    def resolve(self, job_id: str, scheduler_job_id: str | None) -> dict[str, Any]:
        """Settle the allocation in doubt of the element ``job_id`` (on the loop; see
        :func:`.packed_recovery.resolve_packed`)."""
        from .packed_recovery import resolve_packed

        return resolve_packed(self, job_id, scheduler_job_id)
