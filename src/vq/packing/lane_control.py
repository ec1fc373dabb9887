"""What a packed lane allocation's daemon does on a kill and after a restart (pure).

**Kill** (:func:`kill_action`). ``vq kill ID`` on a packed element writes ``KILLED`` first
(terminal states are sticky: the slot's later marker or step row never changes it); then
the lane sends at most one of:

* no receipt yet (the intent is written, ``sbatch`` in flight or in doubt): nothing; the
  kill stays wanted and is applied once the allocation's job id is known;
* every element of the allocation settled (killed or ended) while it is queued or
  running: ``scancel JOBID``, nothing in it is wanted any more;
* the slot's step running: ``scancel JOBID.STEP`` (found by the step's name,
  :meth:`~vq.packing.cases.remote.PackRemote.cancel_slot`);
* **a slot not running yet** (the allocation queued with other elements still wanted, or
  started but the slot's step not yet shown): a slot cannot be taken out of a submitted
  script, so the kill stays wanted and is retried every poll; the step is cancelled as
  soon as ``squeue --steps`` shows it, until the allocation ends. A slot that ends
  before it is seen (its marker is there) is left alone;
* the allocation ended, or the slot's marker is there: nothing.

**Restart** (:func:`recovery_step`). The elements recorded with one allocation identity
are rebuilt from their specs and the allocation's intent. The order of writes at
dispatch is: claim every element (``RUNNING``, ``scheduler_pack_id``,
``scheduler_pack_slot``), write and sync the intent, mark them ``submitting``, run
``sbatch``, record the receipt. So:

* all elements carry one receipt → ``observe`` that job;
* no receipt and the intent names exactly these elements and attempts → ``look_up``
  (:func:`~vq.packing.lane_intent.decide` over
  :meth:`~vq.packing.cases.remote.PackRemote.allocation_jobs`);
* no intent file at all and no element past the claim → ``redispatch``: the intent is
  synced before ``sbatch``, so nothing was sent; the elements are submitted again under
  the same identity;
* anything else (an unreadable intent, elements that disagree on the receipt, an element
  the intent does not name, a slot or attempt that differs, an element ``submitting``
  without an intent) → ``reattach_failed``: capacity stays held and an operator decides.
  Never the single-job tag look-up, which would not find a ``vqp-<alloc>`` job and would
  resubmit it blindly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from vq.dialects.slurm_alloc import State
from vq.packing.lane_intent import PackIntent

__all__ = ["KillAction", "Member", "RecoveryStep", "kill_action", "recovery_step"]

KillAction = Literal[
    "wait_for_receipt", "cancel_allocation", "cancel_step", "retry_step", "nothing"
]


def kill_action(
    *,
    receipt: bool,
    allocation: State | None,
    others_settled: bool,
    step_running: bool,
    marker_written: bool,
) -> KillAction:
    """What to send for one killed element (see module doc).

    ``allocation``: the allocation's state (None: not observed yet, as if queued);
    ``others_settled``: every other element of the allocation is killed or ended;
    ``step_running``: ``squeue --steps`` shows the slot's step; ``marker_written``: the
    slot's exit marker exists."""
    if not receipt:
        return "wait_for_receipt"
    if allocation in ("SUCCEEDED", "FAILED", "CANCELLED") or marker_written:
        return "nothing"
    if others_settled:
        return "cancel_allocation"
    if step_running:
        return "cancel_step"
    return "retry_step"


@dataclass(frozen=True)
class Member:
    """A nonterminal element recorded with one allocation identity, as its spec says."""

    job_id: str
    retry_count: int
    slot: int | None
    scheduler_state: str | None
    scheduler_job_id: str | None


@dataclass(frozen=True)
class RecoveryStep:
    """``observe`` (``job_id`` is the allocation), ``complete_receipt`` (as ``observe``,
    once the elements without the receipt have it too), ``look_up``, ``redispatch`` or
    ``reattach_failed`` (``reason`` says why)."""

    action: Literal["observe", "complete_receipt", "look_up", "redispatch", "reattach_failed"]
    job_id: str | None = None
    reason: str = ""


def recovery_step(
    allocation_id: str,
    members: Sequence[Member],
    intent: PackIntent | None,
    *,
    intent_exists: bool,
) -> RecoveryStep:
    """The step that continues allocation ``allocation_id`` after a restart.

    ``intent`` is the decoded intent (None when absent or unreadable);
    ``intent_exists``: a file is there, readable or not."""
    receipts = {m.scheduler_job_id for m in members if m.scheduler_job_id is not None}
    if len(receipts) > 1:
        return _failed(f"its elements name different jobs ({', '.join(sorted(receipts))})")
    if receipts and all(m.scheduler_job_id is not None for m in members):
        return RecoveryStep("observe", receipts.pop())
    if receipts and intent is None:
        return _failed("only some of its elements carry the receipt, and its intent is gone")
    if intent is None:
        if intent_exists:
            return _failed("its intent cannot be read")
        if any(m.scheduler_state not in (None, "claimed") for m in members):
            return _failed("an element is past the claim but the intent is missing")
        return RecoveryStep("redispatch")
    if intent.allocation_id != allocation_id:
        return _failed(f"its intent names allocation {intent.allocation_id}")
    for member in members:
        slot = intent.slot_of(member.job_id)
        if slot is None or slot != member.slot:
            return _failed(f"element {member.job_id} is not in slot {member.slot} of its intent")
        if intent.members[slot][1] != member.retry_count:
            return _failed(f"element {member.job_id} is on another attempt than its intent")
    if receipts:
        # The receipt is written element by element after sbatch answered: a stop in
        # between leaves it on some. It names this allocation's job (the intent vouches
        # for every element), so the rest take it too.
        return RecoveryStep("complete_receipt", receipts.pop())
    return RecoveryStep("look_up")


def _failed(why: str) -> RecoveryStep:
    return RecoveryStep("reattach_failed", reason=why)
