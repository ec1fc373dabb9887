"""Submission of a lane's packed allocations (on the daemon loop; every cluster call on
the lane's worker): dispatch, submit and look up.

1. **dispatch** (:meth:`PackedSubmission.dispatch`): claim the batch
   :func:`~vq.packing.lane_batch.next_batch` picks from the pending elements of one array
   (PENDING → RUNNING), recording each element's ``scheduler_pack_id``/
   ``scheduler_pack_slot`` (``scheduler_state = "claimed"``); then the **intent**
   ``lane-packs/<lane>/<alloc>.json`` (:mod:`vq.packing.lane_intent`) written and synced,
   then every element ``submitting`` durably;
2. **submit**: every slot's workspace and the script staged and ``sbatch --parsable`` run
   in one call under the allocation's submit guard (:mod:`vq.dialects.submit_guard`); the
   receipt (read by the Slurm dialect's one receipt parser) is recorded on every element
   (``queued``). A refusal fails the elements; an unreachable controller is retried
   after a growing delay; an ambiguous answer is never resubmitted blindly: the
   allocation is looked up by its identity (:func:`~vq.packing.lane_intent.decide`).
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from dataclasses import dataclass

from vq import _fault_points
from vq._fs import atomic_write_bytes
from vq.dialects.slurm_alloc import ObservationError, parse_receipt
from vq.dialects.submit_guard import GuardState
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
from vq.packing.lane_intent import decide, encode_intent, intent_of
from vq.packing.planner import PlanRefused
from vq.packing.roster import RosterRefused
from vq.packing.script import sbatch_args

from .jobs import SubmitVerdict, ambiguous, controller_unreached
from .outcome import unreached_retry
from .packed_ports import PackHost
from .packed_state import PackedAllocation, PackedAllocations
from .remote import pack_archive

__all__ = ["PackedSubmission", "answer_verdict"]

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
            return "accepted", parse_receipt(state.stdout).scheduler_job_id
        except ObservationError as exc:
            return "ambiguous", str(exc)
    detail = state.stderr.strip()[-300:] or f"exit status {state.rc}"
    if controller_unreached(detail):
        return "unreached", detail
    return ("ambiguous" if ambiguous(detail) else "refused"), detail


class PackedSubmission:
    """Dispatch, submit and look up the allocations of ``packs`` (module docstring)."""

    def __init__(self, packs: PackedAllocations) -> None:
        self.packs = packs

    @property
    def host(self) -> PackHost:
        return self.packs.host

    # --- dispatch ---------------------------------------------------------------------------
    def dispatch(self, specs: list[JobSpec], free: int) -> int:
        """Pack the due PENDING elements of ``specs`` into new allocations, at most
        ``free`` elements; returns how many were taken."""
        groups: dict[tuple[str, str], list[JobSpec]] = {}
        now = self.host.ctx.now()
        for spec in specs:
            if spec.not_before is not None and spec.not_before > now:
                continue
            if spec.depends_on or spec.depends_on_any:
                gate = evaluate(spec.depends_on, spec.depends_on_any, self.host.dependency_state)
                if gate.cascade:
                    self.host.lifecycle.fail_pending(spec.id, gate.reason or "a dependency failed")
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
        lifecycle = self.host.lifecycle
        profile = self.packs.profiles.get(name)
        if self.packs.remote is None or profile is None or profile.target.host != self.host.name:
            why = f"packing profile {name!r} no longer targets lane {self.host.name}"
            for spec in specs:
                lifecycle.fail_pending(spec.id, why)
            return 0
        limit = specs[0].array_max_parallel
        if limit is not None:  # --max-parallel: the array's elements holding capacity count
            running = self.packs.running_in_group(group)
            free = min(free, limit - running)
        try:
            batch = next_batch(
                self.host.name, group, [Element.of(s) for s in specs], profile, free=free
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
                self.packs.record(spec.id, dict.fromkeys(stale))
        claimed: list[str] = []
        for slot, element in enumerate(batch.elements):
            try:
                moved = lifecycle.claim(element.job_id, workdir=f"{work}/{slot}")
            except VqError as exc:
                log.warning("lane %s: cannot claim %s: %s", self.host.name, element.job_id, exc)
                moved = None
            if moved is None or not moved.changed:
                for job_id in claimed:  # nothing was sent: back to PENDING
                    lifecycle.requeue_unlaunched(job_id, "its allocation changed before sbatch")
                return 0
            claimed.append(element.job_id)
            self.packs.record(
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
            lane=self.host.name,
            group=group,
            profile=name,
            script_sha256=sha,
            now=self.host.ctx.now(),
        )
        path = self.packs.intent_path(alloc_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, encode_intent(intent), mode=0o600, durable=True)
        _fault_points.crash_point("packed_after_intent")
        for job_id in claimed:
            self.packs.record(job_id, {"scheduler_state": "submitting"})
        members = {job_id: slot for slot, job_id in enumerate(claimed)}
        alloc = PackedAllocation(alloc_id, profile, intent, batch.script, members)
        self.packs.by_id[alloc_id] = alloc
        self.submit(alloc)
        return len(claimed)

    def submit(self, alloc: PackedAllocation, supersede: str | None = None) -> None:
        """Stage every slot's workspace and the script, then ``sbatch``, in one call under
        the allocation's submit guard (``sbatch`` runs at most once per allocation unless
        ``supersede`` names the exact call proved never submitted)."""
        remote, script = self.packs.remote, alloc.script
        assert remote is not None and script is not None
        command = remote.stage_submit_command(
            alloc.known[0].target.log_root,
            alloc.work,
            self.packs.records_of(alloc),
            secrets.token_hex(8),
            supersede,
        )
        workspaces = [self.host.ctx.paths.workspace(job) for job in alloc.keys]
        alloc.busy, alloc.phase = True, "submitting"

        def work() -> GuardState | _Unstaged:
            try:
                archive = pack_archive(workspaces, script, STAGED_SCRIPT)
            except OSError as exc:
                return _Unstaged(f"the workspaces could not be read for staging: {exc}")
            return remote.submit_guarded(command, archive)

        self.host.run_on_worker(work, lambda r: self._submitted(alloc, r))

    def _submitted(self, alloc: PackedAllocation, result: object) -> None:
        alloc.busy = False
        if isinstance(result, _Unstaged):  # nothing was sent
            self.packs.fail_all(alloc, result.reason)
            return
        if isinstance(result, GuardState):
            self._answered(alloc, result)
            return
        if isinstance(result, TransportError):
            self.host.host_failed(result)
        log.warning(
            "lane %s: submission of allocation %s is ambiguous (%s)",
            self.host.name,
            alloc.allocation_id,
            result,
        )
        alloc.phase = "looking_up"
        alloc.due = self.host.monotonic() + self.host.settings.absent_recheck_seconds

    def _answered(self, alloc: PackedAllocation, state: GuardState) -> None:
        """What the submit guard said, from a submit call or a look-up's probe (on the
        loop): sbatch's own answer decides when there is one (adopt, refuse, or retry an
        unreachable controller); otherwise the allocation is looked up again."""
        recheck = self.host.monotonic() + self.host.settings.absent_recheck_seconds
        if state.kind == "answer":
            verdict, said = answer_verdict(state)
            if verdict == "accepted":
                _fault_points.crash_point("packed_after_sbatch")
                alloc.in_doubt = alloc.supersede = None
                self.packs.adopt(alloc, said)
                return
            if verdict == "unreached":
                self._unreached(alloc, state.token, said)
                return
            if verdict == "refused":
                self.packs.fail_all(alloc, f"the scheduler refused the allocation: {said}")
                return
            alloc.in_doubt = state.token
        elif state.kind == "stage_failed":
            detail = state.stderr.strip()[-300:] or "no reason given"
            self.packs.fail_all(
                alloc, f"staging the workspaces on {self.host.name} failed: {detail}"
            )
            return
        elif state.kind == "no_lock":
            self.packs.fail_all(
                alloc,
                f"the login host of lane {self.host.name} cannot lock files below its "
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
            self.host.name,
            alloc.allocation_id,
            "still running on the login host" if state.kind == "busy" else "in doubt",
        )
        alloc.phase, alloc.due = "looking_up", recheck

    def _unreached(self, alloc: PackedAllocation, token: str | None, detail: str) -> None:
        """sbatch never reached the controller: nothing was submitted. The allocation is
        submitted again after a growing delay, superseding exactly that call."""
        alloc.supersede, alloc.unreached = token, alloc.unreached + 1
        delay, reason = unreached_retry(self.host.settings, alloc.unreached, detail)
        alloc.phase, alloc.due = "submit_retry", self.host.monotonic() + delay
        for element in alloc.members:
            self.packs.record(
                element,
                {"scheduler_state": "submit_retry", "scheduler_queued_reason": reason},
                durable=False,
            )
        log.warning(
            "lane %s: allocation %s: %s; submitting again in %.0f s",
            self.host.name,
            alloc.allocation_id,
            detail,
            delay,
        )

    def look_up(self, alloc: PackedAllocation) -> None:
        remote = self.packs.remote
        assert remote is not None
        alloc.busy = True
        since, records = alloc.known[1].window_start(), self.packs.records_of(alloc)

        def work() -> tuple[GuardState, list[str] | None]:
            state = remote.submit_state(records)
            if state.kind in ("busy", "no_lock") or (
                state.kind == "answer" and answer_verdict(state)[0] != "ambiguous"
            ):
                return state, None  # the guard's answer decides
            return state, remote.allocation_jobs(alloc.allocation_id, since)

        self.host.run_on_worker(work, lambda result: self._looked_up(alloc, result))

    def _looked_up(self, alloc: PackedAllocation, result: object) -> None:
        alloc.busy = False
        retry = self.host.monotonic() + self.host.settings.absent_recheck_seconds
        if not isinstance(result, tuple):
            if isinstance(result, TransportError):
                self.host.host_failed(result)
            log.warning("lane %s: look-up of %s failed: %s", self.host.name, alloc, result)
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
                self.packs.adopt(alloc, found[0])
            else:
                log.info(
                    "lane %s: allocation %s never reached sbatch; submitting it now",
                    self.host.name,
                    alloc.allocation_id,
                )
                self.resubmit(alloc)
            return
        if state.kind in ("in_doubt", "answer"):
            alloc.in_doubt = state.token
        decision = decide(
            found,
            absent_looks=alloc.absent_looks,
            accounting=self.host.settings.accounting == "sacct",
        )
        alloc.absent_looks = decision.absent_looks
        if decision.action == "adopt" and decision.job_id is not None:
            self.packs.adopt(alloc, decision.job_id)
        elif decision.action == "look_again":
            alloc.due = retry
        elif decision.action == "not_submitted":
            self.resubmit(alloc, supersede=alloc.in_doubt)
        else:
            self.packs.mark_reattach_failed(alloc, decision.reason)

    def resubmit(self, alloc: PackedAllocation, supersede: str | None = None) -> None:
        """Submit again under the same identity: the script is rebuilt from the intent's
        elements and must hash to what the intent recorded."""
        if alloc.script is None:
            profile, intent = alloc.known
            try:
                specs = [self.host.ctx.store.read(job) for job in alloc.keys]
                tasks = [element_task(Element.of(spec)) for spec in specs]
                directives = sbatch_args(alloc.allocation_id, len(tasks), profile)
                script = batch_script(alloc.allocation_id, tasks, profile, directives)
            except (VqError, RosterRefused, ValueError) as exc:
                self.packs.mark_reattach_failed(alloc, f"its script cannot be rebuilt: {exc}")
                return
            if hashlib.sha256(script).hexdigest() != intent.script_sha256:
                self.packs.mark_reattach_failed(
                    alloc, "its rebuilt script differs from the intent's"
                )
                return
            alloc.script = script
        log.info(
            "lane %s: allocation %s was never submitted; submitting it now",
            self.host.name,
            alloc.allocation_id,
        )
        self.submit(alloc, supersede)
